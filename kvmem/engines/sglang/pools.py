"""SGLang's memory pools: the layout of a model's layers (full, SWA, MLA, NSA, Mamba) and their bytes.

Over 300 lines by design: one pool layout per attention type (full, SWA, MLA, NSA, Mamba), each
beside its SGLang source.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from numbers import Real

from ...configs.fields import Fields
from ...dtypes import DType, dtype
from ...layer import FULL, LINEAR, MLA, SHARED, SLIDING, RecurrentState
from ...model import Model
from ...parallel import divides, kv_heads_per_rank, pp_stages, require_divides
from ...units import require_positive_int
from ..declared import Option
from .families import EXPANDED_MLA, expanded_mla_shape, minimax_sparse
from .families import check as check_family
from .inkling import CONV_STATE_BYTES, inkling_layout, is_inkling, resolve_options
from .own_configs import check_interval, sglang_model

GB = 1 << 30  # SGLang's "GB": sglang@v0.5.23 python/sglang/srt/mem_cache/memory_pool.py#L116

DEFAULTS = {
    "page_size": 1,                      # server_args.py ServerArgs.page_size
    "swa_full_tokens_ratio": 0.8,        # server_args.py ServerArgs.swa_full_tokens_ratio
    "disable_hybrid_swa_memory": False,  # server_args.py ServerArgs.disable_hybrid_swa_memory
    "mamba_full_memory_ratio": 0.9,      # server_args.py ServerArgs.mamba_full_memory_ratio
    "mamba_ssm_dtype": "fp32",           # server_args.py ServerArgs.mamba_ssm_dtype = "float32"
    # Which release's log line: "latest" (0.5.23) or an earlier release such as "0.5.12" (no
    # "dtype: torch.bfloat16, " field before 0.5.13).
    "version": "latest",
    # The scheduler's settings that size a hybrid's state pool and cap its requests (kvmem.engines.sglang.mamba):
    "max_running_requests": None,        # server_args.py --max-running-requests (None: SGLang's estimate)
    "max_mamba_cache_size": None,        # --max-mamba-cache-size (None: from mamba_full_memory_ratio)
    "disable_radix_cache": False,        # --disable-radix-cache
    # --mamba-radix-cache-strategy extra_buffer (ping-pong tracking slots); None: SGLang's "auto", resolved by
    # architecture (kvmem.engines.sglang.mamba.resolve_extra_buffer: extra_buffer for Qwen3-Next/3.5, Nemotron-H, ...)
    "mamba_extra_buffer": None,
    "disable_overlap_schedule": False,   # --disable-overlap-schedule
}
# the pool options typed beyond their default (kvmem.engines.declared.Option)
POOL_DECLARED = (
    Option("mamba_extra_buffer", None, choices=(True, False),
           help="--mamba-radix-cache-strategy extra_buffer (True: 3 + 2 state slots a request) or no_buffer (False); "
                "unset: SGLang 0.5.23's auto, extra_buffer for Qwen3-Next/3.5, Nemotron-H, Kimi-Linear, ... "
                "(kvmem.engines.sglang.mamba.resolve_extra_buffer)"),
)
# "dtype: {torch dtype}, " in "KV Cache is allocated" (srt/mem_cache/memory_pool.py
# KVCache._finalize_allocation_log, sgl-project/sglang@14c3feee): printed by SGLang 0.5.13 (a held-out
# 0.5.13 log), absent from the April 2026 main build 0.0.0.dev11582+g4df60434d (its Qwen3.5-9B log).
_DTYPE_IN_LOG = (0, 5, 13)
_LATEST = (0, 5, 23)
# KVCache.dtype as SGLang prints it (torch dtype of the cache; fp4_e2m1 packs two values a byte)
TORCH_DTYPES = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16",
                "fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2",
                "nvfp4": "torch.float4_e2m1fn_x2"}
# Buffers per layer (fp8 is stored as uint8, 1 byte):
#   MHA  K (size + page_size, heads, head_dim), V (size + page_size, heads, v_head_dim); the extra page is slot 0,
#        written by padded tokens (sglang@v0.5.23 python/sglang/srt/mem_cache/memory_pool.py#L2580-L2648
#        MHATokenToKVPool._create_buffers_normal). fp4_e2m1 (kvmem "nvfp4"): K and V (size + page, heads,
#        head_dim // 2) plus one uint8 scale per 16 values, (size + page, heads * head_dim // 16) each, V with
#        head_dim too (#L3622-L3669 MHATokenToKVPoolFP4)
#   MLA  one buffer (size + page_size, 1, kv_lora_rank + qk_rope_head_dim) (#L4856-L4871 MLATokenToKVPool); fp4:
#        (size + page, 1, dim // 2) + (size + page, dim // 16) (#L5134-L5165 MLATokenToKVPoolFP4)
#   NSA  DeepSeek-V3.2 (#L5279-L5663 DSATokenToKVPool, NSATokenToKVPool before): the latent with fp8 takes
#        kv_lora_rank + kv_lora_rank // 128 * 4 + qk_rope_head_dim * 2 = 656 B (fp8 latent, fp32 scales, bf16
#        rope; sglang@v0.5.23 python/sglang/srt/mem_cache/kv_cache_configurator.py#L3412-L3475
#        calculate_mla_kv_cache_dim), otherwise (rank + rope) elements; plus an indexer buffer (index_bytes).
#        SGLang forces page_size 64 for these models (server_args.py "Setting page size to 64 for DeepSeek
#        NSA.", in the releases kvmem read it in); kvmem does the same and says so in the notes.
NSA_PAGE_SIZE = 64      # server_args.py, DeepSeek NSA models
NSA_QUANT_BLOCK = 128   # NSATokenToKVPool.quant_block_size: one fp32 scale per 128 values
FP4_SCALE_BLOCK = 16    # MHATokenToKVPoolFP4 / MLATokenToKVPoolFP4 scale_block_size
# sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L2651-L2697 is_hybrid_swa_model (with SWA_SINK_ARCHS
# and MIMO_V2_MODEL_ARCHS, #L74-L96). DeepSeek-V4 is sized apart (kvmem.engines.sglang.dsv4).
HYBRID_SWA_ARCHITECTURES = frozenset({
    "BeamForCausalLM", "Llama4ForConditionalGeneration", "GptOssForCausalLM", "GraniteSWAForCausalLM",
    "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM", "IQuestQ1MTP", "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM",
    "MiMoV2MTP", "Step3p5ForCausalLM", "Step3p5MTP", "Step3p7ForConditionalGeneration", "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration", "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration",
    "DiffusionGemmaForBlockDiffusion", "LagunaForCausalLM", "MellumForCausalLM", "MuseGlimmerForCausalLM",
    "MuseGlimmerForConditionalGeneration", "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP",
    "UnlimitedOCRForCausalLM"})
KV_DTYPES = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "nvfp4")  # --kv-cache-dtype (fp4_e2m1 = nvfp4)


@dataclass(frozen=True)
class Pool:
    """One SGLang KV pool on one rank, as its "KV Cache is allocated" line reports it."""

    role: str            # "full" or "swa"; MiniMax-M3's indexer pools "index" (K and V) and "index_k" (K only)
    layout: str          # "mha", "mla" or "nsa"
    num_tokens: int      # #tokens: the pool's size, without the padding page
    page_size: int
    layers: tuple[int, ...]
    k_bytes: int         # MLA/NSA: the whole buffer (latent + indexer)
    v_bytes: int         # 0 for MLA/NSA
    dtype: str = "torch.bfloat16"   # KVCache.dtype, printed from 0.5.13

    @property
    def kv_bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    def log_line(self, legacy: bool = False, version: str = "latest") -> str:
        """The line SGLang logs for this pool (sglang@v0.5.23 python/sglang/srt/mem_cache/memory_pool.py#L2073-L2099
        KVCache._finalize_allocation_log): from 0.5.13 "KV Cache is allocated. dtype: torch.bfloat16, #tokens: N,
        K size: X GB, V size: Y GB" with GB = 2**30, or "..., KV size: X GB" for MLA/NSA (one buffer; NSA includes
        the indexer); ``version`` before 0.5.13, without the dtype field; ``legacy``: builds before about Feb
        2025, "KV Cache is allocated. K size: X GB, V size: Y GB." (no #tokens)."""
        field = f"dtype: {self.dtype}, " if _release(version) >= _DTYPE_IN_LOG else ""
        if self.layout != "mha":
            return f"KV Cache is allocated. {field}#tokens: {self.num_tokens}, KV size: {self.kv_bytes / GB:.2f} GB"
        if legacy:
            return f"KV Cache is allocated. K size: {self.k_bytes / GB:.2f} GB, V size: {self.v_bytes / GB:.2f} GB."
        return (f"KV Cache is allocated. {field}#tokens: {self.num_tokens}, K size: {self.k_bytes / GB:.2f} GB, "
                f"V size: {self.v_bytes / GB:.2f} GB")

    def to_dict(self) -> dict:
        data = asdict(self)
        data["layers"] = list(self.layers)
        return data


def _release(version) -> tuple[int, ...]:
    """(major, minor, patch) of an SGLang release; "latest" is the release checked, 0.5.23."""
    text = version.strip().lower() if isinstance(version, str) else ""
    if text == "latest":
        return _LATEST
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        raise ValueError(f"version must be 'latest' or an SGLang release such as '0.5.23', got {version!r}")
    return tuple(int(part or 0) for part in match.groups())


@dataclass(frozen=True)
class Layout:
    """How SGLang caches one model: pools, per-token bytes, and the profile's cell."""

    kind: str                      # "mha", "mla", "nsa"
    full: tuple[int, ...]          # model layer indices in the full pool
    swa: tuple[int, ...]           # ... in the SWA pool (hybrid-SWA architectures)
    linear: tuple[int, ...]        # layers with a Mamba/linear state instead
    k_row: dict                    # role -> K bytes per token per layer (MLA/NSA: the latent)
    v_row: dict                    # role -> V bytes per token per layer
    cell: dict                     # role -> the profile's bytes per token per layer
    index_row: int                 # NSA indexer bytes per token per layer
    indexed: frozenset             # layers with an indexer buffer (DSA: all but the shared-top-k layers)
    window: int                    # SWA pool's window (0 without one)
    page_size: int
    heads: int                     # KV heads per rank of the full pool (1 for MLA)
    k_dtype: DType
    conv_bytes: int                # model dtype bytes (Mamba conv state)
    ssm_dtype: DType
    notes: tuple[str, ...]
    # MiniMax-M3 (MiniMaxSparseKVPool): sparse layer -> (index K, index V) bytes per token, one head each
    sparse_index: dict = field(default_factory=dict)
    # a request's (conv, SSM) state bytes per layer where SGLang's config class sizes it apart from the layer kvmem
    # reads (Inkling's InklingConvCacheParams: kvmem.engines.sglang.inkling)
    states: dict = field(default_factory=dict)


def _check_options(page_size, swa_full_tokens_ratio, disable_hybrid_swa_memory,
                   mamba_full_memory_ratio, mamba_ssm_dtype) -> DType:
    require_positive_int("page_size", page_size)
    for name, value in (("swa_full_tokens_ratio", swa_full_tokens_ratio),
                        ("mamba_full_memory_ratio", mamba_full_memory_ratio)):
        if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:  # type: ignore[operator]  # numbers.Real has no comparison in typeshed
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not isinstance(disable_hybrid_swa_memory, bool):
        raise ValueError(f"disable_hybrid_swa_memory must be True or False, got {disable_hybrid_swa_memory!r}")
    ssm = dtype(mamba_ssm_dtype)
    if ssm.name not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"mamba_ssm_dtype must be fp32, bf16 or fp16, got {mamba_ssm_dtype!r}")
    return ssm


def check_scheduling(options: dict) -> dict:
    """max_running_requests, max_mamba_cache_size (None or a positive int) and the three switches."""
    for name in ("max_running_requests", "max_mamba_cache_size"):
        if options.get(name) is not None:
            require_positive_int(name, options[name])
    if options.get("mamba_extra_buffer") is not None and not isinstance(options["mamba_extra_buffer"], bool):
        raise ValueError(f"mamba_extra_buffer must be True, False or None (SGLang's auto), got "
                         f"{options['mamba_extra_buffer']!r}")
    for name in ("disable_radix_cache", "disable_overlap_schedule"):
        if not isinstance(options.get(name, False), bool):
            raise ValueError(f"{name} must be True or False, got {options[name]!r}")
    return options


def _kv_dtype(model: Model, kv_dtype) -> DType:
    name = "nvfp4" if isinstance(kv_dtype, str) and kv_dtype.strip().lower() == "fp4_e2m1" else kv_dtype
    k = dtype(name, model_dtype=model.dtype)
    if k.name not in KV_DTYPES:
        raise ValueError(f"kv_dtype: SGLang caches auto, fp32, fp16, bf16, fp8_e4m3, fp8_e5m2 or "
                         f"fp4_e2m1 (nvfp4), got {kv_dtype!r}")
    return k


def is_hybrid_swa(model: Model) -> bool:
    if "MuseSparkForConditionalGeneration" in model.facts.architectures:
        # sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L2694-L2696: a text config whose is_hybrid_swa is
        # true; SGLang's own MuseSparkTextConfig (registered over transformers', configs/muse_spark.py#L254-L259)
        # says so when a layer is sliding (#L115-L117), its pools' layers from layer_types (model_config.py#L2801-L2811)
        return any(layer.kind == SLIDING for layer in model.layers)
    return any(name in HYBRID_SWA_ARCHITECTURES for name in model.facts.architectures)


# Heads per rank: ModelConfig.get_num_kv_heads is max(1, kv_heads // attn_tp), heads split by tensor parallelism,
# one replicated head when tp > kv_heads (sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L1700-L1711);
# the attention layers require tp to divide the heads (or the heads to divide tp), so other tp are refused
# (kvmem.parallel.kv_heads_per_rank). The MLA latent has no heads: every rank holds all of it.
def _head_shape(model: Model, indices, role: str) -> tuple[int, int, int]:
    shapes = {(layer.kv_heads, layer.head_dim_k, layer.head_dim_v)
              for layer in (model.layers[i] for i in indices) if layer.kind.per_head}
    if len(shapes) != 1:
        raise ValueError(f"SGLang's {role} pool has one head shape for all its layers; "
                         f"{model.name} has {sorted(shapes) or 'none'}")
    return shapes.pop()


def _step3p5_swa_kv_heads(model: Model, kv_heads: int) -> int:
    """Step-3.5's sliding layers take their KV heads from attention_other_setting.num_attention_groups
    (sglang@v0.5.23 python/sglang/srt/models/step3p5.py#L443-L451; configs/model_config.py#L1713-L1724
    get_swa_num_kv_heads sizes the SWA pool from it)."""
    cfg = model.config.get("text_config") if isinstance(model.config.get("text_config"), dict) else model.config
    other = cfg.get("attention_other_setting")     # type: ignore[union-attr]  # cfg is a dict: isinstance above
    groups = other.get("num_attention_groups") if isinstance(other, dict) else None
    if groups is None:
        return kv_heads
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"attention_other_setting.num_attention_groups must be a positive integer, got {groups!r}")
    return groups


def make_layout(model: Model, *, kv_dtype, tp: int, pp: int = 1, page_size: int, swa_full_tokens_ratio,
                disable_hybrid_swa_memory: bool, mamba_full_memory_ratio, mamba_ssm_dtype,
                version="latest", **scheduling) -> Layout:
    _release(version)   # checked here; it changes only the log line
    check_scheduling(scheduling)   # the state pool's settings: read by capacity (kvmem.engines.sglang.mamba)
    ssm_dtype = _check_options(page_size, swa_full_tokens_ratio, disable_hybrid_swa_memory,
                               mamba_full_memory_ratio, mamba_ssm_dtype)
    read = sglang_model(model)
    if read is not model and read != model:
        # a file SGLang's own config class fills otherwise (own_configs): its callers read it through sglang_model
        raise ValueError(f"{model.name}: this config.json leaves out fields SGLang 0.5.23's own config class fills "
                         "otherwise than transformers' (kvmem.engines.sglang.own_configs); give them in the file")
    check_interval(model)
    k_dtype = _kv_dtype(model, kv_dtype)
    check_family(model, tp, pp)
    if is_inkling(model):   # its own pools: full, SWA and a conv state on every layer (kvmem.engines.sglang.inkling)
        if k_dtype.name == "nvfp4":
            raise ValueError("kv_dtype: SGLang's hybrid SWA pool has no fp4_e2m1 (nvfp4) layout")
        parts = inkling_layout(model, tp, k_dtype)
        return Layout(kind="mha", index_row=0, indexed=frozenset(), page_size=page_size, k_dtype=k_dtype,
                      conv_bytes=CONV_STATE_BYTES, ssm_dtype=ssm_dtype, **parts)
    layers = model.layers
    notes = []
    # Which layers have buffers: every decoder layer of the pipeline stage (num_effective_layers = end_layer -
    # start_layer); the sliding-window layers of Gemma-2/3, Mistral-7B-v0.1, Phi-3 and every model outside
    # HYBRID_SWA_ARCHITECTURES are cached at full length. Hybrid-SWA architectures get two pools
    # (sglang@v0.5.23 python/sglang/srt/mem_cache/swa_memory_pool.py#L21-L424 SWAKVPool): full layers in one,
    # sliding/chunked layers in another, unless disable_hybrid_swa_memory. Linear/Mamba hybrids (Qwen3-Next,
    # Qwen3.5, Jamba, Nemotron-H) cache tokens only in their attention layers
    # (sglang@v0.5.23 python/sglang/srt/mem_cache/memory_pool.py#L4228-L4751 HybridLinearKVPool) and keep a
    # per-request state (#L505-L1352 MambaPool): conv (conv_dim / tp, conv_kernel - 1) in the model dtype and the
    # recurrent state in mamba_ssm_dtype (float32 by default:
    # sglang@v0.5.23 python/sglang/srt/configs/mamba_utils.py#L47-L107 mamba2_state_dtype).
    # the state layers: linear/Mamba layers, and attention layers with a Mamba2 mixer beside them (Falcon-H1:
    # sglang@v0.5.23 python/sglang/srt/configs/falcon_h1.py#L291-L315 mamba2_cache_params layers = every layer,
    # full_attention_layer_ids = every layer: both pools hold every layer)
    linear = tuple(i for i, layer in enumerate(layers) if layer.kind == LINEAR or layer.state is not None)
    hybrid_swa = (not linear and not disable_hybrid_swa_memory and is_hybrid_swa(model)
                  and any(layer.kind.windowed for layer in layers))
    if linear:
        full = tuple(i for i, layer in enumerate(layers) if layer.kind in (FULL, MLA))
        swa: tuple[int, ...] = ()
    elif hybrid_swa:
        swa = tuple(i for i, layer in enumerate(layers) if layer.kind.windowed)
        full = tuple(i for i in range(len(layers)) if i not in swa)
    else:
        full, swa = tuple(range(len(layers))), ()
        windowed_heads = {layer.kv_heads for layer in layers if layer.kind.windowed}
        if model.model_type == "step3p5" and any(_step3p5_swa_kv_heads(model, h) != h for h in windowed_heads):
            # one pool sized by num_attention_groups (model_config.py#L1700-L1711 get_num_kv_heads) while the sliding
            # layers write attention_other_setting's groups (models/step3p5.py#L443-L451)
            raise ValueError("attention_other_setting.num_attention_groups differs from num_attention_groups, and "
                             "with the window pool disabled SGLang 0.5.23 sizes every layer of its one pool with "
                             "num_attention_groups while Step-3.5's sliding layers write the other count: kvmem "
                             "does not size that mismatch")
        windowed = sum(layer.kind.windowed for layer in layers)
        if windowed:
            notes.append(f"{windowed} sliding/chunked layers are cached at full length: SGLang keeps a "
                         f"separate window pool only for {', '.join(sorted(HYBRID_SWA_ARCHITECTURES))}"
                         + (" (disabled here)" if disable_hybrid_swa_memory else ""))
    shared = sum(layers[i].kind == SHARED for i in full)
    if shared:
        notes.append(f"{shared} KV-shared layers (Gemma-3n) are given pool buffers like every other layer: "
                     "the pool has one buffer per model layer; whether SGLang skips shared layers is unverified")
    # the Transformers backend runs these MLA families as MHA of the expanded heads (families.expanded_mla_shape)
    expanded = expanded_mla_shape(model) if model.model_type in EXPANDED_MLA else None
    mla = [layers[i] for i in full if layers[i].kind == MLA and expanded is None]
    cell: dict[str, int | Fraction]     # role -> bytes per token per layer (nvfp4: a Fraction)
    k_row, v_row, cell, sparse_index = {}, {}, {}, {}
    index_row = window = 0
    indexed: frozenset[int] = frozenset()
    if mla:
        if any(layers[i].kind.per_head for i in full) or swa:
            raise ValueError(f"SGLang's pool is either MLA or per-head (with or without a window pool); "
                             f"{model.name} mixes both")
        first = mla[0]
        if any((x.kv_lora_rank, x.qk_rope_head_dim) != (first.kv_lora_rank, first.qk_rope_head_dim) for x in mla):
            raise ValueError(f"SGLang's MLA pool has one latent width; {model.name}'s layers differ")
        # DSA: the layers that reuse the previous layer's top-k keep a 0-row indexer buffer
        # (sglang@v0.5.23 python/sglang/srt/mem_cache/index_key_cache.py#L56-L59 _layer_num_pages;
        # kv_cache_configurator.py#L2368-L2374 skip_topk_layers from dsa_layer_skips_topk)
        indexed = frozenset(i for i in full if layers[i].index_head_dim)
        index_dims = {layers[i].index_head_dim for i in indexed}
        if len(index_dims) > 1:
            raise ValueError(f"SGLang's DSA pool has one indexer width; {model.name}'s layers differ")
        dim = first.kv_lora_rank + first.qk_rope_head_dim
        heads = 1
        if indexed:
            kind = "nsa"
            first = layers[min(indexed)]
            if k_dtype.name not in ("bf16", "fp8_e4m3"):
                raise ValueError(f"kv_dtype: SGLang's NSA pool (DeepSeek-V3.2) holds bf16 or fp8_e4m3, "
                                 f"got {kv_dtype!r}")
            if page_size != NSA_PAGE_SIZE:
                notes.append(f"page_size {page_size} -> {NSA_PAGE_SIZE}: SGLang forces 64-token pages "
                             "for DeepSeek NSA models")
                page_size = NSA_PAGE_SIZE
            index_row = first.index_head_dim + first.index_head_dim // NSA_QUANT_BLOCK * 4
            k_row["full"] = (first.kv_lora_rank + first.kv_lora_rank // NSA_QUANT_BLOCK * 4
                             + first.qk_rope_head_dim * 2) if k_dtype.name == "fp8_e4m3" else k_dtype.row_bytes(dim)
            # the profile counts the latent as the buffer holds it (656 B in fp8) on every layer and the
            # indexer on the indexed layers
            # (sglang@v0.5.23 python/sglang/srt/model_executor/pool_configurator.py#L373-L409 _compute_cell_size,
            # #L559-L633 _compute_dsa_indexer_cell_size)
            cell["full"] = k_row["full"]
            if len(indexed) < len(full):
                notes.append(f"{len(full) - len(indexed)} of {len(full)} DSA layers reuse the previous layer's "
                             "top-k and hold no indexer keys")
        else:
            kind = "mla"
            k_row["full"] = k_dtype.row_bytes(dim)
            cell["full"] = k_row["full"]
        v_row["full"] = 0
    else:
        kind = "mha"
        heads = 0
        for role, indices in (("full", full), ("swa", swa)):
            if not indices:
                continue
            kv_heads, hd_k, hd_v = (*expanded, expanded[1]) if expanded else _head_shape(model, indices, role)
            if role == "swa" and model.model_type == "step3p5":
                kv_heads = _step3p5_swa_kv_heads(model, kv_heads)
            per_rank = kv_heads_per_rank(kv_heads, tp)
            heads = heads or per_rank
            if k_dtype.name == "nvfp4":
                if swa:
                    raise ValueError("kv_dtype: SGLang's hybrid SWA pool has no fp4_e2m1 (nvfp4) layout")
                k_row[role] = v_row[role] = per_rank * (hd_k // 2 + hd_k // FP4_SCALE_BLOCK)
                cell[role] = Fraction(per_rank * (hd_k + hd_v), 2) + Fraction(per_rank * hd_k * 2, FP4_SCALE_BLOCK)
            else:
                k_row[role] = per_rank * k_dtype.row_bytes(hd_k)
                v_row[role] = per_rank * k_dtype.row_bytes(hd_v)
                cell[role] = k_row[role] + v_row[role]
            if tp > kv_heads:
                notes.append(f"tp={tp} > {kv_heads} KV heads: each rank holds 1 replicated head ({role} pool)")
        if swa:
            window = max(layers[i].window for i in swa)
        sparse = minimax_sparse(model)
        if sparse is not None:
            sparse_index = _minimax_index_rows(model, k_dtype, *sparse)
            notes.append(f"{len(sparse_index)} sparse layers keep one-head indexer rows of "
                         f"{sparse[1]} in {dtype(model.dtype).name} beside the MHA pool (MiniMaxSparseKVPool)")
    if not full and not swa and not linear:
        raise ValueError(f"{model.name} has no attention layer for SGLang's KV pool")
    if linear and tp > 1 and model.model_type in MAMBA2_GROUPS:
        groups = Fields(model.config, model.model_type).int(MAMBA2_GROUPS[model.model_type][0])
        if not divides(tp, groups) and groups != 1:
            # sglang@v0.5.23 python/sglang/srt/layers/attention/mamba/mamba.py#L249-L252 MambaMixer2
            raise ValueError(f"SGLang 0.5.23's Mamba2 mixer asserts \"If tensor parallel world size does not divide "
                             f"num_groups, then num_groups must equal 1.\" (tp {tp}, n_groups {groups})")
    for i in linear:
        state: RecurrentState = layers[i].state     # type: ignore[assignment]  # a linear layer keeps a state
        require_divides(tp, state.conv_channels, f"conv channels of layer {i}")
        if state.ssm_elements:   # LFM2's short convolutions keep no recurrent state (configs/lfm2.py)
            require_divides(tp, state.ssm_heads, f"recurrent-state heads of layer {i}")
    return Layout(kind=kind, full=full, swa=swa, linear=linear, k_row=k_row, v_row=v_row, cell=cell,
                   index_row=index_row, indexed=indexed, window=window, page_size=page_size, heads=heads,
                   k_dtype=k_dtype,
                   conv_bytes=dtype(model.dtype).block_bytes, ssm_dtype=ssm_dtype, notes=tuple(notes),
                   sparse_index=sparse_index)


def _minimax_index_rows(model: Model, k_dtype: DType, layers: dict, index_dim: int) -> dict:
    """MiniMax-M3's indexer rows per sparse layer: a one-head K of sparse_index_dim, and a V of it unless the layer
    disables its index value (sglang@v0.5.23 python/sglang/srt/mem_cache/memory_pool.py#L5847-L5990
    MiniMaxSparseKVPool: index_kv_pool MHATokenToKVPool, index_k_pool MHATokenToKOnlyPool), in the model dtype
    (memory_pool.py#L5831-L5844 get_minimax_sparse_index_dtype; model_executor/pool_configurator.py#L410-L488 the
    profile's cell counts them)."""
    if k_dtype.name == "fp8_e4m3":
        raise ValueError("kv_dtype fp8_e4m3: SGLang 0.5.23 keeps MiniMax-M3's indexer cache in fp8 on Hopper or with "
                         "trtllm_mha on SM100, and in the model dtype elsewhere (memory_pool.py "
                         "get_minimax_sparse_index_dtype): an estimate names no GPU to choose by")
    if k_dtype.name == "nvfp4":
        raise ValueError("kv_dtype fp4_e2m1: SGLang 0.5.23 builds MiniMax-M3's main pool as MHATokenToKVPool "
                         "(MiniMaxSparseKVPool), not the fp4 pool with its scales that kvmem sizes for fp4_e2m1")
    row = dtype(model.dtype).row_bytes(index_dim)
    return {i: (row, row if value else 0) for i, value in layers.items()}


def _with_defaults(options: dict) -> dict:
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"SGLang has no option {unknown[0]!r}; its options: {', '.join(sorted(DEFAULTS))}")
    return {**DEFAULTS, **options}


# The Mamba2 mixers' (n_groups, d_state) config fields, as each SGLang config class reads them
# (configs/nemotron_h.py, granitemoehybrid.py, falcon_h1.py, mamba2.py ->
# sglang@v0.5.23 python/sglang/srt/configs/mamba_utils.py#L194-L243 Mamba2StateShape.create)
MAMBA2_GROUPS = {"nemotron_h": ("n_groups", "ssm_state_size"), "granitemoehybrid": ("mamba_n_groups", "mamba_d_state"),
                 "falcon_h1": ("mamba_n_groups", "mamba_d_state"), "mamba2": ("n_groups", "state_size")}


def _extra_conv_channels(model: Model, tp: int) -> int:
    """Conv channels SGLang adds when tp does not divide n_groups: each rank keeps whole groups, so
    n_groups grows by tp - n_groups (sglang@v0.5.23 python/sglang/srt/configs/mamba_utils.py#L29-L38
    extra_groups_for_head_shards, #L214-L222 Mamba2StateShape.create: conv_dim = inner + 2 x n_groups x d_state)."""
    names = MAMBA2_GROUPS.get(model.model_type)
    if names is None or tp == 1:
        return 0
    fields = Fields(model.config, model.model_type)
    groups, d_state = (fields.int(name) for name in names)
    return 0 if divides(tp, groups) else 2 * (tp - groups) * d_state


def state_parts_of(model: Model, layout: Layout, i: int, tp: int) -> tuple[int, int]:
    """One request's (conv, SSM) state bytes in layer ``i`` on one rank (MambaPool shapes)."""
    if i in layout.states:
        return layout.states[i]
    state: RecurrentState = model.layers[i].state     # type: ignore[assignment]  # layout.linear: layers with a state
    channels = state.conv_channels + _extra_conv_channels(model, tp)
    conv = channels // tp * max(state.conv_kernel - 1, 0) * layout.conv_bytes
    return conv, layout.ssm_dtype.row_bytes(state.ssm_elements // tp)


def state_bytes_of(model: Model, layout: Layout, i: int, tp: int) -> int:
    """One request's Mamba/linear state in layer ``i`` on one rank."""
    return sum(state_parts_of(model, layout, i, tp))


def index_bytes(rows: int, page: int, index_row: int) -> int:
    """NSA indexer buffer of one layer: ((rows + page + 1) // page) pages of page x index_row bytes."""
    return (rows + page + 1) // page * page * index_row if index_row else 0


def layer_rows(model: Model, layout: Layout, tp: int, rows: dict, batch: int):
    """Per-layer (K, V, state) bytes: pool layers hold ``rows[role]`` + one padding page."""
    page = layout.page_size
    full, swa, linear = set(layout.full), set(layout.swa), set(layout.linear)  # O(1) lookups: O(layers) in all
    out = []
    for i in range(model.num_layers):
        role = "full" if i in full else "swa" if i in swa else None
        state = batch * state_bytes_of(model, layout, i, tp) if i in linear else 0   # Falcon-H1: KV and a state
        if role is not None:
            n = rows[role] + page
            index = index_bytes(rows[role], page, layout.index_row) if i in layout.indexed else 0
            index_k, index_v = layout.sparse_index.get(i, (0, 0))   # MiniMax-M3's indexer pools: same rows
            out.append((n * (layout.k_row[role] + index_k) + index, n * (layout.v_row[role] + index_v), state))
        elif i in linear:
            out.append((0, 0, batch * state_bytes_of(model, layout, i, tp)))
        else:
            out.append((0, 0, 0))
    return out


def stage_cell(layout: Layout, stage: range):
    """The profile's cell_size for one pipeline stage's layers (bytes per pool token): kv_heads_per_rank x
    (head_dim + v_head_dim) x layers x dtype_bytes (MHA); (kv_lora_rank + qk_rope_head_dim) x layers x
    dtype_bytes (+ 132 x indexed layers, NSA/DSA: the latent as its buffer holds it, 656 B in fp8, and the
    indexer only on the layers that keep one: GLM-5.2's shared-top-k layers hold none); fp4: cell // 2 + one
    byte per 16 values; hybrid SWA: F x n_full + S x n_swa (sglang@v0.5.23
    python/sglang/srt/model_executor/pool_configurator.py#L340-L535 _compute_cell_size)."""
    full, swa = set(layout.full), set(layout.swa)
    n_full, n_swa = sum(1 for i in stage if i in full), sum(1 for i in stage if i in swa)
    n_index = sum(1 for i in stage if i in layout.indexed)
    return ((layout.cell["full"] * n_full if n_full else 0) + (layout.cell["swa"] * n_swa if n_swa else 0)
            + layout.index_row * n_index + sum(sum(layout.sparse_index.get(i, (0, 0))) for i in stage))


def cell_size(model: Model, *, kv_dtype="auto", tp: int = 1, pp: int = 1, **options) -> int:
    """SGLang's cell_size (profile_max_num_token) on the pipeline stage with the most layers:
    bytes one token costs across the stage's pool layers, as the profile counts them."""
    model = sglang_model(model)
    layout = make_layout(model, kv_dtype=kv_dtype, tp=tp, pp=pp, **_with_defaults(options))
    cells = [stage_cell(layout, stage) for stage in pp_stages(model.num_layers, pp)]
    return int(max(cells))


def pools(model: Model, *, num_tokens: int, kv_dtype="auto", tp: int = 1, pp: int = 1,
          swa_num_tokens: int | None = None, **options) -> tuple[Pool, ...]:
    """The pools SGLang allocates on one rank for ``num_tokens`` (#tokens / max_total_num_tokens):
    their K and V bytes as the "KV Cache is allocated" line prints them. Hybrid-SWA models
    get the SWA pool first (it is created first), sized ``swa_num_tokens`` or, by default,
    ``int(num_tokens x swa_full_tokens_ratio)`` floored to a page. With pp > 1, the stage
    holding the most bytes."""
    require_positive_int("num_tokens", num_tokens)
    model = sglang_model(model)
    options = _with_defaults(options)
    if is_inkling(model):   # its own ratio defaults (kvmem.engines.sglang.inkling)
        options = resolve_options(options)[0]
    layout = make_layout(model, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    page = layout.page_size
    if swa_num_tokens is None:
        ratio = options["swa_full_tokens_ratio"] if layout.full else 1  # all-SWA models: one pool
        swa_num_tokens = int(num_tokens * ratio) // page * page
    elif layout.swa:
        require_positive_int("swa_num_tokens", swa_num_tokens)
    rows = {"full": num_tokens, "swa": swa_num_tokens}
    per_layer = layer_rows(model, layout, tp, rows, batch=1)
    stages = pp_stages(model.num_layers, pp)
    stage = max(stages, key=lambda s: sum(per_layer[i][0] + per_layer[i][1] for i in s))
    if layout.sparse_index:   # the main pool's lines hold K and V only; the indexer pools log their own
        per_layer = layer_rows(model, replace(layout, sparse_index={}), tp, rows, batch=1)
    result = []
    for role, indices in (("swa", layout.swa), ("full", layout.full)):
        held = tuple(i for i in indices if i in stage)
        if held:
            result.append(Pool(role=role, layout=layout.kind, num_tokens=rows[role], page_size=page,
                               layers=held, k_bytes=sum(per_layer[i][0] for i in held),
                               v_bytes=sum(per_layer[i][1] for i in held),
                               dtype=TORCH_DTYPES[layout.k_dtype.name]))
    if layout.sparse_index:
        # MiniMaxSparseKVPool builds (and each logs) the main pool, then index_kv_pool, then index_k_pool
        n = num_tokens + page
        index_dtype = TORCH_DTYPES[dtype(model.dtype).name]
        for role, with_value in (("index", True), ("index_k", False)):
            held = tuple(i for i in stage if i in layout.sparse_index and bool(layout.sparse_index[i][1]) == with_value)
            if held:
                result.append(Pool(role=role, layout="mha", num_tokens=num_tokens, page_size=page, layers=held,
                                   k_bytes=sum(n * layout.sparse_index[i][0] for i in held),
                                   v_bytes=sum(n * layout.sparse_index[i][1] for i in held), dtype=index_dtype))
    return tuple(result)
