"""What SGLang 0.5.23 holds back for a multimodal model's encoder, beside the KV pool.

1. The vision tower's activations: when mem_fraction_static is its default, SGLang lowers it for a VLM
   (sglang@v0.5.23 python/sglang/srt/arg_groups/memory_hook.py#L283-L289 is_vlm, #L330-L337, #L417-L462
   adjust_mem_fraction_for_vlm), by the tower's size against a ViT-L/14 (24 layers x 1024 wide):
       complexity = vision num_hidden_layers x hidden_size**2 / (24 x 1024**2)
       factor     = 0.95 x clamp(1 - 0.1 x (complexity - 1), 0.8, 1.05)
       mem_fraction_static = default x factor            (not rounded again)
   Qwen2.5-VL-7B (32 layers x 1280): complexity 2.0833, factor 0.847083; on an H100 0.835 -> 0.707315, the
   fraction SGLang's own ServerArgs resolution gives (0.7073145833333332, run on the CPU). The room moves from
   the KV pool to the reserve beside it, where the encoder runs.
2. The multimodal embedding cache: SGLANG_VLM_CACHE_SIZE_MB, 100 MiB by default (environ.py#L1598), taken out of
   the KV budget (mem_cache/kv_cache_configurator.py#L202-L218 mm_runtime_reservation_gb, #L3034-L3038) and
   allocated after the pool (mem_cache/kv_cache_builder.py#L479-L480 init_mm_embedding_cache).

A model is multimodal for SGLang (configs/model_config.py#L690-L717, #L820-L828) unless its architecture is one
SGLang serves text-only by default (Gemma 3, Llama 4, Step3-VL, Inkling: --enable-multimodal turns them on); kvmem
reads that from a vision_config or audio_config in the config. The tower's layers are its vision_config's
num_hidden_layers as SGLang's config object has it, for the model types in VISION_LAYERS_KEY; another tower is a
warning, and the fraction then is the text model's. Qwen3-VL on a Hopper GPU of 60 GiB or more
gets other serving defaults (arg_groups/model_overrides/qwen3_vl.py#L81-L138: no embedding cache, CUDA-IPC
feature transport): kvmem warns there too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from ...logcheck.base import LineCheck, logged_number, strip_prefix
from ...records import Record

MIB = 1 << 20
EMBEDDING_CACHE_BYTES = 100 * MIB          # SGLANG_VLM_CACHE_SIZE_MB = EnvInt(100), environ.py#L1598
BASELINE_LAYERS, BASELINE_HIDDEN = 24, 1024                      # memory_hook.py#L443-L445 (ViT-L/14)
BASE_FACTOR = Fraction(95, 100)                                  # #L438, #L461
SENSITIVITY = Fraction(1, 10)                                    # #L457-L458
FACTOR_MIN, FACTOR_MAX = Fraction(8, 10), Fraction(105, 100)     # #L459
# configs/model_config.py#L692-L697: served text-only unless --enable-multimodal
TEXT_ONLY_BY_DEFAULT = ("Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                        "Step3VLForConditionalGeneration", "InklingForConditionalGeneration")
# The vision tower's layer count by model type, where SGLang reads the transformers 5.24.0 config class (its
# num_hidden_layers: "depth" through attribute_map {"num_hidden_layers": "depth"}, models/qwen2_vl/
# configuration_qwen2_vl.py#L31, qwen2_5_vl #L51, qwen3_vl #L42, qwen3_vl_moe #L136, qwen3_5 #L134, qwen3_5_moe #L146;
# Gemma 4 its own num_hidden_layers). Checked against SGLang's ServerArgs resolution on an 80 GB H100:
# Qwen2.5-VL-7B 0.707315, Qwen3-VL-32B and Gemma-4-26B-A4B 0.759630 (0.835 x 0.909736). Other towers
# (remote-code configs such as MiniMax-M3's or Kimi-K3's, which SGLang may read as a dict and so as a 24 x 1024
# ViT-L) are a warning.
VISION_LAYERS_KEY = {"qwen2_vl": "depth", "qwen2_5_vl": "depth", "qwen3_vl": "depth", "qwen3_vl_moe": "depth",
                     "qwen3_5": "depth", "qwen3_5_moe": "depth", "gemma4": "num_hidden_layers"}
HOPPER_QWEN3_VL = ("qwen3_vl", "qwen3_vl_moe")                   # model_overrides/qwen3_vl.py#L17-L31


@dataclass(frozen=True)
class EncoderReserve(Record):
    """SGLang's multimodal terms for one model: the mem_fraction_static factor (None: SGLang applies one kvmem
    cannot read, ``warning`` says why) and the embedding cache taken out of the KV budget."""

    vision_layers: int | None
    vision_hidden_size: int | None
    factor: Fraction | None
    embedding_cache_bytes: int
    warning: str = ""


def multimodal(config: dict) -> bool:
    """Whether SGLang 0.5.23 serves the model (its raw config.json) as multimodal by default."""
    architectures = config.get("architectures") or []
    if architectures and architectures[0] in TEXT_ONLY_BY_DEFAULT:
        return False
    return bool(config.get("vision_config") or config.get("audio_config"))


def vlm_factor(vision_layers: int, vision_hidden_size: int) -> Fraction:
    """adjust_mem_fraction_for_vlm's factor (memory_hook.py#L432-L462), exact."""
    for name, value in (("vision_layers", vision_layers), ("vision_hidden_size", vision_hidden_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    complexity = Fraction(vision_layers * vision_hidden_size ** 2, BASELINE_LAYERS * BASELINE_HIDDEN ** 2)
    adjustment = min(FACTOR_MAX, max(FACTOR_MIN, 1 - SENSITIVITY * (complexity - 1)))
    return BASE_FACTOR * adjustment


def _tower(config: dict) -> tuple[int | None, int | None]:
    key = VISION_LAYERS_KEY.get(str(config.get("model_type") or ""))
    vision = config.get("vision_config") or {}
    return (vision.get(key), vision.get("hidden_size")) if key else (None, None)


def encoder_reserve(config: dict, *, hopper_60gib: bool = False) -> EncoderReserve | None:
    """SGLang's encoder terms for a model (its raw config.json); None for a model it serves text-only.
    ``hopper_60gib``: the GPU is a Hopper (SM 9.0) of 60 GiB or more (Qwen3-VL's serving overrides)."""
    if not multimodal(config):
        return None
    if not config.get("vision_config"):
        return EncoderReserve(None, None, Fraction(1), EMBEDDING_CACHE_BYTES)
    layers, hidden = _tower(config)
    if not (isinstance(layers, int) and isinstance(hidden, int) and layers > 0 and hidden > 0):
        return EncoderReserve(None, None, None, EMBEDDING_CACHE_BYTES, warning=(
            "SGLang 0.5.23 lowers mem_fraction_static for a multimodal model by the size of its vision tower "
            "(memory_hook.py adjust_mem_fraction_for_vlm); kvmem reads the tower of Qwen2/2.5/3-VL, Qwen3.5 and "
            "Gemma 4 only (not this model type's), so the fraction here is the text model's: give "
            "-o mem_fraction_static=... from SGLang's log"))
    factor = vlm_factor(layers, hidden)
    if hopper_60gib and config.get("model_type") in HOPPER_QWEN3_VL:
        # no embedding cache (SGLANG_VLM_CACHE_SIZE_MB set to 0) but a CUDA-IPC feature-transport pool
        return EncoderReserve(layers, hidden, factor, 0, warning=(
            f"SGLang 0.5.23 serves {config['model_type']} on a Hopper GPU of 60 GiB or more with other defaults (no "
            "embedding cache; a CUDA-IPC feature-transport pool, SGLANG_MM_FEATURE_CACHE_MB, out of the KV budget; "
            "the decode graph grown to --max-running-requests: arg_groups/model_overrides/qwen3_vl.py#L33-L138) "
            "that kvmem does not model; its log's 'Reserving X GB of the KV budget' states the pool"))
    return EncoderReserve(layers, hidden, factor, EMBEDDING_CACHE_BYTES)


def _hopper_60gib(gpu) -> bool:
    """is_sm90_supported() and 60 GiB or more (model_overrides/qwen3_vl.py#L20-L26; memory in MiB as nvidia-smi
    gives it, kvmem.gpus.GPU.memory_bytes)."""
    capability = getattr(gpu, "compute_capability", None)
    return bool(capability and capability[0] == 9 and gpu.memory_bytes // MIB >= 60 * 1024)


def reserve_for(model, gpu) -> EncoderReserve | None:
    """encoder_reserve for a kvmem Model (its raw config) on ``gpu``."""
    return encoder_reserve(model.config or {}, hopper_60gib=_hopper_60gib(gpu))


def vlm_defaults(model, gpu, defaults, *, given: bool):
    """``defaults`` (kvmem.engines.base.EngineDefaults: SGLang's default mem_fraction_static for the text model)
    with the vision tower's factor (module docstring), unless the fraction is ``given``."""
    reserve = reserve_for(model, gpu)
    if given or reserve is None or reserve.factor in (None, 1):
        return defaults
    mfs = defaults.values["mem_fraction_static"] * reserve.factor
    return type(defaults)(defaults.engine, {**defaults.values, "mem_fraction_static": mfs},
                          f"{defaults.reason}; x {float(reserve.factor):.6f} for the vision tower "
                          f"({reserve.vision_layers} layers x {reserve.vision_hidden_size}, memory_hook.py "
                          f"adjust_mem_fraction_for_vlm): {float(mfs):.6f}")


def budget_terms(model, gpu) -> tuple[int, tuple[str, ...]]:
    """The bytes SGLang takes out of the KV budget for a multimodal model (the embedding cache) and the fit's
    notes on its encoder terms."""
    reserve = reserve_for(model, gpu)
    if reserve is None:
        return 0, ()
    if reserve.warning:
        return reserve.embedding_cache_bytes, (reserve.warning,)
    if not reserve.embedding_cache_bytes:
        return 0, ()
    return reserve.embedding_cache_bytes, (
        f"SGLang multimodal embedding cache: {reserve.embedding_cache_bytes // MIB} MiB out of the KV budget, counted "
        "with the activations (SGLANG_VLM_CACHE_SIZE_MB; kv_cache_configurator.py mm_runtime_reservation_gb)",)


# "Reserving X GB of the KV budget for post-sizing multimodal allocations (feature-transport pools + embedding
# cache)." (kv_cache_configurator.py#L213-L218, X = reserved MiB / 1024 to two decimals)
RESERVING = re.compile(r"Reserving ([0-9]+(?:\.[0-9]+)?) GB of the KV budget for post-sizing multimodal")


def read_reserve_line(lines: list[str]) -> tuple | None:
    """The first "Reserving X GB of the KV budget ..." line: (line number, text, X as printed)."""
    for n, line in enumerate(lines, 1):
        if "Reserving" in line and (m := RESERVING.search(line)):
            logged_number(m.group(1), n, line, float)          # a number no server prints is refused
            return n, strip_prefix(line, "Reserving"), m.group(1)
    return None


def check_reserve_line(model, logged: tuple, checks: list, notes: list) -> None:
    """The multimodal reservation SGLang logs against the embedding cache kvmem takes out of the KV budget."""
    n, text, printed = logged
    config = model.config or {}
    if config.get("model_type") in HOPPER_QWEN3_VL:
        notes.append(f"line {n}: {config['model_type']}'s reservation depends on the GPU (Hopper of 60 GiB or more: a "
                     "feature-transport pool, model_overrides/qwen3_vl.py); it is not checked")
        return
    reserve = encoder_reserve(config)
    ours = reserve.embedding_cache_bytes if reserve else 0
    expected = f"{ours / MIB / 1024:.2f}"
    ok = expected == printed
    checks.append(LineCheck(n, text, "multimodal reservation", f"{printed} GB", f"{expected} GB", ok, "" if ok else (
        "another SGLANG_VLM_CACHE_SIZE_MB, a GPU feature-transport pool (--mm-feature-transport cuda_ipc/cuda_vmm: "
        "SGLANG_MM_FEATURE_CACHE_MB more) or a model kvmem reads as text-only")))
