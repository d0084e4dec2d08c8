"""vLLM's options, checked, with each default's source; the release table; the KV cache formats."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ...dtypes import FLOAT_NAMES, float_bytes
from ...model import MLA, Model
from ...units import require_positive_int


GIB = 1 << 30

# Engine defaults, one table, each with its source.
OPTIONS = {
    # vllm@v0.33.0 vllm/config/cache.py#L185 DEFAULT_BLOCK_SIZE = 16; None = 16, or what the MLA backend
    # (MLA_BACKENDS) / hybrid alignment (kvmem.engines.vllm.layout._align_hybrid) forces.
    "block_size": None,
    # vllm@v0.33.0 vllm/engine/arg_utils.py#L2939-L3039 get_batch_defaults: 8192 for the API server on >= 70 GiB GPUs
    # (16384 for the LLM class; 2048 / 8192 on smaller GPUs). Only sliding/chunked layers use it.
    "max_num_batched_tokens": 8192,
    # --disable-hybrid-kv-cache-manager is off by default (vllm@v0.33.0 vllm/config/scheduler.py#L182); some
    # releases turn it on for chunked-local models (Llama 4) and KV connectors.
    "hybrid_kv_cache_manager": True,
    # A kvmem Model (EAGLE drafter) or "mtp" (the model's own MTP layers) whose attention layers
    # join the pool (vllm/v1/spec_decode; vllm#19996 reproduces only with the draft layer counted).
    "draft": None,
    # --async-scheduling is on by default (vllm/config/vllm.py, VllmConfig.__post_init__); with it
    # sliding/chunked layers reserve one more batch of in-flight tokens per request (from v0.26).
    "async_scheduling": True,
    # speculative_config.num_speculative_tokens: lookahead slots, Mamba conv columns and blocks.
    "num_speculative_tokens": 0,
    # VLLM_ATTENTION_BACKEND / --attention-backend; None = FLASHMLA (FLASHMLA_SPARSE for V3.2); kvmem.fit fills in
    # vLLM's pick on the fit's GPU (device_options).
    "attention_backend": None,
    # --enable-prefix-caching / --no-enable-prefix-caching; None = vLLM's default for the model
    # (prefix_caching_default: on for decoders and, from HYBRID_PREFIX_CACHING, Mamba hybrids; off for
    # attention-free models), which selects mamba_cache_mode below.
    "enable_prefix_caching": None,
    # --mamba-cache-mode: None = "align" with prefix caching, else "none" (resolve_mamba_mode).
    "mamba_cache_mode": None,
    # --gdn-prefill-backend (vllm@v0.33.0 vllm/engine/arg_utils.py#L1948-L1954): None = what
    # _resolve_gdn_prefill_backend picks on Hopper, FlashInfer (exports_checkpoints); kvmem.fit fills in its pick on
    # the fit's GPU (device_options: Triton on Ampere/Ada).
    "gdn_prefill_backend": None,
    # --mamba-cache-dtype / --mamba-ssm-cache-dtype (vllm@v0.33.0 vllm/config/cache.py#L296-L300, default "auto").
    "mamba_cache_dtype": "auto",
    "mamba_ssm_cache_dtype": "auto",
    # Which release's rules: "latest" (= 0.33, the release checked by kvmem validate --engine vllm),
    # a release such as "0.19.0", or "v0" (the v0 engine).
    "version": "latest",
    # v0 engine only: --swap-space GiB of CPU blocks per GPU (vllm/config/cache.py, default 4).
    "swap_space": 4,
}

# From which release each rule holds; older releases keep the rule before it.
TOKENS_FROM_BLOCKS = (0, 8)          # PR #13596 "GPU KV cache size: N tokens"
HYBRID_GROUPS = (0, 9)               # hybrid allocator (PR #17996): a group per attention type
BALANCED_GROUPS = (0, 12)            # PR #29303 (merged 2025-11-24): the 1.5x rule, stride split
# N = int(max_concurrency x max_model_len): PRs #38364/#40694 proposed it after vllm#40691 (v0.19); the release it
# landed in is not pinned (unverified): v0.21 is where vllm#43308 saw Gemma-4's count jump ~10x at equal memory,
# and v0.24 logs print this form
TOKENS_FROM_CONCURRENCY = (0, 21)
IN_FLIGHT_BATCHES = (0, 26)           # PR #47728: windows reserve max_concurrent_batches x T
NULL_BLOCK = (0, 28)                  # PR #47272 (merged 2026-08-20): checks leave out the null block
# PR #50462 (merged 2026-07-30, update_kv_cache_capacity): "GPU KV cache size: N tokens, Maximum concurrency
# for L tokens per request: X x" on ONE line (vllm@v0.33.0 vllm/v1/core/kv_cache_utils.py#L1136-L1154); in 0.28 at the
# latest (merged before PR #47272); 0.19 prints two (vllm#40691); 0.27 unverified
ONE_LOG_LINE = (0, 28)
# PR #50991 (merged 2026-08-04) "[Mamba] enable prefix cache by default": hybrids take prefix caching by default
# (before it: default = supported and not is_hybrid) and mamba_cache_mode "none" becomes "align"; in 0.28 at the
# latest (merged before PR #47272); 0.27 unverified (vllm#51250 ran 0.27.1 with --enable-prefix-caching given)
HYBRID_PREFIX_CACHING = (0, 28)
LATEST = (0, 33)                      # the release kvmem was last checked against (vLLM 0.33.0)

# --kv-cache-dtype values (vllm@v0.33.0 vllm/config/cache.py#L44-L67 CacheDType): bytes per element, quantisation
# mode. fp8 / fp8_e4m3 / fp8_e5m2 / fp8_inc: 1 byte, their per-tensor scales take no page space.
_KV_FORMATS = {
    "float16": ("fp16", 2, ""), "fp16": ("fp16", 2, ""), "half": ("fp16", 2, ""),
    "bfloat16": ("bf16", 2, ""), "bf16": ("bf16", 2, ""),
    "fp8": ("fp8", 1, ""), "fp8_e4m3": ("fp8_e4m3", 1, ""), "fp8_e5m2": ("fp8_e5m2", 1, ""),
    "fp8_inc": ("fp8_inc", 1, ""), "fp8_ds_mla": ("fp8_ds_mla", 1, "fp8_ds_mla"),
    "int8_per_token_head": ("int8_per_token_head", 1, "per_token_head"),
    "fp8_per_token_head": ("fp8_per_token_head", 1, "per_token_head"),
    "nvfp4": ("nvfp4", 1, "nvfp4"),
}
MODEL_DTYPE_BYTES = {name: float_bytes(name) for name in FLOAT_NAMES}
# --mamba-cache-dtype / --mamba-ssm-cache-dtype values and the config spellings kvmem takes, with their bytes
STATE_DTYPES = {name: float_bytes(name) for name in ("float32", "fp32", "float16", "fp16", "bfloat16", "bf16")}

# MLA backends: the block size each forces, from the kernel block sizes it supports; None = keep the block size.
# FLASHMLA 64 (vllm@v0.33.0 vllm/v1/attention/backends/mla/flashmla.py#L57-L58; Hopper's pick for fp8 caches, and
# kvmem's assumption where it knows no GPU), CUTLASS_MLA 128 (cutlass_mla.py#L49-L50), FLASHINFER_MLA 32, the
# Blackwell pick (kernel sizes [32, 64], flashinfer_mla.py#L204-L205: a multiple of 32 is kept, else the smallest:
# get_preferred_block_size, vllm/v1/attention/backend.py#L122-L163), FLASHMLA_SPARSE 64 (DeepSeek-V3.2;
# flashmla_sparse.py#L158-L165); TRITON_MLA and FLASH_ATTN_MLA (Hopper's pick for 16-bit caches) take any multiple of
# 16 (triton_mla.py#L114-L115, flashattn_mla.py#L49-L50): the block size is kept.
# The backend order: vllm@v0.33.0 vllm/platforms/cuda.py#L84-L155 _get_backend_priorities; by GPU: device_options.
MLA_BACKENDS = {"FLASHMLA": 64, "CUTLASS_MLA": 128, "FLASHINFER_MLA": 32, "FLASHMLA_SPARSE": 64,
                 "TRITON_MLA": None, "FLASH_ATTN_MLA": None}
_OTHER_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")
FP8_DS_MLA_BYTES_PER_TOKEN = 656     # 512 fp8 latent + 16 B scales + 64 x 2 B rope (flashmla_sparse.py#L76-L88)
# DeepSeek-V3.2's lightning-indexer key: its own MLAAttentionSpec of 1 head x (index_head_dim + index_head_dim // 128
# x 4) uint8 = 132 B per token (vllm@v0.33.0 vllm/model_executor/models/deepseek_v2.py#L638-L676
# DeepseekV32IndexerCache), keyed on index_topk: fp8 values + one fp32 scale per 128
INDEXER_QUANT_BLOCK = 128

QWEN35_TYPES = ("qwen3_5_text", "qwen3_5_moe_text")
# The IsAttentionFree generative classes of vLLM 0.33.0 among kvmem's families (vllm@v0.33.0
# vllm/model_executor/models/mamba.py#L173 MambaForCausalLM, also FalconMambaForCausalLM; mamba2.py#L167
# Mamba2ForCausalLM): attn_type "attention_free". Other models with a recurrent state are "hybrid".
ATTENTION_FREE_TYPES = ("mamba", "falcon_mamba", "mamba2")


# ----------------------------------------------------------------------------- inputs

def parse_release(version) -> tuple[int, int] | None:
    """(major, minor) of a release, LATEST for "latest", None for the v0 engine."""
    text = version.strip().lower() if isinstance(version, str) else None
    if text == "v0":
        return None
    if text == "latest":
        return LATEST
    match = re.match(r"^v?(\d+)\.(\d+)", text or "")
    if match is None:
        raise ValueError(f"version must be 'latest', 'v0' (the v0 engine) or a vLLM release such as "
                         f"'0.19.0', got {version!r}")
    return int(match.group(1)), int(match.group(2))


def _bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


@dataclass(frozen=True)
class VllmOptions:
    """The options resolved once by check_options: every value in its working type, the defaults of
    OPTIONS filled in, ``release`` parsed from ``version``, ``draft`` read as a Model. Frozen: what
    depends on more than the options (the in-flight tokens, which depend on pp) is a new record
    made by ``dataclasses.replace``."""

    block_size: int | None
    max_num_batched_tokens: int
    hybrid_kv_cache_manager: bool
    draft: object                      # None, "mtp" or a kvmem Model
    async_scheduling: bool
    num_speculative_tokens: int
    attention_backend: str | None
    enable_prefix_caching: bool
    mamba_cache_mode: str
    gdn_prefill_backend: str | None
    mamba_cache_dtype: str
    mamba_ssm_cache_dtype: str
    version: str
    swap_space: float
    release: tuple[int, int] | None    # parse_release(version): None for the v0 engine
    in_flight_tokens: int = 0          # tokens a window reserves in flight (pool.in_flight_tokens; capacity sets it)


def prefix_caching_default(model: Model | None, release) -> bool:
    """vLLM's enable_prefix_caching when neither --enable-prefix-caching nor --no-enable-prefix-caching is
    given: ModelConfig.is_prefix_caching_supported by attn_type (vllm@v0.33.0 vllm/engine/arg_utils.py#L3041-L3085
    _set_default_chunked_prefill_and_prefix_caching_args; vllm/config/model.py#L2239-L2291: generative "hybrid"
    and "decoder" True, "attention_free" and "encoder_decoder" False). attn_type (config/model.py#L2174-L2190,
    #L2036-L2050): a recurrent-state layer beside token-caching ones is "hybrid", a recurrent state only
    (ATTENTION_FREE_TYPES) "attention_free", else "decoder" (kvmem's vLLM layouts have no encoder-decoder).
    Without a model: the decoder rule (what it selects, the Mamba cache mode, matters only with one)."""
    if release is None:
        return False   # the v0 engine: prefix caching was opt-in (v0.py reads no prefix caching)
    stateful = model is not None and any(layer.state is not None for layer in model.layers)
    if not stateful:
        return True
    if model.model_type in ATTENTION_FREE_TYPES:
        return False
    return release >= HYBRID_PREFIX_CACHING


def resolve_mamba_mode(mode, prefix_caching: bool, release) -> str:
    """The Mamba cache mode vLLM runs: MambaModelConfig.verify_and_update_config (vllm@v0.33.0
    vllm/model_executor/models/config.py#L751-L785) turns "none" into "align" with prefix caching and any mode into
    "none" without it (from HYBRID_PREFIX_CACHING; before it kvmem keeps the mode given, default "align" with
    prefix caching, unverified per release)."""
    if mode is not None and mode not in ("none", "align", "all"):
        raise ValueError(f"mamba_cache_mode must be 'none', 'align' or 'all', got {mode!r}")
    if release is not None and release >= HYBRID_PREFIX_CACHING:
        if not prefix_caching:
            return "none"
        return "align" if mode in (None, "none") else mode
    if mode is None:
        return "align" if prefix_caching else "none"
    return mode


def check_options(opts: dict, model: Model | None = None) -> VllmOptions:
    """The options validated and resolved (their names are checked once, by kvmem.engines.with_defaults,
    before the engine is called); ``model`` resolves enable_prefix_caching=None to vLLM's default for it."""
    out = {**OPTIONS, **opts}
    block_size = out["block_size"]
    if block_size is not None:
        block_size = require_positive_int("block_size", block_size)
    batched = require_positive_int("max_num_batched_tokens", out["max_num_batched_tokens"])
    hybrid = _bool("hybrid_kv_cache_manager", out["hybrid_kv_cache_manager"])
    prefix_caching = out["enable_prefix_caching"]
    if prefix_caching is not None:
        prefix_caching = _bool("enable_prefix_caching", prefix_caching)
    async_scheduling = _bool("async_scheduling", out["async_scheduling"])
    spec = out["num_speculative_tokens"]
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < 0:
        raise ValueError(f"num_speculative_tokens must be a non-negative integer, got {spec!r}")
    backend = out["attention_backend"]
    if backend is not None:
        name = str(backend).strip().upper() if isinstance(backend, str) else None
        if name not in MLA_BACKENDS and name not in _OTHER_BACKENDS:
            names = ", ".join([*MLA_BACKENDS, *_OTHER_BACKENDS])
            raise ValueError(f"attention_backend must be one of {names}, got {backend!r}")
        backend = name
    state_dtypes = {}
    for name in ("mamba_cache_dtype", "mamba_ssm_cache_dtype"):
        value = out[name]
        key = value.strip().lower() if isinstance(value, str) else None
        if key != "auto" and key not in STATE_DTYPES:
            raise ValueError(f"{name} must be 'auto', 'float32', 'float16' or 'bfloat16', got {value!r}")
        state_dtypes[name] = key
    swap = out["swap_space"]
    if isinstance(swap, bool) or not isinstance(swap, (int, float)) or not 0 <= swap <= 2**40:
        raise ValueError(f"swap_space must be a number of GiB from 0 to {2**40:,}, got {swap!r}")
    release = parse_release(out["version"])
    if prefix_caching is None:
        prefix_caching = prefix_caching_default(model, release)
    mode = resolve_mamba_mode(out["mamba_cache_mode"], prefix_caching, release)
    gdn = out["gdn_prefill_backend"]
    if gdn is not None and gdn not in GDN_PREFILL_BACKENDS:
        raise ValueError(f"gdn_prefill_backend must be one of {', '.join(GDN_PREFILL_BACKENDS)}, got {gdn!r}")
    draft = out["draft"]
    if isinstance(draft, str) and draft != "mtp":
        from ...catalog import get_model
        draft = get_model(draft)
    elif draft is not None and not isinstance(draft, Model) and draft != "mtp":
        raise ValueError(f"draft must be a kvmem Model, a preset name or 'mtp', got {type(draft).__name__}")
    return VllmOptions(block_size=block_size, max_num_batched_tokens=batched, hybrid_kv_cache_manager=hybrid,
                       draft=draft, async_scheduling=async_scheduling, num_speculative_tokens=spec,
                       attention_backend=backend, enable_prefix_caching=prefix_caching, mamba_cache_mode=mode,
                       gdn_prefill_backend=gdn,
                       **state_dtypes, version=out["version"], swap_space=swap, release=release)


# model types whose linear layers are vLLM 0.33.0's QwenGatedDeltaNetAttention (qwen3_next.py, qwen3_5.py), and the
# prefill checkpoint grid of its FlashInfer prefill (vllm@v0.33.0 vllm/v1/attention/backends/gdn_attn.py#L34); from
# 0.33 (0.24 had none: the Qwen3.6 log's 2,096-token block, tests/engines/test_vllm.py; between them unverified)
GDN_CHECKPOINT_TYPES = ("qwen3_next", *QWEN35_TYPES)
GDN_CHECKPOINT_ALIGNMENT = 64
# --gdn-prefill-backend's choices (vllm@v0.33.0 vllm/engine/arg_utils.py#L1948-L1954); only FlashInfer checkpoints
GDN_PREFILL_BACKENDS = ("flashinfer", "triton", "cutedsl", "aiter_flydsl", "sycl")



def exports_checkpoints(model: Model, opts: VllmOptions) -> bool:
    """Its GatedDeltaNet layers export prefill checkpoints ("align" mode, from 0.33): in that mode
    _align_hybrid_block_size makes the block a multiple of every Mamba layer's prefill checkpoint alignment
    (vllm@v0.33.0 vllm/platforms/interface.py#L1089-L1094), which Qwen's GatedDeltaNet sets to
    GDN_CHECKPOINT_ALIGNMENT when its prefill runs on FlashInfer (model_executor/layers/mamba/gdn/
    qwen_gdn_linear_attn.py#L689-L696), and each request holds one more state block (MambaSpec
    num_prefill_checkpoint_blocks=1: qwen_gdn_linear_attn.py#L739-L760, v1/kv_cache_interface.py#L1135-L1141).
    FlashInfer is what _resolve_gdn_prefill_backend picks on Hopper (qwen_gdn_linear_attn.py#L148-L271; also
    Blackwell with head_k_dim 128 and CUDA >= 13); on Ampere/Ada it picks Triton, which exports none. kvmem.fit
    sets gdn_prefill_backend to vLLM's pick on its GPU (device_options); without a GPU kvmem assumes Hopper."""
    return (opts.mamba_cache_mode == "align" and opts.release is not None and opts.release >= LATEST
            and model.model_type in GDN_CHECKPOINT_TYPES and opts.gdn_prefill_backend in (None, "flashinfer"))


def checkpoint_grid(model: Model, opts: VllmOptions, align: int, notes: list) -> int:
    """The hybrid block alignment with the GatedDeltaNet checkpoint grid where exports_checkpoints."""
    if not exports_checkpoints(model, opts):
        return align
    notes.append(f"block a multiple of {GDN_CHECKPOINT_ALIGNMENT}: vLLM's FlashInfer GatedDeltaNet prefill "
                 "(its pick on Hopper, assumed without a GPU) checkpoints the state on that grid in mamba_cache_mode "
                 "'align'")
    return math.lcm(align, GDN_CHECKPOINT_ALIGNMENT)


def mla_block(backend: str, block: int) -> int:
    """The block size an MLA backend runs with (options.MLA_BACKENDS: its kernel block sizes at v0.33.0)."""
    if backend == "FLASHMLA":
        return block if block % 64 == 0 else 64
    if backend == "CUTLASS_MLA":
        return block if block % 128 == 0 else 128
    if backend == "FLASHINFER_MLA":
        return block if block % 32 == 0 else 32
    if backend == "FLASHMLA_SPARSE":
        return 64
    return block


@dataclass(frozen=True)
class KVFormat:
    name: str
    nbytes: int
    mode: str          # "", "per_token_head", "nvfp4", "fp8_ds_mla"


def kv_format(model: Model, kv_dtype) -> KVFormat:
    """The attention cache format of --kv-cache-dtype ``kv_dtype`` ("auto" = the model dtype)."""
    if isinstance(kv_dtype, str):
        key = kv_dtype.strip().lower().replace("-", "_")
    else:
        key = getattr(kv_dtype, "name", None)
    sparse = any(layer.kind == MLA and layer.index_head_dim for layer in model.layers)
    if key == "auto":
        # vllm@v0.33.0 vllm/config/model.py#L2423-L2464 _resolve_auto_dtype: float32 checkpoints are downcast to
        # the platform's first supported dtype, bfloat16 on CUDA (sm80+); fp16/bf16 checkpoints keep theirs.
        # DeepSeek-V3.2 with kv "auto" is bf16 in 0.33.0; older releases (models/config.py at commit 0144dd5b)
        # mapped it to fp8_ds_mla too (unverified per release: pass kv_dtype="fp8_ds_mla")
        name = model.dtype if model.dtype in ("fp16", "bf16") else "bf16"
        return KVFormat(name, MODEL_DTYPE_BYTES[name], "")
    if key not in _KV_FORMATS:
        valid = ", ".join(["auto", *_KV_FORMATS])
        from ...sources.bounded import quote
        raise ValueError(f"kv_dtype {quote(kv_dtype)} is not a vLLM --kv-cache-dtype; valid: {valid}")
    name, nbytes, mode = _KV_FORMATS[key]
    if sparse and name.startswith("fp8"):
        # DeepseekV32ForCausalLM.verify_and_update_config: fp8 caches become "fp8_ds_mla".
        return KVFormat("fp8_ds_mla", 1, "fp8_ds_mla")
    if mode == "fp8_ds_mla":
        raise ValueError("kv_dtype 'fp8_ds_mla' is DeepSeek-V3.2's sparse-MLA format; this model has no "
                         "indexer (index_head_dim)")
    return KVFormat(name, nbytes, mode)


# ----------------------------------------------------------------------------- picks by the GPU
#
# What vLLM 0.33.0 selects by the device where kvmem.fit knows it (GPU.platform, GPU.compute_capability):
# the MLA attention backend (its block size: mla_block) and the GatedDeltaNet prefill backend (its checkpoint
# grid: exports_checkpoints). Without a GPU (estimate, capacity) OPTIONS' None keeps the Hopper assumption.
# Judged by vLLM's own selection code with the capability patched (kvmem/oracles/vllm_device.py).
#
# CUDA, dense MLA: the first backend of _get_backend_priorities (vllm@v0.33.0 vllm/platforms/cuda.py#L84-L155)
# that validate_configuration accepts (vllm/v1/attention/backend.py#L279-L370; cuda.py#L377-L416):
#   SM 10.x  FLASHINFER_MLA where qk_nope_head_dim is 64, 128 or 192 (flashinfer_mla.py#L220-L249), else
#            CUTLASS_MLA (cutlass_mla.py#L65-L66; TOKENSPEED_MLA between them needs the tokenspeed_mla package,
#            which vLLM's requirements do not install)
#   SM 9.x   FLASH_ATTN_MLA for 16-bit caches (flashattn_mla.py#L40-L46, #L69-L87: FA3, which vLLM's CUDA wheels
#            build for SM90, fa_utils.py#L325-L345), else FLASHMLA (fp8 / fp8_e4m3; flashmla.py#L47-L54, #L73-L74)
#   others   TRITON_MLA (triton_mla.py#L140-L141; SM 12.x's list is TRITON_MLA first, cuda.py#L134-L138)
# Sparse MLA (DeepSeek-V3.2, GLM-5) stays on FLASHMLA_SPARSE (kvmem.engines.vllm.layout), vLLM's pick on
# SM 9.x/10.x with 64+ heads; elsewhere a note says vLLM picks another sparse backend.
# ROCm (vllm@v0.33.0 vllm/platforms/rocm.py#L536-L552): TRITON_MLA unless VLLM_ROCM_USE_AITER=1 (default off,
# vllm/envs.py#L1267-L1269), which kvmem assumes unset.
_MLA_16BIT_KV = ("bf16", "fp16")
_MLA_FP8_KV = ("fp8", "fp8_e4m3")
_FLASHINFER_MLA_NOPE = (64, 128, 192)
# The CUDA runtime vLLM 0.33.0's wheels ship: VLLM_MAIN_CUDA_VERSION "13.0" (vllm@v0.33.0 vllm/envs.py#L91), torch
# 2.14.0 pinned with nvidia-cutlass-dsl[cu13] (its requirements/cuda.txt); _resolve_gdn_prefill_backend's
# get_cuda_runtime_major() >= 13 holds there
WHEEL_CUDA_RUNTIME_MAJOR = 13
GDN_FLASHINFER_HEAD_K_DIM = 128


def device_name(gpu) -> str:
    cap = gpu.compute_capability
    return f"{gpu.name} (SM {cap[0]}.{cap[1]})" if cap else f"{gpu.name} ({gpu.platform or 'unknown platform'})"


def mla_backend_on(gpu, kv_name: str, qk_nope_head_dim: int) -> str | None:
    """The dense-MLA backend vLLM 0.33.0 selects on ``gpu`` for a cache of ``kv_name`` (KVFormat.name);
    None where kvmem does not know the device (no platform, or CUDA without a capability)."""
    if gpu.platform == "rocm":
        return "TRITON_MLA"
    cap = gpu.compute_capability if gpu.platform == "cuda" else None
    if cap is None:
        return None
    major = cap[0]
    if major == 10:
        if kv_name not in (*_MLA_16BIT_KV, *_MLA_FP8_KV):
            return None
        return "FLASHINFER_MLA" if qk_nope_head_dim in _FLASHINFER_MLA_NOPE else "CUTLASS_MLA"
    if major == 9:
        if kv_name in _MLA_16BIT_KV:
            return "FLASH_ATTN_MLA"
        return "FLASHMLA" if kv_name in _MLA_FP8_KV else None
    return "TRITON_MLA"


def gdn_backend_on(gpu, head_k_dim) -> str | None:
    """The GatedDeltaNet prefill backend vLLM 0.33.0's _resolve_gdn_prefill_backend picks on ``gpu`` with
    --gdn-prefill-backend unset (vllm@v0.33.0 vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py#L148-L271):
    FlashInfer on SM 9.0; on SM 10.x / 12.x with head_k_dim 128 and CUDA >= 13 (the wheels' CUDA:
    WHEEL_CUDA_RUNTIME_MAJOR); Triton elsewhere on CUDA. ROCm: Triton, or AITER FlyDSL only with
    VLLM_ROCM_USE_AITER=1 (neither exports checkpoints: "triton" sizes both). None: the device unknown."""
    if gpu.platform == "rocm":
        return "triton"
    cap = gpu.compute_capability if gpu.platform == "cuda" else None
    if cap is None:
        return None
    if cap == (9, 0):
        return "flashinfer"
    if cap[0] in (10, 12) and head_k_dim == GDN_FLASHINFER_HEAD_K_DIM and WHEEL_CUDA_RUNTIME_MAJOR >= 13:
        return "flashinfer"
    return "triton"


def device_options(gpu, model: Model, kv_dtype, engine_options: dict) -> tuple[dict, tuple[str, ...]]:
    """The engine options vLLM 0.33.0 picks by the device, where the caller gave none: attention_backend
    (dense MLA models) and gdn_prefill_backend (Qwen's GatedDeltaNet), with a note for each; nothing for
    the v0 engine, older releases or a device kvmem does not know (the Hopper assumption stands)."""
    release = parse_release(engine_options.get("version", OPTIONS["version"]))
    if release is None or release < LATEST or not gpu.platform:
        return {}, ()
    if gpu.platform not in ("cuda", "rocm"):
        return {}, (f"vLLM 0.33.0 on {gpu.name} ({gpu.platform}): kvmem sizes its CUDA Hopper backends",)
    picks, notes = {}, []
    layers = [layer for layer in model.layers if layer.kind == MLA]
    if layers and engine_options.get("attention_backend") is None:
        sparse = any(layer.index_head_dim for layer in layers)
        cap = gpu.compute_capability
        if sparse:
            if gpu.platform == "cuda" and cap is not None and cap[0] < 9:
                # the sparse tail of _get_backend_priorities: FLASH_ATTN_MLA_SPARSE (SM 9.x,
                # flashattn_mla_sparse.py#L82-L83), FLASHMLA_SPARSE (SM 9.x / 10.x, flashmla_sparse.py),
                # FLASHINFER_MLA_SPARSE_SM90 (SM 9.x): none runs below SM 9.0
                raise ValueError(f"{model.name} under vLLM 0.33.0 on {device_name(gpu)}: its sparse MLA (an indexer) "
                                 "has no attention backend there (vllm/platforms/cuda.py _get_backend_priorities: "
                                 "FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE and FLASHINFER_MLA_SPARSE_SM90 take SM 9.x or "
                                 "10.x only)")
            if gpu.platform != "cuda" or cap is None or cap[0] not in (9, 10):
                notes.append(f"vLLM 0.33.0 picks another sparse MLA backend on {device_name(gpu)} "
                             "(cuda.py / rocm.py backend priorities); kvmem sizes FLASHMLA_SPARSE's 64-token blocks")
            elif cap[0] == 10 and model.model_type == "glm_moe_dsa" and kv_format(model, kv_dtype).mode == "" \
                    and str(kv_dtype).strip().lower() == "auto":
                # vllm@v0.33.0 vllm/model_executor/models/config.py#L89-L116 GlmMoeDsaForCausalLM
                notes.append(f"on {device_name(gpu)} vLLM 0.33.0 runs GLM-5's kv_cache_dtype 'auto' as fp8_e4m3 "
                             "(GlmMoeDsaForCausalLM.verify_and_update_config), with the fp8 sparse backends first: "
                             "kvmem sizes the 16-bit FLASHMLA_SPARSE cache, not that one")
        else:
            kv = kv_format(model, kv_dtype).name
            backend = mla_backend_on(gpu, kv, model.facts.qk_nope_head_dim)
            if backend is not None:
                picks["attention_backend"] = backend
                notes.append(f"MLA backend {backend}: vLLM 0.33.0's pick on {device_name(gpu)} for a {kv} cache "
                             "(vllm/platforms/cuda.py _get_backend_priorities, rocm.py)")
    if (model.model_type in GDN_CHECKPOINT_TYPES and engine_options.get("gdn_prefill_backend") is None):
        cfg = model.config or {}
        text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
        head_k_dim = text.get("linear_key_head_dim", cfg.get("linear_key_head_dim"))
        backend = gdn_backend_on(gpu, head_k_dim)
        if backend is not None:
            picks["gdn_prefill_backend"] = backend
            why = (f" (head_k_dim {head_k_dim}, CUDA {WHEEL_CUDA_RUNTIME_MAJOR} as vLLM 0.33.0's wheels ship; an "
                   "older CUDA runtime gets Triton)" if gpu.compute_capability and gpu.compute_capability[0] in (10, 12)
                   else "")
            notes.append(f"GatedDeltaNet prefill on {backend}: vLLM 0.33.0's pick on {device_name(gpu)}{why} "
                         "(qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend)")
    return picks, tuple(notes)
