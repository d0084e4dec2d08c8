"""vLLM's options, checked, with each default's source; the release table. The KV cache formats are formats.py,
the MLA backends mla.py, the picks by the GPU device.py."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ...model import Model
from ...units import require_positive_int
from .formats import STATE_DTYPES
from .mla import MLA_BACKENDS, OTHER_BACKENDS

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
        if name not in MLA_BACKENDS and name not in OTHER_BACKENDS:
            names = ", ".join([*MLA_BACKENDS, *OTHER_BACKENDS])
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
