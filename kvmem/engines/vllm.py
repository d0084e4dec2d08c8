"""vLLM's paged KV cache: pages per layer, groups of layers, blocks, and the numbers its logs print.

Rules read in vllm-project/vllm (commit named where the index held one; release differences
are in docs/research/engines_serving_rules.md, where each rule was checked against real logs):

Page = one block of one layer (vllm/v1/kv_cache_interface.py @ 001cabc1)
    full      block_size x kv_heads_per_rank x (head_size + head_size_v) x dtype_bytes
    sliding, chunked (AttentionSpec base)   2 x block_size x kv_heads_per_rank x head_size x dtype_bytes
    mla       block_size x (kv_lora_rank + qk_rope_head_dim) x dtype_bytes: one "head", no x2, the
              same on every tensor-parallel rank; kv_cache_dtype fp8_ds_mla: block_size x 656
    indexer   DeepSeek-V3.2's lightning-indexer key, its own MLAAttentionSpec of 1 head x
              (index_head_dim + index_head_dim // 128 x 4) uint8 = 132 B per token
              (DeepseekV32IndexerCache, vllm/model_executor/models/deepseek_v2.py)
    mamba     sum of its state tensors, padded up to the attention page in a hybrid model
    kv_cache_dtype "auto" = the model dtype, float32 checkpoints downcast to bfloat16 (the CUDA
    platform's first supported dtype, vllm/config/model.py _resolve_auto_dtype);
    kv_cache_dtype fp8 / fp8_e4m3 / fp8_e5m2 / fp8_inc: 1 byte, per-tensor scales take no page space;
    int8/fp8_per_token_head add 2 x block_size x heads x 4 B of scales per page; nvfp4 (full
    layers only) stores head_size // 2 + head_size // 16 bytes per head; "auto" = the model dtype.
Heads per rank: max(1, kv_heads // tp), a head replicated when tp > kv_heads; tp must divide the
    attention heads ("Total number of attention heads (H) must be divisible by tensor parallel
    size (T)." vllm/config/model.py verify_with_parallel_config). pp: a rank holds its stage's
    layers (vllm/distributed/utils.py get_pp_indices, kvmem.engines.base.pp_stages).
Block size: 16 (vllm/config/cache.py DEFAULT_BLOCK_SIZE). MLA backends force their own
    (vllm/platforms/cuda.py check_and_update_config): FLASHMLA 64 (the Hopper default),
    CUTLASS_MLA 128 (the Blackwell default), FLASHINFER_MLA 64 unless 32 or a multiple of 64,
    FLASHMLA_SPARSE 64 (DeepSeek-V3.2); TRITON_MLA and FLASH_ATTN_MLA keep the block size.
Hybrid Mamba/linear-attention models (vllm/platforms/interface.py _align_hybrid_block_size):
    align = max(16 or the MLA block, block_size);  attention block =
    align x cdiv(mamba_page, align x attention_page_of_one_token)  (mamba_cache_mode none/align;
    "all": lcm(mamba chunk, align) x cdiv(cdiv(mamba_page, page_1), that)); the Mamba page is
    padded to block x attention_page_of_one_token.
State shapes (vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator):
    gated DeltaNet (Qwen3-Next, Qwen3.5)  conv (conv_dim/tp, kernel-1+num_spec), ssm (v_heads/tp, v_dim, k_dim)
    mamba2 (Nemotron-H)  conv ((inner + 2 n_groups' d_state)/tp, kernel-1+num_spec), ssm (heads/tp, head_dim,
                          d_state); n_groups' = n_groups, or tp when tp does not divide it
    mamba1 (Jamba)       conv (inner/tp, kernel-1), ssm (inner/tp, d_state)
    conv dtype = mamba_cache_dtype ("auto": model dtype); ssm dtype = mamba_ssm_cache_dtype, whose
    "auto" is the conv dtype except where a model hook sets it (vllm/model_executor/models/config.py):
    Qwen3.5 takes the config's mamba_ssm_dtype (float32 in the published checkpoints), Nemotron-H
    defaults to float32.
Groups (vllm/v1/core/kv_cache_utils.py get_kv_cache_groups @ 001cabc1):
    hybrid_kv_cache_manager=False turns sliding/chunked layers into full ones when full layers
    exist; one group when every layer has the same spec, or when all have one type (full+MLA, one
    window, mamba) and block size (UniformTypeKVCacheSpecs: num_blocks = memory // sum of pages);
    otherwise smaller pages get larger blocks until all pages are equal, layers are bucketed by
    spec, group size = the smallest bucket (the largest when largest < 1.5 x smallest, from
    v0.12, PR #29303), buckets split with stride layers[i::n] (contiguous slices before v0.12),
    the last group of a bucket padded; num_blocks = memory // page // group_size. Ranks (tp, pp)
    take the minimum; a pp rank projects the groups onto its own layers.
Per-request worst case (max_memory_usage_bytes / page) with L = max_model_len,
    T = in-flight tokens:  full, mla cdiv(L, bs);  sliding cdiv(min(window - 1 + T, L), bs) + 1;
    chunked cdiv(min(chunk + T, L), bs);  from v0.26 T = VllmConfig.max_in_flight_tokens =
    max_concurrent_batches x max_num_batched_tokens, max_concurrent_batches = pp + 1 with async
    scheduling (the default; model runner V2, the CUDA default), pp without (vllm/config/vllm.py;
    PR #47728, vllm#49878 saw the jump from v0.25.1 to v0.26); before v0.26 T = max_num_batched_tokens;  mamba 1 + spec blocks ("none"), 2 + spec blocks ("align",
    the mode prefix caching selects), cdiv(L, bs) ("all").
    "Maximum concurrency for L tokens per request: X x" = num_blocks / sum over groups of those
    (UniformType: the largest per layer). The longest request that fits is vLLM's binary search
    over that worst case (_estimate_max_model_len_from_groups), padding layers included.
The null block: BlockPool holds one block back for good, so auto-fit, the refusal ("To serve at
    least one request ...") and the longest request that fits are checked against
    available - bytes_per_block (one block of every layer of the rank, padding included); the
    pool itself still gets available // bytes_per_block blocks (get_kv_cache_configs and
    check_enough_kv_cache_memory, vllm/v1/core/kv_cache_planning.py in 0.33.0; PR #47272, merged
    2026-08-20, taken as from v0.28: the first release after it is not pinned here).
"GPU KV cache size: N tokens" by release (see `version`):
    v0 engine   "# GPU blocks: N, # CPU blocks: M", block = bs x sum(heads x head_size x 2 [MLA x1])
                x dtype over the stage's attention layers, CPU blocks = swap_space // block
                (vllm/worker/worker.py determine_num_available_blocks); concurrency
                num_blocks x bs / L
    < 0.8       "# GPU blocks: N", concurrency num_blocks x bs / L (early V1: sliding/chunked layers
                beside full ones are cached as full, PR #14097)
    0.8         N = num_blocks x bs, concurrency N / L (PR #13596)
    0.9 - 0.20  N = num_blocks // number_of_groups x smallest block size, concurrency as above; groups
                from the hybrid allocator (PR #17996, June 2025; kvmem applies it from 0.9, though
                0.9.0 itself may predate it)
    >= 0.21     N = int(concurrency x L). PRs #38364/#40694 proposed it after vllm#40691 (v0.19);
                the release it landed in is not pinned: v0.21 is where vllm#43308 saw Gemma-4's
                count jump ~10x at equal memory, and v0.24 logs print this form.
estimate(tokens, batch) = the blocks really allocated for `batch` sequences of `tokens` tokens
    (kv_cache_manager.allocate_slots; single_type_kv_cache_manager.py get_num_skipped_tokens):
    full cdiv(t + k, bs); sliding the same minus max(0, t - window) // bs freed blocks; chunked
    minus ((t - 1) // chunk x chunk) // bs; mamba as its worst case; k = num_speculative_tokens
    lookahead slots. Padding-layer slots of those blocks are reported in details, not per layer;
    draft layers follow the model's own in per_layer.

Unverified here, stated where used: the release that moved the token formula to
int(concurrency x L); the default of mamba_cache_mode "align" vs "none" (kvmem follows
enable_prefix_caching, default off: the v0.19 Qwen3.5 log reproduces with "none");
Mamba "align" blocks held in a running decode (kvmem counts the worst case, 2); releases
around v0.11 aligned hybrid blocks to the Mamba chunk whenever prefix caching was on
(mamba_cache_mode="all" models that); DeepSeek-V3.2 with kv "auto" is bf16 now, but older
releases (models/config.py @ 0144dd5b) mapped it to fp8_ds_mla too (pass kv_dtype="fp8_ds_mla");
draft layers with pp > 1 are refused (where vLLM puts them is not modelled).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ..model import CHUNKED, FULL, MLA, SLIDING, Layer, Model
from ..units import require_positive_int
from .base import Capacity, EngineSpec, assemble, cdiv, kv_heads_per_rank, pp_stages

__all__ = ["estimate", "capacity", "OPTIONS", "SPECS"]

GIB = 1 << 30

# Engine defaults, one table, each with its source.
OPTIONS = {
    # vllm/config/cache.py DEFAULT_BLOCK_SIZE = 16; None = 16, or what the MLA backend / hybrid
    # alignment forces (vllm/platforms/cuda.py, vllm/platforms/interface.py).
    "block_size": None,
    # vllm/engine/arg_utils.py get_batch_defaults: 8192 for the API server on >= 70 GiB GPUs
    # (16384 for the LLM class; 2048 / 8192 on smaller GPUs). Only sliding/chunked layers use it.
    "max_num_batched_tokens": 8192,
    # --disable-hybrid-kv-cache-manager is off by default (vllm/config/scheduler.py); some
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
    # VLLM_ATTENTION_BACKEND / --attention-backend; None = FLASHMLA (FLASHMLA_SPARSE for V3.2).
    "attention_backend": None,
    # Mamba prefix caching selects mamba_cache_mode "align" (vllm/config/cache.py).
    "enable_prefix_caching": False,
    # --mamba-cache-mode: None = "align" with prefix caching, else "none".
    "mamba_cache_mode": None,
    # --mamba-cache-dtype / --mamba-ssm-cache-dtype (vllm/config/cache.py, default "auto").
    "mamba_cache_dtype": "auto",
    "mamba_ssm_cache_dtype": "auto",
    # Which release's rules: "latest" (= 0.33, the release checked by kvmem validate --engine vllm),
    # a release such as "0.19.0", or "v0" (the v0 engine).
    "version": "latest",
    # v0 engine only: --swap-space GiB of CPU blocks per GPU (vllm/config/cache.py, default 4).
    "swap_space": 4,
}

# From which release each rule holds; older releases keep the rule before it.
_TOKENS_FROM_BLOCKS = (0, 8)          # PR #13596 "GPU KV cache size: N tokens"
_HYBRID_GROUPS = (0, 9)               # hybrid allocator (PR #17996): a group per attention type
_BALANCED_GROUPS = (0, 12)            # PR #29303 (merged 2025-11-24): the 1.5x rule, stride split
_TOKENS_FROM_CONCURRENCY = (0, 21)    # N = int(max_concurrency x max_model_len)
_IN_FLIGHT_BATCHES = (0, 26)          # PR #47728: windows reserve max_concurrent_batches x T
_NULL_BLOCK = (0, 28)                 # PR #47272 (merged 2026-08-20): checks leave out the null block
_LATEST = (0, 33)                     # the release kvmem was last checked against (vLLM 0.33.0)

# --kv-cache-dtype values (vllm/config/cache.py CacheDType): bytes per element, quantisation mode.
_KV_FORMATS = {
    "float16": ("fp16", 2, ""), "fp16": ("fp16", 2, ""), "half": ("fp16", 2, ""),
    "bfloat16": ("bf16", 2, ""), "bf16": ("bf16", 2, ""),
    "fp8": ("fp8", 1, ""), "fp8_e4m3": ("fp8_e4m3", 1, ""), "fp8_e5m2": ("fp8_e5m2", 1, ""),
    "fp8_inc": ("fp8_inc", 1, ""), "fp8_ds_mla": ("fp8_ds_mla", 1, "fp8_ds_mla"),
    "int8_per_token_head": ("int8_per_token_head", 1, "per_token_head"),
    "fp8_per_token_head": ("fp8_per_token_head", 1, "per_token_head"),
    "nvfp4": ("nvfp4", 1, "nvfp4"),
}
_MODEL_DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
_STATE_DTYPES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2}

# MLA backends: block size they force (vllm/platforms/cuda.py); None = keep the block size.
_MLA_BACKENDS = {"FLASHMLA": 64, "CUTLASS_MLA": 128, "FLASHINFER_MLA": 64, "FLASHMLA_SPARSE": 64,
                 "TRITON_MLA": None, "FLASH_ATTN_MLA": None}
_OTHER_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")
_FP8_DS_MLA_BYTES_PER_TOKEN = 656     # 512 fp8 latent + 16 B scales + 64 x 2 B rope
_INDEXER_QUANT_BLOCK = 128            # deepseek_v2.py Indexer: fp8 values + one fp32 scale per 128

_QWEN35_TYPES = ("qwen3_5_text", "qwen3_5_moe_text")


# ----------------------------------------------------------------------------- inputs

def _release(version) -> tuple[int, int] | None:
    """(major, minor) of a release, _LATEST for "latest", None for the v0 engine."""
    text = version.strip().lower() if isinstance(version, str) else None
    if text == "v0":
        return None
    if text == "latest":
        return _LATEST
    match = re.match(r"^v?(\d+)\.(\d+)", text or "")
    if match is None:
        raise ValueError(f"version must be 'latest', 'v0' (the v0 engine) or a vLLM release such as "
                         f"'0.19.0', got {version!r}")
    return int(match.group(1)), int(match.group(2))


def _bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def _check_options(opts: dict) -> dict:
    """Validated options, with every value in its working type."""
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ValueError(f"engine 'vllm' has no option {unknown[0]!r}; its options: "
                         f"{', '.join(sorted(OPTIONS))}")
    out = {**OPTIONS, **opts}
    if out["block_size"] is not None:
        out["block_size"] = require_positive_int("block_size", out["block_size"])
    out["max_num_batched_tokens"] = require_positive_int("max_num_batched_tokens",
                                                         out["max_num_batched_tokens"])
    out["hybrid_kv_cache_manager"] = _bool("hybrid_kv_cache_manager", out["hybrid_kv_cache_manager"])
    out["enable_prefix_caching"] = _bool("enable_prefix_caching", out["enable_prefix_caching"])
    out["async_scheduling"] = _bool("async_scheduling", out["async_scheduling"])
    spec = out["num_speculative_tokens"]
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < 0:
        raise ValueError(f"num_speculative_tokens must be a non-negative integer, got {spec!r}")
    backend = out["attention_backend"]
    if backend is not None:
        name = str(backend).strip().upper() if isinstance(backend, str) else None
        if name not in _MLA_BACKENDS and name not in _OTHER_BACKENDS:
            names = ", ".join([*_MLA_BACKENDS, *_OTHER_BACKENDS])
            raise ValueError(f"attention_backend must be one of {names}, got {backend!r}")
        out["attention_backend"] = name
    mode = out["mamba_cache_mode"]
    if mode is None:
        mode = "align" if out["enable_prefix_caching"] else "none"
    if mode not in ("none", "align", "all"):
        raise ValueError(f"mamba_cache_mode must be 'none', 'align' or 'all', got {mode!r}")
    out["mamba_cache_mode"] = mode
    for name in ("mamba_cache_dtype", "mamba_ssm_cache_dtype"):
        value = out[name]
        key = value.strip().lower() if isinstance(value, str) else None
        if key != "auto" and key not in _STATE_DTYPES:
            raise ValueError(f"{name} must be 'auto', 'float32', 'float16' or 'bfloat16', got {value!r}")
        out[name] = key
    swap = out["swap_space"]
    if isinstance(swap, bool) or not isinstance(swap, (int, float)) or not 0 <= swap <= 2**40:
        raise ValueError(f"swap_space must be a number of GiB from 0 to {2**40:,}, got {swap!r}")
    out["release"] = _release(out["version"])
    draft = out["draft"]
    if isinstance(draft, str) and draft != "mtp":
        from ..catalog import get_model
        out["draft"] = get_model(draft)
    elif draft is not None and not isinstance(draft, Model) and draft != "mtp":
        raise ValueError(f"draft must be a kvmem Model, a preset name or 'mtp', got {type(draft).__name__}")
    return out


@dataclass(frozen=True)
class _KVFormat:
    name: str
    nbytes: int
    mode: str          # "", "per_token_head", "nvfp4", "fp8_ds_mla"


def _kv_format(model: Model, kv_dtype) -> _KVFormat:
    """The attention cache format of --kv-cache-dtype ``kv_dtype`` ("auto" = the model dtype)."""
    if isinstance(kv_dtype, str):
        key = kv_dtype.strip().lower().replace("-", "_")
    else:
        key = getattr(kv_dtype, "name", None)
    sparse = any(layer.kind == MLA and layer.index_head_dim for layer in model.layers)
    if key == "auto":
        # vllm/config/model.py _resolve_auto_dtype: float32 checkpoints are downcast to the platform's
        # first supported dtype, bfloat16 on CUDA (sm80+); fp16/bf16 checkpoints keep theirs.
        name = model.dtype if model.dtype in ("fp16", "bf16") else "bf16"
        return _KVFormat(name, _MODEL_DTYPE_BYTES[name], "")
    if key not in _KV_FORMATS:
        valid = ", ".join(["auto", *_KV_FORMATS])
        raise ValueError(f"kv_dtype {kv_dtype!r} is not a vLLM --kv-cache-dtype; valid: {valid}")
    name, nbytes, mode = _KV_FORMATS[key]
    if sparse and name.startswith("fp8"):
        # DeepseekV32ForCausalLM.verify_and_update_config: fp8 caches become "fp8_ds_mla".
        return _KVFormat("fp8_ds_mla", 1, "fp8_ds_mla")
    if mode == "fp8_ds_mla":
        raise ValueError("kv_dtype 'fp8_ds_mla' is DeepSeek-V3.2's sparse-MLA format; this model has no "
                         "indexer (index_head_dim)")
    return _KVFormat(name, nbytes, mode)


# ----------------------------------------------------------------------------- specs

@dataclass(frozen=True)
class _Spec:
    """One layer's KV cache spec, as vLLM's KVCacheSpec: equal specs share a group."""

    kind: str                  # "full", "mla", "sliding", "chunked", "mamba"
    block_size: int
    heads: int = 1
    head_size: int = 0
    head_size_v: int = 0
    dtype_bytes: int = 0
    mode: str = ""
    window: int = 0
    state_bytes: int = 0       # mamba: the real state bytes of one sequence
    padded: int = 0            # mamba: the page it is padded to (0 = unpadded)

    @property
    def family(self) -> tuple:
        """UniformTypeKVCacheSpecs.is_uniform_type: full and MLA are one type; windows must match."""
        if self.kind in ("full", "mla"):
            return ("full",)
        return (self.kind, self.window)

    @property
    def page_bytes(self) -> int:
        bs = self.block_size
        if self.kind == "mamba":
            return self.padded or self.state_bytes
        if self.kind == "mla":
            real = bs * _FP8_DS_MLA_BYTES_PER_TOKEN if self.mode == "fp8_ds_mla" else (
                bs * self.heads * self.head_size * self.dtype_bytes)
        elif self.kind == "full" and self.mode == "nvfp4":
            real = bs * self.heads * (_nvfp4_dim(self.head_size) + _nvfp4_dim(self.head_size_v))
        elif self.kind == "full":
            real = bs * self.heads * (self.head_size + self.head_size_v) * self.dtype_bytes
        else:
            real = 2 * bs * self.heads * self.head_size * self.dtype_bytes
        if self.mode == "per_token_head":
            real += 2 * bs * self.heads * 4
        return real

    def kv_split(self, blocks: int) -> tuple[int, int, int]:
        """(K, V, state) bytes of ``blocks`` pages of this spec."""
        total = blocks * self.page_bytes
        if self.kind == "mamba":
            return 0, 0, total
        if self.kind == "mla":
            return total, 0, 0
        v_dim = self.head_size_v if self.kind == "full" else self.head_size
        if self.mode == "nvfp4":
            k_share, v_share = _nvfp4_dim(self.head_size), _nvfp4_dim(v_dim)
        else:
            k_share, v_share = self.head_size, v_dim
        k = total * k_share // (k_share + v_share)
        return k, total - k, 0

    def worst_blocks(self, max_model_len: int, batched: int, mamba_mode: str, spec_blocks: int) -> int:
        """max_memory_usage_bytes // page: the pages one request of max_model_len may need."""
        bs, length = self.block_size, max_model_len
        if self.kind in ("full", "mla"):
            return cdiv(length, bs)
        if self.kind == "sliding":
            return cdiv(min(self.window - 1 + batched, length), bs) + 1
        if self.kind == "chunked":
            return cdiv(min(self.window + batched, length), bs)
        if mamba_mode == "all":
            return cdiv(length, bs)
        return (2 if mamba_mode == "align" else 1) + spec_blocks

    def held_blocks(self, tokens: int, lookahead: int, mamba_mode: str, spec_blocks: int) -> int:
        """Pages one sequence of ``tokens`` tokens holds (freed pages outside a window excluded)."""
        bs = self.block_size
        allocated = cdiv(tokens + lookahead, bs)
        if self.kind in ("full", "mla"):
            return allocated
        if self.kind == "sliding":
            return allocated - max(0, tokens - self.window) // bs
        if self.kind == "chunked":
            return allocated - (tokens - 1) // self.window * self.window // bs
        if mamba_mode == "all":
            return cdiv(tokens, bs)
        return (2 if mamba_mode == "align" else 1) + spec_blocks


def _nvfp4_dim(head_size: int) -> int:
    """Bytes of one nvfp4 head: packed fp4 values + one fp8 scale per 16 (nvfp4_kv_cache_full_dim)."""
    return head_size // 2 + head_size // 16


# ----------------------------------------------------------------------------- model -> specs

def _draft_layers(model: Model, draft) -> tuple[Layer, ...]:
    """The draft's cache-holding layers: a Model's layers, or the model's MTP layers."""
    if draft is None:
        return ()
    if isinstance(draft, Model):
        return draft.layers
    if not model.mtp_layers:
        raise ValueError(f"draft='mtp' needs MTP layers, but {model.name} has none "
                         "(config num_nextn_predict_layers / mtp_num_hidden_layers)")
    # An MTP block is one decoder layer of the target's own attention (DeepSeek MLA, Qwen full).
    attention = [layer for layer in model.layers if layer.kind in (FULL, MLA)]
    if not attention:
        raise ValueError(f"draft='mtp': {model.name} has no full-attention or MLA layer to copy")
    return (replace(attention[-1], state=None),) * model.mtp_layers


def _check_heads(model: Model, tp: int) -> None:
    heads = model.num_attention_heads
    if heads % tp:
        raise ValueError(f"Total number of attention heads ({heads}) must be divisible by tensor "
                         f"parallel size ({tp}).")


def _state_dtype_bytes(model: Model, opts: dict, notes: list) -> tuple[int, int]:
    """(conv state bytes, ssm state bytes) per element, with vLLM's per-model hooks."""
    model_bytes = _MODEL_DTYPE_BYTES.get(model.dtype, 2)
    conv = model_bytes if opts["mamba_cache_dtype"] == "auto" else _STATE_DTYPES[opts["mamba_cache_dtype"]]
    ssm_option = opts["mamba_ssm_cache_dtype"]
    if ssm_option != "auto":
        return conv, _STATE_DTYPES[ssm_option]
    cfg = _text_config(model)
    if model.model_type in _QWEN35_TYPES:
        # Qwen3_5ForConditionalGenerationConfig: "auto" takes the config's mamba_ssm_dtype.
        name = cfg.get("mamba_ssm_dtype")
        if name is None:
            notes.append("ssm state in float32: the published Qwen3.5 configs set mamba_ssm_dtype "
                         "float32 and this config does not say")
            name = "float32"
        return conv, _state_bytes_named("mamba_ssm_dtype", name)
    if model.model_type == "nemotron_h":
        # NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32".
        return conv, _state_bytes_named("mamba_ssm_cache_dtype", cfg.get("mamba_ssm_cache_dtype", "float32"))
    return conv, conv


def _state_bytes_named(field: str, name) -> int:
    key = str(name).lower().removeprefix("torch.")
    if key not in _STATE_DTYPES:
        raise ValueError(f"config {field} {name!r} is not float32, float16 or bfloat16")
    return _STATE_DTYPES[key]


def _text_config(model: Model) -> dict:
    cfg = model.config or {}
    text = cfg.get("text_config")
    return {**cfg, **text} if isinstance(text, dict) else cfg


def _divide(what: str, value: int, tp: int) -> int:
    if value % tp:
        raise ValueError(f"tp={tp} must divide the {value} {what}")
    return value // tp


def _state_elements(model: Model, layer: Layer, tp: int, num_spec: int) -> tuple[int, int]:
    """(conv elements, ssm elements) of one sequence's state on one tensor-parallel rank."""
    state = layer.state
    kind = model.model_type
    if kind == "jamba":   # mamba1: no speculative conv columns
        inner = _divide("mamba inner channels", state.conv_channels, tp)
        return inner * (state.conv_kernel - 1), _divide("mamba ssm elements", state.ssm_elements, tp)
    channels = state.conv_channels
    if kind == "nemotron_h":
        cfg = _text_config(model)
        groups, d_state = cfg.get("n_groups"), cfg.get("ssm_state_size")
        if isinstance(groups, int) and isinstance(d_state, int) and groups % tp:
            channels += 2 * (tp - groups) * d_state   # extra_groups_for_head_shards
    conv = _divide("conv channels", channels, tp) * (state.conv_kernel - 1 + num_spec)
    _divide("recurrent-state heads", state.ssm_heads, tp)
    return conv, state.ssm_elements // tp


def _attention_spec(layer: Layer, fmt: _KVFormat, tp: int, block: int) -> list[_Spec]:
    if layer.kind == MLA:
        if fmt.mode in ("nvfp4", "per_token_head"):
            raise ValueError(f"kv_dtype {fmt.name} is not modelled for MLA layers")
        main = _Spec("mla", block, 1, layer.kv_lora_rank + layer.qk_rope_head_dim,
                     layer.kv_lora_rank + layer.qk_rope_head_dim, fmt.nbytes, fmt.mode)
        if not layer.index_head_dim:
            return [main]
        width = layer.index_head_dim + layer.index_head_dim // _INDEXER_QUANT_BLOCK * 4
        return [main, _Spec("mla", block, 1, width, width, 1)]
    heads = kv_heads_per_rank(layer.kv_heads, tp)
    if layer.kind == FULL:
        return [_Spec("full", block, heads, layer.head_dim_k, layer.head_dim_v, fmt.nbytes, fmt.mode)]
    if fmt.mode == "nvfp4":
        raise ValueError("kv_dtype nvfp4 is modelled for full-attention layers only "
                         "(vLLM's FullAttentionSpec); this model has sliding/chunked layers")
    kind = "sliding" if layer.kind == SLIDING else "chunked"
    return [_Spec(kind, block, heads, layer.head_dim_k, layer.head_dim_k, fmt.nbytes, fmt.mode,
                  layer.window)]


@dataclass
class _Plan:
    """How vLLM lays one model out: its specs per layer, groups, block size and notes."""

    units: list                # (owner layer index, _Spec)
    groups: list               # lists of unit indices
    uniform_type: bool         # one UniformTypeKVCacheSpecs group (per-layer pages)
    n_layers: int              # target + draft layers (pp staging)
    block_size: int
    fmt: _KVFormat
    notes: list
    padding_layers: int = 0


def _plan(model: Model, kv_dtype, tp: int, pp: int, opts: dict) -> _Plan:
    release = opts["release"]
    _check_heads(model, tp)
    fmt = _kv_format(model, kv_dtype)
    draft = _draft_layers(model, opts["draft"])
    if draft and isinstance(opts["draft"], Model):
        _check_heads(opts["draft"], tp)
    if draft and pp > 1:
        raise ValueError("draft with pp > 1: kvmem does not model on which pipeline stage vLLM "
                         "places the draft layers")
    layers = model.layers + draft
    pp_stages(len(model.layers), pp)
    notes: list[str] = []
    mla = any(layer.kind == MLA for layer in layers)
    sparse = any(layer.kind == MLA and layer.index_head_dim for layer in layers)

    block = opts["block_size"] or 16
    backend = opts["attention_backend"]
    kernel_align = 16
    if backend in _MLA_BACKENDS and not mla:
        raise ValueError(f"attention_backend {backend!r} is an MLA backend; {model.name} has no MLA layers")
    if mla:
        if backend is not None and backend not in _MLA_BACKENDS:
            raise ValueError(f"attention_backend {backend!r} is not an MLA backend; MLA models run on "
                             f"{', '.join(_MLA_BACKENDS)}")
        if sparse:
            if backend not in (None, "FLASHMLA_SPARSE"):
                notes.append(f"DeepSeek-V3.2's sparse MLA runs on FLASHMLA_SPARSE, not {backend}")
            backend = "FLASHMLA_SPARSE"
        backend = backend or "FLASHMLA"
        forced = _mla_block(backend, block)
        if forced != block and opts["block_size"] is not None:
            notes.append(f"block size {forced}: the {backend} backend forces it (asked {block})")
        elif forced != block:
            notes.append(f"block size {forced}, the {backend} backend's")
        block = forced
        kernel_align = _MLA_BACKENDS[backend] or 16

    stateful = [layer for layer in layers if layer.state is not None]
    attention = [layer for layer in layers if layer.caches_tokens]
    if release is not None and release < _HYBRID_GROUPS and stateful:
        raise ValueError(f"vLLM {_show(release)}'s V1 engine has no Mamba/linear-attention layers; "
                         "use version='v0' or a release from 0.9")
    mamba_page = 0
    spec_tokens = opts["num_speculative_tokens"]
    if stateful:
        conv_bytes, ssm_bytes = _state_dtype_bytes(model, opts, notes)
        sizes = set()
        for layer in stateful:
            conv, ssm = _state_elements(model, layer, tp, spec_tokens)
            sizes.add(conv * conv_bytes + ssm * ssm_bytes)
        if len(sizes) > 1:
            raise ValueError("layers with different recurrent-state sizes are not supported")
        mamba_page = sizes.pop()
    mamba_padded = 0
    if stateful and attention and release is not None:
        block, mamba_padded = _align_hybrid(model, attention[0], fmt, tp, block, kernel_align,
                                            mamba_page, opts, notes)

    units = []
    for index, layer in enumerate(layers):
        if layer.caches_tokens:
            for spec in _attention_spec(layer, fmt, tp, block):
                units.append((index, spec))
        if layer.state is not None:
            units.append((index, _Spec("mamba", block, state_bytes=mamba_page, padded=mamba_padded)))
    if not units:
        raise ValueError(f"{model.name} has no layer that vLLM gives a KV cache")
    if release is None and mla:
        notes.append("v0 with MLA: the latent cache of v0.7.1 and later; earlier v0 releases cached "
                     "per-head K and V for DeepSeek models")
    if any(layer.kind == CHUNKED for layer in layers) and opts["hybrid_kv_cache_manager"] and release:
        notes.append("chunked-local layers in their own groups; releases that default "
                     "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE to 0 (v0.12 did) cache them as "
                     "full attention unless it is set: pass hybrid_kv_cache_manager=False for those")
    if release is None:
        return _Plan(units, [list(range(len(units)))], False, len(layers), block, fmt, notes)
    if not opts["hybrid_kv_cache_manager"] or release < _HYBRID_GROUPS:
        units = _unify_hybrid(units, notes, opts["hybrid_kv_cache_manager"])
    units, groups, uniform_type, padding = _group(units, release, notes)
    block = min(units[group[0]][1].block_size for group in groups)
    return _Plan(units, groups, uniform_type, len(layers), block, fmt, notes, padding)


def _show(release) -> str:
    return f"{release[0]}.{release[1]}"


def _mla_block(backend: str, block: int) -> int:
    """The block size an MLA backend runs with (vllm/platforms/cuda.py check_and_update_config)."""
    if backend == "FLASHMLA":
        return block if block % 64 == 0 else 64
    if backend == "CUTLASS_MLA":
        return block if block % 128 == 0 else 128
    if backend == "FLASHINFER_MLA":
        return block if block == 32 or block % 64 == 0 else 64
    if backend == "FLASHMLA_SPARSE":
        return 64
    return block


def _align_hybrid(model: Model, layer: Layer, fmt: _KVFormat, tp: int, block: int, kernel_align: int,
                  mamba_page: int, opts: dict, notes: list) -> tuple[int, int]:
    """(attention block size, padded Mamba page) of a hybrid model (_align_hybrid_block_size)."""
    if layer.kind == MLA:
        one = _attention_spec(layer, fmt, tp, 1)[0]
    else:   # FullAttentionSpec(head_size) of the model's attention shape: head_size_v = head_size
        one = _Spec("full", 1, kv_heads_per_rank(layer.kv_heads, tp), layer.head_dim_k, layer.head_dim_k,
                    fmt.nbytes, "" if fmt.mode == "nvfp4" else fmt.mode)
    page_1 = one.page_bytes
    align = max(kernel_align, block)
    if opts["mamba_cache_mode"] == "all":
        cfg = _text_config(model)
        chunk = cfg.get("mamba_chunk_size") or cfg.get("chunk_size")
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError("mamba_cache_mode 'all' needs the model's mamba chunk size (config "
                             "'mamba_chunk_size' or 'chunk_size'), which this config lacks")
        step = math.lcm(chunk, align)
        needed = step * cdiv(cdiv(mamba_page, page_1), step)
    else:
        needed = align * cdiv(mamba_page, align * page_1)
    if block < needed:
        notes.append(f"attention block size {needed} tokens so that one attention page "
                     f"({needed} x {page_1:,} B) holds a Mamba state of {mamba_page:,} B")
        block = needed
    attention_page = block * page_1
    if attention_page == mamba_page:
        return block, 0
    notes.append(f"Mamba page padded from {mamba_page:,} B to {attention_page:,} B")
    return block, attention_page


def _unify_hybrid(units: list, notes: list, asked: bool) -> list:
    """unify_hybrid_kv_cache_specs: sliding/chunked layers become full ones beside full layers."""
    kinds = {spec.kind for _, spec in units}
    if kinds & {"full", "mla"} and kinds & {"sliding", "chunked"}:
        why = "hybrid_kv_cache_manager=False" if asked else "this release has no hybrid groups"
        notes.append(f"sliding/chunked layers are cached as full attention ({why})")
        units = [(owner, replace(spec, kind="full", window=0) if spec.kind in ("sliding", "chunked") else spec)
                 for owner, spec in units]
    specs = [spec for _, spec in units]
    if not (len(set(specs)) == 1 or _uniform_type(specs)):
        raise ValueError("Hybrid KV cache manager is disabled but failed to convert the KV cache "
                         "specs to one unified type.")
    return units


def _uniform_type(specs: list) -> bool:
    return len({s.block_size for s in specs}) == 1 and len({s.family for s in specs}) == 1


def _group(units: list, release, notes: list) -> tuple[list, list, bool, int]:
    """get_kv_cache_groups: one group, one UniformType group, or equal-size groups per spec."""
    specs = [spec for _, spec in units]
    everything = [list(range(len(units)))]
    if len(set(specs)) == 1:
        return units, everything, False, 0
    if _uniform_type(specs):
        return units, everything, True, 0
    largest = max(s.page_bytes for s in specs)
    unified = []
    for owner, spec in units:
        page = spec.page_bytes
        if largest % page:
            raise ValueError(f"vLLM cannot unify page sizes {page:,} B and {largest:,} B: The page size "
                             "of the layer is not divisible by the maximum page size.")
        if page != largest:
            if spec.kind == "mamba":
                raise ValueError(f"vLLM cannot grow a Mamba page of {page:,} B to the {largest:,} B "
                                 "attention page (its page does not depend on the block size)")
            ratio = largest // page
            spec = replace(spec, block_size=spec.block_size * ratio)
        unified.append((owner, spec))
    units = unified
    buckets: dict = {}
    for index, (_, spec) in enumerate(units):
        buckets.setdefault(spec, []).append(index)
    counts = [len(b) for b in buckets.values()]
    size = min(counts)
    if release >= _BALANCED_GROUPS and max(counts) < 1.5 * size:
        size = max(counts)
    groups, padding = [], 0
    for members in buckets.values():
        n = cdiv(len(members), size)
        padding += n * size - len(members)
        if release >= _BALANCED_GROUPS:
            groups.extend(members[i::n] for i in range(n))
        else:
            groups.extend(members[i * size:(i + 1) * size] for i in range(n))
    if padding:
        notes.append(f"{padding} padding layer(s) make every group {size} layers: their page slots are "
                     "reserved but hold nothing")
    return units, groups, False, padding


# ----------------------------------------------------------------------------- pool arithmetic

def _stage_units(plan: _Plan, pp: int) -> list[set]:
    """Unit indices each pipeline stage holds (draft layers are refused with pp > 1)."""
    stages = pp_stages(plan.n_layers, pp)
    return [{i for i, (owner, _) in enumerate(plan.units) if owner in stage} for stage in stages]


def _page(plan: _Plan) -> int:
    return plan.units[plan.groups[0][0]][1].page_bytes


def _stage_blocks(plan: _Plan, members: set, kv_memory: int) -> int | None:
    """num_blocks one rank's memory gives (get_kv_cache_config_from_groups); None without layers."""
    if not members:
        return None
    if plan.uniform_type:
        pages = sum(plan.units[i][1].page_bytes for i in members)
        return kv_memory // pages
    group_size = max(sum(i in members for i in group) for group in plan.groups)
    return max(kv_memory // _page(plan) // group_size, 0)


def _in_flight_tokens(opts: dict, pp: int) -> int:
    """Tokens scheduled but not yet settled that a window reserves (VllmConfig.max_in_flight_tokens).

    From v0.26: max_concurrent_batches x max_num_batched_tokens, with max_concurrent_batches =
    pp + 1 under async scheduling (model runner V2), else pp. Before: max_num_batched_tokens.
    """
    batched = opts["max_num_batched_tokens"]
    if opts["release"] < _IN_FLIGHT_BATCHES:
        return batched
    return (pp + 1 if opts["async_scheduling"] else pp) * batched


def _worst_args(max_model_len: int, opts: dict) -> tuple:
    return (max_model_len, opts["in_flight_tokens"], opts["mamba_cache_mode"],
            opts["num_speculative_tokens"])


def _request_blocks(plan: _Plan, max_model_len: int, opts: dict) -> int:
    """Pages one request of max_model_len needs (get_max_concurrency_for_kv_cache_config)."""
    args = _worst_args(max_model_len, opts)
    if plan.uniform_type:
        return max(spec.worst_blocks(*args) for _, spec in plan.units)
    return sum(plan.units[group[0]][1].worst_blocks(*args) for group in plan.groups)


def _request_bytes(plan: _Plan, members: set, max_model_len: int, opts: dict) -> int:
    """_max_memory_usage_bytes_from_groups on one rank: one request's worst case, padding included."""
    args = _worst_args(max_model_len, opts)
    if plan.uniform_type:
        return sum(plan.units[i][1].worst_blocks(*args) * plan.units[i][1].page_bytes for i in members)
    group_size = max(sum(i in members for i in group) for group in plan.groups)
    return group_size * _page(plan) * _request_blocks(plan, max_model_len, opts)


def _block_bytes(plan: _Plan, members: set) -> int:
    """_pool_bytes_per_block on one rank: one block of every layer it holds, padding layers included."""
    if plan.uniform_type:
        return sum(plan.units[i][1].page_bytes for i in members)
    group_size = max(sum(i in members for i in group) for group in plan.groups)
    return group_size * _page(plan)


def _check_memory(plan: _Plan, members: set, kv_memory: int, release) -> int:
    """The memory vLLM's admission check and auto-fit plan against: less the null block from v0.28."""
    if release < _NULL_BLOCK or not members:
        return kv_memory
    return kv_memory - _block_bytes(plan, members)


def _longest(fits, cap: int | None) -> int:
    """The largest L >= 0 with fits(L), searched up to cap (or 2**40 without one)."""
    high = cap or 1 << 40
    if not fits(1):
        return 0
    if fits(high):
        return high
    low = 1
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


# ----------------------------------------------------------------------------- v0 engine

def _v0_block_bytes(plan: _Plan, members: set) -> int:
    """CacheEngine.get_cache_block_size: one block of every attention layer of the stage."""
    total = 0
    for i in members:
        spec = plan.units[i][1]
        if spec.kind == "mamba":
            continue
        if spec.kind == "mla":
            total += spec.block_size * spec.head_size * spec.dtype_bytes
        else:
            total += 2 * spec.block_size * spec.heads * spec.head_size * spec.dtype_bytes
    return total


# ----------------------------------------------------------------------------- entry points

def estimate(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, **options):
    """Bytes of the blocks vLLM allocates for ``batch`` sequences of ``tokens`` tokens."""
    opts = _check_options(options)
    plan = _plan(model, kv_dtype, tp, pp, opts)
    if opts["release"] is None:
        return _estimate_v0(model, plan, tokens=tokens, batch=batch, tp=tp, pp=pp, opts=opts)
    held = _held(plan, tokens, opts)
    rows = [(0, 0, 0)] * plan.n_layers
    for (owner, spec), blocks in zip(plan.units, held):
        k, v, s = spec.kv_split(blocks * batch)
        rows[owner] = (rows[owner][0] + k, rows[owner][1] + v, rows[owner][2] + s)
    stages = _stage_units(plan, pp)
    real = [sum(sum(rows[owner]) for owner in _owners(plan, members)) for members in stages]
    largest = max(range(pp), key=lambda s: real[s])
    members = stages[largest]
    if plan.uniform_type:
        pool = real[largest]
        blocks = batch * max(held)
    else:
        group_size = max(sum(i in members for i in group) for group in plan.groups)
        per_sequence = sum(held[group[0]] for group in plan.groups)
        pool = group_size * _page(plan) * batch * per_sequence
        blocks = batch * per_sequence
    notes = list(plan.notes)
    _explain(notes, plan, tokens, opts["num_speculative_tokens"], pool - real[largest])
    details = {"version": opts["version"], "block_size": plan.block_size,
               "page_bytes": sorted({spec.page_bytes for _, spec in plan.units}),
               "groups": _group_details(plan, held), "blocks": blocks, "pool_bytes": pool,
               "padding_bytes": pool - real[largest], "uniform_type": plan.uniform_type}
    result = assemble(model, "vllm", tokens=tokens, batch=batch, kv_dtype=plan.fmt.name, tp=tp, pp=pp,
                      rows=rows, notes=notes, details=details)
    padding = pool - real[largest]
    if not padding:
        return result
    # Padding layers' page slots are taken from the pool with every block: they count in the KV
    # bytes of this device (half as K, half as V pages), though no model layer in per_layer owns them.
    return replace(result, k_bytes=result.k_bytes + padding // 2, v_bytes=result.v_bytes + padding - padding // 2,
                   peak_bytes=result.peak_bytes + padding,
                   kv_bytes_all_devices=result.kv_bytes_all_devices + tp * padding)


def _held(plan: _Plan, tokens: int, opts: dict) -> list[int]:
    """Pages each unit holds for one sequence of ``tokens`` tokens."""
    spec_tokens = opts["num_speculative_tokens"]
    return [spec.held_blocks(tokens, spec_tokens, opts["mamba_cache_mode"], spec_tokens)
            for _, spec in plan.units]


def _owners(plan: _Plan, members: set) -> set:
    return {plan.units[i][0] for i in members}


def _group_details(plan: _Plan, held: list[int]) -> list[dict]:
    out = []
    for group in plan.groups:
        specs = [plan.units[i][1] for i in group]
        out.append({"kind": "+".join(sorted({s.kind for s in specs})), "layers": len(group),
                    "block_size": specs[0].block_size,
                    "page_bytes": (sum(s.page_bytes for s in specs) if plan.uniform_type
                                   else specs[0].page_bytes),
                    "blocks_per_sequence": max(held[i] for i in group)})
    return out


def _explain(notes: list, plan: _Plan, tokens: int, lookahead: int, padding: int) -> None:
    """Notes on where vLLM's bytes differ from the textbook count."""
    kinds = {spec.kind for _, spec in plan.units}
    bs = plan.block_size
    slots = cdiv(tokens + lookahead, bs) * bs
    if slots != tokens:
        spare = f" ({lookahead} of them lookahead slots for speculative tokens)" if lookahead else ""
        notes.append(f"whole blocks of {bs} tokens: {tokens:,} tokens take {slots:,} slots per sequence "
                     f"and full-attention layer{spare}")
    if "sliding" in kinds:
        notes.append("sliding layers keep only the blocks holding the last `window` tokens, the partly "
                     "used first block included")
    if "chunked" in kinds:
        notes.append("chunked layers keep only the blocks of the current attention chunk")
    if "mamba" in kinds:
        notes.append("Mamba/linear layers hold a fixed state page per sequence (state_bytes), not per token")
    if padding:
        notes.append(f"{padding:,} B of the blocks are the slots of padding layers")


def _estimate_v0(model: Model, plan: _Plan, *, tokens: int, batch: int, tp: int, pp: int, opts: dict):
    """v0: one block table for every layer; a block holds block_size tokens of each layer."""
    layers = model.layers + _draft_layers(model, opts["draft"])
    rows = [(0, 0, 0)] * plan.n_layers
    blocks = cdiv(tokens, plan.block_size)
    state_bytes = _MODEL_DTYPE_BYTES.get(model.dtype, 2)
    for owner, spec in plan.units:
        if spec.kind == "mamba":   # v0's MambaCacheManager: a state per sequence, outside the KV pool
            conv, ssm = _state_elements(model, layers[owner], tp, 0)
            k, v, s = 0, 0, batch * (conv + ssm) * state_bytes
        else:                      # CacheEngine: head_size x 2 (K and V), MLA one latent
            v0_spec = spec if spec.kind == "mla" else replace(spec, kind="sliding", mode="")
            k, v, s = v0_spec.kv_split(blocks * batch)
        rows[owner] = (rows[owner][0] + k, rows[owner][1] + v, rows[owner][2] + s)
    notes = list(plan.notes) + ["v0 engine: every attention layer holds cdiv(tokens, block_size) blocks "
                                "(sliding windows not recycled in this count); Mamba states per sequence "
                                "in the model dtype, outside the KV pool"]
    details = {"version": "v0", "block_size": plan.block_size, "blocks": batch * blocks,
               "cache_block_bytes": max(_v0_block_bytes(plan, m) for m in _stage_units(plan, pp))}
    return assemble(model, "vllm", tokens=tokens, batch=batch, kv_dtype=plan.fmt.name, tp=tp, pp=pp,
                    rows=rows, notes=notes, details=details)


def capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None,
             **options) -> Capacity:
    """What vLLM makes of ``kv_memory`` bytes per GPU: its block count and the lines it logs."""
    opts = _check_options(options)
    plan = _plan(model, kv_dtype, tp, pp, opts)
    release = opts["release"]
    if release is not None:
        opts["in_flight_tokens"] = _in_flight_tokens(opts, pp)
    length = max_model_len or model.max_position_embeddings
    notes = list(plan.notes)
    if max_model_len is None:
        if length is None:
            raise ValueError("max_model_len is needed: the model config gives no max_position_embeddings")
        notes.append(f"max_model_len {length:,} (the model's max_position_embeddings)")
    elif model.max_position_embeddings and max_model_len > model.max_position_embeddings:
        notes.append(f"max_model_len {max_model_len:,} exceeds the model's {model.max_position_embeddings:,} "
                     "positions; vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    stages = _stage_units(plan, pp)
    bs = plan.block_size
    if release is None:
        return _capacity_v0(model, plan, stages, kv_memory, length, opts, notes)
    per_stage = [_stage_blocks(plan, members, kv_memory) for members in stages]
    num_blocks = min(blocks for blocks in per_stage if blocks is not None)
    request = _request_blocks(plan, length, opts)
    if release < _HYBRID_GROUPS:
        concurrency = num_blocks * bs / length
    else:
        concurrency = num_blocks / request
    if release >= _TOKENS_FROM_CONCURRENCY:
        # vLLM: int(max_concurrency * max_model_len) in floats; past 2**53 floats lose whole
        # tokens, so there the same quotient is taken exactly
        tokens = int(concurrency * length)
        if tokens >= 2**53:
            tokens = num_blocks * length // request
    elif release >= _HYBRID_GROUPS:
        tokens = num_blocks // len(plan.groups) * bs
    else:
        tokens = num_blocks * bs
    cap = model.max_position_embeddings
    usable = {i: _check_memory(plan, m, kv_memory, release) for i, m in enumerate(stages)}
    longest = _longest(lambda n: all(_request_bytes(plan, m, n, opts) <= usable[i]
                                     for i, m in enumerate(stages) if m), cap)
    short = [(i, _request_bytes(plan, m, length, opts)) for i, m in enumerate(stages) if m]
    short = [(i, need) for i, need in short if need > usable[i]]
    needed = max(_request_bytes(plan, m, length, opts) for m in stages)
    refuses = None
    if short:
        stage, need = short[0]
        null = " (the null block left out)" if release >= _NULL_BLOCK else ""
        refuses = (f"vLLM refuses to start: one request of {length:,} tokens needs {need / GIB:.2f} GiB "
                   f"of KV cache, more than the {usable[stage] / GIB:.2f} GiB available{null}; the "
                   f"longest that fits is {longest:,}")
        notes.append(refuses)
    log = _log_lines(release, num_blocks, tokens, concurrency, length)
    details = {"version": opts["version"], "num_blocks": num_blocks, "blocks_per_stage": per_stage,
               "blocks_per_request": request, "groups": len(plan.groups), "group_layers":
               [len(g) for g in plan.groups], "padding_layers": plan.padding_layers,
               "page_bytes": sorted({spec.page_bytes for _, spec in plan.units}),
               "uniform_type": plan.uniform_type, "request_bytes": needed, "log": log}
    if refuses:
        details["engine_refuses"] = refuses
    return Capacity(model=model.name, engine="vllm", kv_memory=kv_memory, blocks=num_blocks, tokens=tokens,
                    max_concurrency=concurrency, max_model_len=longest, block_size=bs,
                    notes=tuple(notes), details=details)


def _log_lines(release, num_blocks: int, tokens: int, concurrency: float, length: int) -> list[str]:
    """The lines vLLM prints for this pool, in the release's own format."""
    if release < _TOKENS_FROM_BLOCKS:
        return [f"# GPU blocks: {num_blocks}",
                f"Maximum concurrency for {length} tokens per request: {concurrency:.2f}x"]
    return [f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {length:,} tokens per request: {concurrency:.2f}x"]


def _capacity_v0(model: Model, plan: _Plan, stages: list, kv_memory: int, length: int, opts: dict,
                 notes: list) -> Capacity:
    """v0: num_gpu_blocks = memory // cache block, CPU blocks = swap_space // cache block."""
    block_bytes = max(_v0_block_bytes(plan, members) for members in stages)
    if not block_bytes:
        raise ValueError(f"{model.name} has no attention layer for the v0 engine's KV cache")
    bs = plan.block_size
    num_blocks = kv_memory // block_bytes
    cpu_blocks = int(opts["swap_space"] * GIB) // block_bytes
    tokens = num_blocks * bs
    concurrency = tokens / length
    longest = min(tokens, model.max_position_embeddings) if model.max_position_embeddings else tokens
    refuses = None
    if length > tokens:
        refuses = (f"vLLM v0 refuses to start: The model's max seq len ({length}) is larger than the "
                   f"maximum number of tokens that can be stored in KV cache ({tokens}).")
        notes.append(refuses)
    log = [f"# GPU blocks: {num_blocks}, # CPU blocks: {cpu_blocks}",
           f"Maximum concurrency for {length} tokens per request: {concurrency:.2f}x"]
    details = {"version": "v0", "num_blocks": num_blocks, "cpu_blocks": cpu_blocks,
               "cache_block_bytes": block_bytes, "log": log}
    if refuses:
        details["engine_refuses"] = refuses
    return Capacity(model=model.name, engine="vllm", kv_memory=kv_memory, blocks=num_blocks, tokens=tokens,
                    max_concurrency=concurrency, max_model_len=longest, block_size=bs,
                    notes=tuple(notes), details=details)


SPECS = (EngineSpec("vllm", OPTIONS, estimate, capacity, __doc__),)
