"""llama.cpp: the KV cache a llama.cpp context allocates, cell by cell, and the lines it logs.

Rules (ggml-org/llama.cpp; files and commits as read for docs/research/engines_llamacpp_hf_rules.md:
src/llama-kv-cache.cpp @ 3514e9f6, src/llama-kv-cache-iswa.cpp @ 2aef9767,
src/llama-memory-recurrent.cpp @ 76d94392, src/llama-context.cpp, src/llama-model.cpp,
src/llama-cparams.h, ggml/src/ggml-common.h, common/arg.cpp):

Cells. A cell holds one token of one layer. ``n_ctx`` (-c) is padded, then split into
streams: one stream for a unified cache (``kv_unified``, -kvu), else one per sequence
(``n_seq``, -np). The log's ``cells`` is per stream; the bytes cover all streams.
    build >= 2025-11-06 (PR #17046, llama_context ctor)
        n_ctx = pad256(n_ctx); unified: n_ctx_seq = n_ctx;
        else n_ctx_seq = pad256(n_ctx // n_seq), n_ctx = n_ctx_seq * n_seq (llama.cpp warns
        "n_ctx is not divisible by n_seq_max - rounding down to N" even when N went up)
    2025-07-16 (PR #14363, per-sequence streams) .. 2025-11-06
        unified: pad(n_ctx, n_pad); else pad(ceil(n_ctx / n_seq), n_pad) per stream. The
        rounding order of this window is UNVERIFIED upstream: it is read from a downstream
        copy of llama_model::create_memory of that period.
    before PR #14363: one buffer of pad(n_ctx, n_pad) cells shared by every sequence.
    n_pad: 1 before 2023-12-03 (PR #4280); 32 from then; 256 from 2024-04-02 (PR #6438);
    256 with flash attention, 32 without, from 2024-05-13 (PR #7257); 1 from 2025-10-28
    (PR #16812, "remove KV cache size padding"); 256 always from 2025-11-06 (PR #17046).
Bytes. Per layer that owns a cache: K = ggml_row_size(type_k, n_embd_k_gqa) x cells x streams,
    V likewise with type_v (ggml blocks: q8_0 34 B / 32 values, q5_1 24, q5_0 22, q4_1 20,
    q4_0 and iq4_nl 18; f32 4 B, f16/bf16 2 B per value). Without flash attention V is
    stored transposed, and when V widths differ across layers every V row is padded to the
    widest (llama-kv-cache.cpp [TAG_V_CACHE_VARIABLE]).
Sliding windows (llama-kv-cache-iswa.cpp). Models with both windowed and full layers get a
    second cache for the windowed ones (chunked attention, Llama 4, counts as windowed):
        >= PR #17046:  pad256(min(n_ctx_seq, n_swa * (unified ? n_seq : 1) + n_ubatch))
        >= PR #14363:  min(n_ctx_seq, pad(n_swa * (unified ? n_seq : 1) + n_ubatch, n_pad))
        >= 2025-05-20 (PR #13194; PR #13833 form):  min(n_ctx, pad(n_swa * n_seq + n_ubatch, n_pad))
        before: no SWA cache, windowed layers hold n_ctx cells.
    ``swa_full`` (--swa-full) makes the SWA cache n_ctx_seq cells: still two caches, two lines.
    n_ubatch is the effective one: min(n_ctx, n_batch, n_ubatch) (llama_context ctor). The CLI
    default is swa_full = false; llama_context_default_params() has swa_full = true.
    Models whose every attention layer is windowed (Mistral-7B-v0.1, Phi-3) and the Qwen2/3
    families get one full-size cache: llama.cpp does not read their window (Phi-3's SWA is
    disabled, PR #13676). Gemma-2/3 always get the two caches (swa_type is set for the
    architecture): with fewer layers than the pattern, every layer is windowed and the non-SWA
    cache is empty, "0 layers", 0.00 MiB, beside a window-sized SWA cache (llama.cpp 0c1e57098).
MLA (DeepSeek-V2/V3, Kimi). ``mla`` = "latent": one row of kv_lora_rank + rope (576) per token
    as K and no V tensor (builds from 2026-01-24, PR #19067, print "V (f16): 0.00 MiB");
    "latent+v": K 576 and V kv_lora_rank (512) (MLA GGUFs from April 2025, PR #12801, until
    PR #19067); "none": per-head K = n_head x (qk_nope + qk_rope) and V = n_head x v_head_dim
    (GGUFs converted before PR #12801, on any build). The default is the build's mode for an
    MLA GGUF. DeepSeek-V3.2's indexer cache (llama_kv_cache_dsa) is not modelled: refused.
Recurrent state (llama-memory-recurrent.cpp). Linear/SSM layers keep, per sequence, one cell
    of R = (d_conv - 1) x conv channels and S = the SSM state, both f32, in
    max(1, n_seq) x (1 + n_rs_seq) rows; ``n_rs_seq`` (2026 builds) adds rollback snapshots.
    The log's ``layers`` is hparams.n_layer (all layers; with ``nextn`` the MTP layers too).
    Hybrid models put their attention layers in an ordinary cache under the rules above.
Layers without a cache of their own (Gemma-3n KV-sharing layers, MLP-only blocks) hold none
    and are not counted.
MLA cache types. An MLA GGUF (the split cache, hparams.is_mla()) refuses type_k != type_v:
    "model does not support different K (q8_0) and V (f16) cache types", checked first
    (src/llama-context.cpp llama_init_from_model, build 0c1e57098 vendored by llama-cpp-python
    0.3.36). The build that added it is not pinned: kvmem applies it with mla="latent" (builds
    from 2026-01-24); GGUFs without the split (mla="none") take mixed types.
Blocks per head. With flash attention on or auto, a quantised type_k (type_v) needs its 32-value
    block to divide n_embd_head_k (n_embd_head_v) of every layer, not only the whole row: "K cache
    type q8_0 with block size 32 does not divide n_embd_head_k=80" (src/llama-context.cpp, same
    build; checked after the quantised-V rule). With flash attention off only the row counts.
Flash attention. A quantised V cache needs it: builds before the tri-state -fa (2025-08-30)
    refuse with "V cache quantization requires flash_attn"; later ones with
    "quantized V cache requires flash_attn to be enabled" for -fa off, and turn "auto" on
    while creating the cache (llama_context: cparams.flash_attn = type != DISABLED).
Devices. llama.cpp splits layers, not heads: tp > 1 is refused (--split-mode row keeps the KV
    cache on the main GPU; common/arg.cpp -mg help). ``pp`` = GPUs of --split-mode layer with
    equal --tensor-split and every layer offloaded: layer il goes to the GPU whose split
    interval holds il / (n_layer + 1) (llama_model::load_tensors, upper_bound over the
    normalised splits, float32). The reported device is the one holding the most bytes.
Log format eras (approximate dates; ``log_lines(style=...)`` pins one):
    "kv_self"          "<prefix>: KV self size  = ..., K (t): ..., V (t): ..."; prefix
                       llama_new_context_with_model, llama_init_from_model from ~2025-01-12,
                       llama_context from ~2025-03-13
    "unified"          ~2025-05-01: "llama_kv_cache_unified: size = ... (%6u cells, %3d layers, %2u seqs)"
    "unified_streams"  2025-07-16 (PR #14363): "... %2u/%2u seqs"
    "unified_seqs"     ~2025-07-20: "... %2u/%u seqs"
    "current"          2025-08-21 (PR #15467): "llama_kv_cache: size = ... %2u/%u seqs"
    MiB = (float)bytes / 2^20 printed "%7.2f": float32, then round-half-even to 2 decimals.
Capacity: the most cells (whole pads per stream) whose caches and recurrent state fit
    ``kv_memory`` on the fullest device; blocks = tokens = total cells, block_size 1.
Not modelled: the one-day f16 SWA cache of PR #21277 (2026-04-01, reverted by #21332), the
    DSA/DeepSeek-V4 caches, --n-gpu-layers partial offload, backend buffer alignment.
"""

from __future__ import annotations

import datetime
import struct

from ..dtypes import dtype
from ..model import CHUNKED, FULL, MLA, SLIDING, Model
from ..units import parse_tokens, require_positive_int
from .base import Capacity, EngineSpec, Estimate

__all__ = ["estimate", "capacity", "log_lines", "LOG_STYLES", "CACHE_TYPES", "MLA_MODES", "SPECS"]

# Engine defaults, each as llama.cpp's CLI (common/common.h, common/arg.cpp) sets it.
DEFAULTS = {
    "n_ctx": None,        # -c; None: tokens x n_seq (= tokens x batch when n_seq is unset)
    "n_seq": None,        # -np; None: batch
    "n_batch": 2048,      # -b, common_params.n_batch
    "n_ubatch": 512,      # -ub, common_params.n_ubatch
    "type_k": None,       # -ctk; None: kv_dtype; "auto": f16 (common_params.cache_type_k)
    "type_v": None,       # -ctv; likewise (common_params.cache_type_v)
    "flash_attn": None,   # -fa; None: "auto" from 2025-08-30, off before
    "swa_full": False,    # --swa-full; common_params.swa_full = false
    "kv_unified": False,  # -kvu; common_params.kv_unified = false (llama-server -np auto: true)
    "mla": None,          # None: the build's mode for an MLA GGUF
    "build": None,        # None: current; else the build's date "YYYY-MM-DD"
    "n_rs_seq": None,     # recurrent rollback snapshots (2026 builds); None: builds without them
    "nextn": False,       # MTP/NextN layers loaded (n_layer_all): counted in the recurrent line
}

CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")  # common/arg.cpp
MLA_MODES = ("latent", "latent+v", "none")
LLAMA_MAX_SEQ = 256  # src/llama-cparams.h
_QUANT_BLOCK = 32    # ggml_blck_size of q8_0, q5_0, q5_1, q4_0, q4_1, iq4_nl (ggml/src/ggml.c type traits)

_D = datetime.date
PR_4280, PR_6438, PR_5021, PR_7257 = _D(2023, 12, 3), _D(2024, 4, 2), _D(2024, 4, 30), _D(2024, 5, 13)
PR_12801, PR_13194, PR_14363 = _D(2025, 4, 15), _D(2025, 5, 20), _D(2025, 7, 16)
FA_AUTO, PR_15467, PR_16812, PR_17046, PR_19067 = (
    _D(2025, 8, 30), _D(2025, 8, 21), _D(2025, 10, 28), _D(2025, 11, 6), _D(2026, 1, 24))
CURRENT = datetime.date.max

LOG_STYLES = ("kv_self", "unified", "unified_streams", "unified_seqs", "current")
_STYLE_FROM = ((_D(2025, 5, 1), "unified"), (PR_14363, "unified_streams"),
               (_D(2025, 7, 20), "unified_seqs"), (PR_15467, "current"))
_KV_SELF_PREFIX = ((_D(2025, 1, 12), "llama_init_from_model"), (_D(2025, 3, 13), "llama_context"))

# Families whose sliding window llama.cpp does not read: one full-size cache.
_WINDOW_IGNORED = {"llama", "mistral", "mixtral", "phi3", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"}
# Architectures llama.cpp always gives the two-cache iSWA memory (hparams.swa_type set in
# llama_model::load_hparams), even when every layer is windowed: fewer layers than the pattern.
_ALWAYS_ISWA = {"gemma2", "gemma3", "gemma3_text"}
_SWA_FULL_WARNING = ("using full-size SWA cache (ref: "
                     "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)")


def _pad(n: int, multiple: int) -> int:
    """GGML_PAD: n rounded up to a multiple."""
    return -(-n // multiple) * multiple


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _mib(nbytes: int) -> float:
    """(float)bytes / (1024.0f * 1024.0f), as llama.cpp computes it before printing."""
    return _f32(float(nbytes)) / 1048576.0


def _printed(nbytes: int) -> float:
    """The MiB number the log prints ("%.2f" of the float32 value)."""
    return float(f"{_mib(nbytes):.2f}")


# ---- inputs ---------------------------------------------------------------------------------

def _build(value) -> datetime.date:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("current", "latest")):
        return CURRENT
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValueError(f"build must be the llama.cpp build's date as 'YYYY-MM-DD' or 'current', got {value!r}")


def _cache_type(field: str, value) -> str:
    """A ggml cache type name: "auto" is f16, llama.cpp's default for both K and V."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "f16"
    try:
        name = dtype(value).name
    except ValueError:
        name = None
    name = {"fp32": "f32", "fp16": "f16"}.get(name, name)
    if name not in CACHE_TYPES:
        raise ValueError(f"{field} must be a llama.cpp cache type ({', '.join(CACHE_TYPES)}), got {value!r}")
    return name


def _kvmem_dtype(ggml_name: str):
    return dtype({"f32": "fp32", "f16": "fp16"}.get(ggml_name, ggml_name))


def _flash_attn(value, build: datetime.date) -> bool:
    """The flash-attention setting the cache is built with."""
    words = {"on": True, "enabled": True, "off": False, "disabled": False, "auto": None}
    if isinstance(value, str) and value.strip().lower() in words:
        value = words[value.strip().lower()]
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"flash_attn must be True/'on', False/'off', 'auto' or None, got {value!r}")
    if value is None:
        return build >= FA_AUTO  # tri-state "auto" counts as on while the cache is created
    if value and build < PR_5021:
        raise ValueError(f"flash_attn: llama.cpp has flash attention from PR #5021 (2024-04-30), "
                         f"build {build} has none")
    return value


def _count(field: str, value, *, allow_zero: bool = False) -> int:
    if allow_zero and value == 0 and not isinstance(value, bool):
        return 0
    return require_positive_int(field, value)


def _n_pad(build: datetime.date, flash_attn: bool) -> int:
    if build >= PR_17046:
        return 256
    if build >= PR_16812:
        return 1
    if build >= PR_7257:
        return 256 if flash_attn else 32
    if build >= PR_6438:
        return 256
    return 32 if build >= PR_4280 else 1


def _settings(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, options: dict) -> dict:
    """Every option resolved and checked, as llama.cpp would before building the cache."""
    if tp > 1:
        raise ValueError(f"tp={tp}: llama.cpp does not split the KV cache by heads across tensor-parallel "
                         "ranks (--split-mode row keeps the whole KV cache on the main GPU); use pp for "
                         "--split-mode layer")
    build = _build(options["build"])
    type_k = _cache_type("type_k", options["type_k"] if options["type_k"] is not None else kv_dtype)
    type_v = _cache_type("type_v", options["type_v"] if options["type_v"] is not None else kv_dtype)
    flash_attn = _flash_attn(options["flash_attn"], build)
    mla_default = None if not model.count(MLA) else (
        "none" if build < PR_12801 else "latent+v" if build < PR_19067 else "latent")
    if (options["mla"] or mla_default) == "latent" and type_k != type_v:
        # llama_init_from_model, before every other cache-type check: hparams.is_mla() (a GGUF with the
        # MLA split cache) refuses different K and V types
        raise ValueError(f"type_k={type_k}, type_v={type_v}: llama_init_from_model: model does not support "
                         f"different K ({type_k}) and V ({type_v}) cache types")
    if type_v not in ("f32", "f16", "bf16") and not flash_attn:
        if build < FA_AUTO:
            raise ValueError(f"type_v={type_v}: V cache quantization requires flash_attn")
        raise ValueError(f"type_v={type_v}: llama_init_from_model: quantized V cache requires flash_attn to be enabled")
    if flash_attn:
        _check_blocks_divide_heads(model, type_k, type_v, options["mla"] or mla_default)
    n_seq = _count("n_seq", options["n_seq"] if options["n_seq"] is not None else batch)
    if n_seq > LLAMA_MAX_SEQ:
        raise ValueError(f"n_seq={n_seq}: n_seq_max must be <= {LLAMA_MAX_SEQ}")
    if batch > n_seq:
        raise ValueError(f"batch={batch} sequences need n_seq >= {batch} (-np); got n_seq={n_seq}")
    if options["n_ctx"] is None:
        n_ctx = tokens * n_seq
    else:
        try:
            n_ctx = parse_tokens(options["n_ctx"])
        except ValueError:
            raise ValueError(f"n_ctx must be a positive number of cells (-c), got {options['n_ctx']!r}") from None
    n_batch = min(n_ctx, _count("n_batch", options["n_batch"]))
    n_ubatch = min(n_batch, _count("n_ubatch", options["n_ubatch"]))
    n_rs_seq = options["n_rs_seq"]
    if n_rs_seq is not None:
        n_rs_seq = _count("n_rs_seq", n_rs_seq, allow_zero=True)
        n_ubatch = max(n_ubatch, n_rs_seq + 2) if n_rs_seq else n_ubatch
    for name in ("swa_full", "kv_unified", "nextn"):
        if not isinstance(options[name], bool):
            raise ValueError(f"{name} must be True or False, got {options[name]!r}")
    if options["nextn"] and not model.mtp_layers:
        raise ValueError(f"nextn=True but {model.name} has no MTP/NextN layers")
    return dict(build=build, type_k=type_k, type_v=type_v, flash_attn=flash_attn, n_seq=n_seq,
                n_ctx_requested=n_ctx, n_batch=n_batch, n_ubatch=n_ubatch, n_rs_seq=n_rs_seq,
                swa_full=options["swa_full"], kv_unified=options["kv_unified"], nextn=options["nextn"],
                mla=options["mla"], n_pad=_n_pad(build, flash_attn))


def _head_dims(model: Model, layer, mla_mode: str | None) -> tuple[int, int]:
    """(n_embd_head_k, n_embd_head_v) of a layer as llama.cpp's hparams hold them."""
    if layer.kind != MLA:
        return layer.head_dim_k, layer.head_dim_v
    if mla_mode == "none":
        return (_config_field(model, "qk_nope_head_dim") or 0) + layer.qk_rope_head_dim, \
            _config_field(model, "v_head_dim") or 0
    return layer.kv_lora_rank + layer.qk_rope_head_dim, layer.kv_lora_rank


def _check_blocks_divide_heads(model: Model, type_k: str, type_v: str, mla_mode: str | None) -> None:
    """Flash attention on or auto: a quantised type's 32-value block must divide every head."""
    for field, name, side in (("type_k", type_k, 0), ("type_v", type_v, 1)):
        if name in ("f32", "f16", "bf16"):
            continue
        for layer in model.layers:
            head = _head_dims(model, layer, mla_mode)[side]
            if head and head % _QUANT_BLOCK:
                which = "K" if side == 0 else "V"
                raise ValueError(f"{field}={name}: llama_init_from_model: {which} cache type {name} with block "
                                 f"size {_QUANT_BLOCK} does not divide n_embd_head_{which.lower()}={head}")


# ---- cells ----------------------------------------------------------------------------------

def _cells(s: dict) -> tuple[int, int, int, bool, list[str]]:
    """(n_ctx, n_ctx_seq, n_stream, unified, notes) after llama.cpp's padding and split."""
    requested, n_seq, build, n_pad = s["n_ctx_requested"], s["n_seq"], s["build"], s["n_pad"]
    notes = []
    if build < PR_14363:
        if not s["kv_unified"] and n_seq > 1:
            notes.append("builds before PR #14363 (2025-07-16) keep one buffer shared by all sequences")
        n_ctx = _pad(requested, n_pad)
        return n_ctx, n_ctx, 1, True, notes
    if s["kv_unified"]:
        n_ctx = _pad(requested, n_pad)
        return n_ctx, n_ctx, 1, True, notes
    if build >= PR_17046:
        n_ctx = _pad(requested, 256)
        n_ctx_seq = _pad(n_ctx // n_seq, 256)  # never 0: n_seq <= LLAMA_MAX_SEQ = 256 <= n_ctx
    else:
        n_ctx = requested
        n_ctx_seq = _pad(-(-requested // n_seq), n_pad)
    if n_ctx_seq * n_seq != n_ctx:
        n_ctx = n_ctx_seq * n_seq
        if build >= PR_17046:
            notes.append(f"n_ctx is not divisible by n_seq_max - rounding down to {n_ctx}")
    return n_ctx, n_ctx_seq, n_seq, False, notes


def _swa_cells(s: dict, n_ctx_seq: int, n_swa: int, unified: bool) -> int:
    """Cells per stream of the sliding-window cache (llama_kv_cache_iswa constructor)."""
    if s["swa_full"]:
        return n_ctx_seq
    n_seq, n_ubatch, build = s["n_seq"], s["n_ubatch"], s["build"]
    if build >= PR_17046:
        return _pad(min(n_ctx_seq, n_swa * (n_seq if unified else 1) + n_ubatch), 256)
    if build >= PR_14363:
        return min(n_ctx_seq, _pad(n_swa * (n_seq if unified else 1) + n_ubatch, s["n_pad"]))
    return min(n_ctx_seq, _pad(n_swa * n_seq + n_ubatch, s["n_pad"]))


# ---- layers ---------------------------------------------------------------------------------

def _config_field(model: Model, name: str):
    cfg = model.config or {}
    for part in (cfg, cfg.get("text_config") or {}):
        if isinstance(part, dict) and part.get(name) is not None:
            return part[name]
    return None


def _mla_mode(model: Model, s: dict) -> str | None:
    if not model.count(MLA):
        if s["mla"] is not None:
            raise ValueError(f"mla applies to MLA models (DeepSeek-V2/V3, Kimi); {model.name} has no MLA layers")
        return None
    if any(layer.index_head_dim for layer in model.layers):
        raise ValueError(f"{model.name}: llama.cpp keeps DeepSeek-V3.2's indexer keys in a separate cache "
                         "(llama_kv_cache_dsa) that kvmem does not model")
    build, mode = s["build"], s["mla"]
    if mode is None:
        return "none" if build < PR_12801 else "latent+v" if build < PR_19067 else "latent"
    if mode not in MLA_MODES:
        raise ValueError(f"mla must be one of {', '.join(MLA_MODES)}, got {mode!r}")
    if mode != "none" and build < PR_12801:
        raise ValueError(f"mla={mode!r}: MLA GGUFs need a build from April 2025 on (PR #12801); build {build} "
                         "caches per-head K/V (mla='none')")
    if mode == "latent" and build < PR_19067:
        raise ValueError(f"mla='latent' (no V tensor) needs a build from 2026-01-24 on (PR #19067); "
                         f"build {build} keeps V = kv_lora_rank (mla='latent+v')")
    if mode == "latent+v" and build >= PR_19067:
        raise ValueError("mla='latent+v': builds from 2026-01-24 on (PR #19067) keep no V tensor for MLA GGUFs; "
                         "use mla='latent'")
    return mode


def _widths(model: Model, layer, mode: str | None) -> tuple[int, int | None]:
    """(n_embd_k_gqa, n_embd_v_gqa) of a layer's cache row; V None when there is no V tensor."""
    if layer.kind != MLA:
        return layer.kv_heads * layer.head_dim_k, layer.kv_heads * layer.head_dim_v
    if mode == "latent":
        return layer.kv_lora_rank + layer.qk_rope_head_dim, None
    if mode == "latent+v":
        return layer.kv_lora_rank + layer.qk_rope_head_dim, layer.kv_lora_rank
    nope, v_dim = _config_field(model, "qk_nope_head_dim"), _config_field(model, "v_head_dim")
    if not nope or not v_dim:
        raise ValueError(f"mla='none' needs qk_nope_head_dim and v_head_dim in {model.name}'s config")
    heads = model.num_attention_heads
    return heads * (nope + layer.qk_rope_head_dim), heads * v_dim


def _windowed_split(model: Model, s: dict, notes: list) -> int | None:
    """n_swa when llama.cpp builds a separate sliding-window cache for this model, else None."""
    windowed = [layer for layer in model.layers if layer.kind in (SLIDING, CHUNKED)]
    if not windowed:
        return None
    full = [layer for layer in model.layers if layer.kind in (FULL, MLA)]
    windows = sorted({layer.window for layer in windowed})
    if model.model_type in _WINDOW_IGNORED or (not full and model.model_type not in _ALWAYS_ISWA):
        notes.append(f"llama.cpp does not use the sliding window of {model.name}: every layer holds n_ctx cells")
        return None
    if s["build"] < PR_13194:
        notes.append("builds before PR #13194 (2025-05-20) have no SWA cache: windowed layers hold n_ctx cells")
        return None
    if len(windows) > 1 or len({layer.kind for layer in windowed}) > 1:
        raise ValueError(f"{model.name} has windows {windows}; llama.cpp has one n_swa per model")
    return windows[0]


# ---- the plan: caches, per-layer bytes, devices ----------------------------------------------

def _layer_devices(n_layer: int, pp: int) -> list[int]:
    """GPU of each layer under --split-mode layer, equal --tensor-split, all layers offloaded."""
    if pp > n_layer:
        raise ValueError(f"pp={pp} exceeds the model's {n_layer} layers")
    splits = [_f32(_f32(float(d + 1)) / _f32(float(pp))) for d in range(pp)]
    act = n_layer + 1  # act_gpu_layers = min(n_gpu_layers, n_layer + 1): the output layer counts
    return [min(sum(split <= _f32(il / act) for split in splits), pp - 1) for il in range(n_layer)]


def _plan(model: Model, s: dict, pp: int) -> dict:
    notes = []
    n_ctx, n_ctx_seq, n_stream, unified, cell_notes = _cells(s)
    notes += cell_notes
    mode = _mla_mode(model, s)
    if mode is not None and s["mla"] is None:
        notes.append(f"mla={mode!r}: the cache of an MLA GGUF on this build; GGUFs converted before "
                     "PR #12801 (April 2025) cache per-head K/V (mla='none')")
    n_swa = _windowed_split(model, s, notes)
    swa_cells = _swa_cells(s, n_ctx_seq, n_swa, unified) if n_swa is not None else None
    if n_swa is not None and s["swa_full"]:
        notes.append(_SWA_FULL_WARNING)
    k_type, v_type = _kvmem_dtype(s["type_k"]), _kvmem_dtype(s["type_v"])

    owners = [i for i, layer in enumerate(model.layers) if layer.caches_tokens]
    widths = {i: _widths(model, model.layers[i], mode) for i in owners}
    v_max = max((v for _, v in widths.values() if v is not None), default=0)
    if not s["flash_attn"] and len({v for _, v in widths.values() if v is not None}) > 1:
        notes.append("the V embeddings have different sizes across layers and FA is not enabled - "
                     f"padding V cache to {v_max}")
        widths = {i: (k, v_max if v is not None else None) for i, (k, v) in widths.items()}

    caches = []

    def add_cache(name, layer_ids, cells):
        k = sum(k_type.row_bytes(widths[i][0]) for i in layer_ids) * cells * n_stream
        v = sum(v_type.row_bytes(widths[i][1]) for i in layer_ids if widths[i][1] is not None) * cells * n_stream
        caches.append(dict(cache=name, cells=cells, streams=n_stream, cells_total=cells * n_stream,
                           layers=len(layer_ids), seqs=s["n_seq"], k_type=s["type_k"], v_type=s["type_v"],
                           k_bytes=k, v_bytes=v, size_mib=_printed(k + v), k_mib=_printed(k), v_mib=_printed(v)))

    windowed = {i for i in owners if n_swa is not None and model.layers[i].kind in (SLIDING, CHUNKED)}
    base_ids = [i for i in owners if i not in windowed]
    if owners:
        add_cache("kv", base_ids, n_ctx_seq)
    if windowed:
        add_cache("kv_swa", sorted(windowed), swa_cells)

    recurrent_ids = [i for i, layer in enumerate(model.layers) if layer.state is not None]
    rows_per_layer = {}
    if recurrent_ids:
        cells = max(1, s["n_seq"])
        rows = cells * (1 + (s["n_rs_seq"] or 0))
        f32 = dtype("fp32")
        for i in recurrent_ids:
            state = model.layers[i].state
            rows_per_layer[i] = (rows * f32.row_bytes(state.conv_channels * max(state.conv_kernel - 1, 0)),
                                 rows * f32.row_bytes(state.ssm_elements))
        r = sum(r for r, _ in rows_per_layer.values())
        s_bytes = sum(x for _, x in rows_per_layer.values())
        caches.append(dict(cache="recurrent", cells=cells, layers=model.num_layers + (model.mtp_layers if s["nextn"] else 0),
                           seqs=s["n_seq"], rs_seq=s["n_rs_seq"], r_type="f32", s_type="f32", r_bytes=r,
                           s_bytes=s_bytes, size_mib=_printed(r + s_bytes), r_mib=_printed(r), s_mib=_printed(s_bytes)))

    rows = []
    for i, layer in enumerate(model.layers):
        k = v = 0
        if i in widths:
            cells = swa_cells if i in windowed else n_ctx_seq
            k = k_type.row_bytes(widths[i][0]) * cells * n_stream
            v = v_type.row_bytes(widths[i][1]) * cells * n_stream if widths[i][1] is not None else 0
        rows.append((k, v, sum(rows_per_layer.get(i, (0, 0)))))

    devices = _layer_devices(model.num_layers, pp)
    return dict(n_ctx=n_ctx, n_ctx_seq=n_ctx_seq, n_stream=n_stream, unified=unified, mla=mode, n_swa=n_swa,
                swa_cells=swa_cells, caches=caches, rows=rows, devices=devices, notes=notes, windowed=windowed)


def _device_table(plan: dict, pp: int) -> list[dict]:
    table = []
    for d in range(pp):
        ids = [i for i, dev in enumerate(plan["devices"]) if dev == d]
        buffers = {}
        for i in ids:
            k, v, state = plan["rows"][i]
            name = "kv_swa" if i in plan["windowed"] else "kv"
            if k or v:
                buffers[name] = buffers.get(name, 0) + k + v
            if state:
                buffers["recurrent"] = buffers.get("recurrent", 0) + state
        table.append(dict(device=d, layers=ids, kv_bytes=sum(plan["rows"][i][0] + plan["rows"][i][1] for i in ids),
                          state_bytes=sum(plan["rows"][i][2] for i in ids), buffer_bytes=buffers,
                          buffer_mib={name: float(f"{b / 1048576.0:.2f}") for name, b in buffers.items()}))
    return table


def _run(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, options: dict):
    s = _settings(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, options=options)
    plan = _plan(model, s, pp)
    return s, plan, _device_table(plan, pp)


# ---- public ---------------------------------------------------------------------------------

def estimate(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, **options) -> Estimate:
    s, plan, devices = _run(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp, options=options)
    if plan["caches"] and plan["caches"][0]["cache"] == "kv":
        need, room = (tokens * batch, plan["n_ctx_seq"]) if plan["unified"] else (tokens, plan["n_ctx_seq"])
        if need > room:
            where = "the shared cache" if plan["unified"] else "each sequence's stream"
            raise ValueError(f"n_ctx: {batch} sequence(s) of {tokens} tokens need {need} cells in {where}, "
                             f"which holds {room} (n_ctx={plan['n_ctx']}, n_seq={s['n_seq']})")
    largest = max(devices, key=lambda d: d["kv_bytes"] + d["state_bytes"])
    held = set(largest["layers"])
    rows = plan["rows"]
    per_layer = tuple(sum(rows[i]) if i in held else 0 for i in range(len(rows)))
    k = sum(rows[i][0] for i in held)
    v = sum(rows[i][1] for i in held)
    details = dict(
        build="current" if s["build"] == CURRENT else s["build"].isoformat(),
        n_ctx=plan["n_ctx"], n_ctx_requested=s["n_ctx_requested"], n_ctx_seq=plan["n_ctx_seq"],
        cells=plan["n_ctx_seq"], cells_total=plan["n_ctx"], swa_cells=plan["swa_cells"], n_swa=plan["n_swa"],
        n_seq=s["n_seq"], n_stream=plan["n_stream"], kv_unified=plan["unified"], n_batch=s["n_batch"],
        n_ubatch=s["n_ubatch"], n_pad=s["n_pad"], flash_attn=s["flash_attn"], swa_full=s["swa_full"],
        type_k=s["type_k"], type_v=s["type_v"], mla=plan["mla"], n_rs_seq=s["n_rs_seq"],
        caches=plan["caches"], devices=devices)
    kv_dtype_name = s["type_k"] if s["type_k"] == s["type_v"] else f"{s['type_k']}/{s['type_v']}"
    result = Estimate(model=model.name, engine="llama.cpp", tokens=tokens, batch=batch, kv_dtype=kv_dtype_name,
                      tp=tp, pp=pp, k_bytes=k, v_bytes=v, state_bytes=sum(rows[i][2] for i in held),
                      per_layer=per_layer, kv_bytes_all_devices=sum(r[0] + r[1] for r in rows),
                      peak_bytes=k + v, notes=tuple(plan["notes"]), details=details)
    details["log"] = log_lines(result)  # the lines llama.cpp itself prints for these caches
    return result


def capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None,
             **options) -> Capacity:
    """The largest n_ctx (whole pads per stream) whose caches and state fit ``kv_memory`` on one device."""
    if options["n_ctx"] is not None:
        raise ValueError("capacity finds n_ctx itself; leave n_ctx unset")
    n_seq = _count("n_seq", options["n_seq"] if options["n_seq"] is not None else 1)
    probe = _settings(model, tokens=1, batch=1, kv_dtype=kv_dtype, tp=tp, options={**options, "n_seq": n_seq})
    unified = probe["kv_unified"] or probe["build"] < PR_14363
    step = probe["n_pad"] * (1 if unified else n_seq)

    def fits(units: int):
        s, plan, devices = _run(model, tokens=1, batch=1, kv_dtype=kv_dtype, tp=tp, pp=pp,
                                options={**options, "n_seq": n_seq, "n_ctx": units * step})
        return max(d["kv_bytes"] + d["state_bytes"] for d in devices) <= kv_memory, plan

    ok, plan = fits(1)
    if not ok:
        return Capacity(model=model.name, engine="llama.cpp", kv_memory=kv_memory, blocks=0, tokens=0,
                        max_concurrency=0.0 if max_model_len else None, max_model_len=0, block_size=1,
                        notes=(f"not even {step} cells fit in {kv_memory} bytes",))
    low, high = 1, 2
    while fits(high)[0]:
        low, high = high, high * 2
        if high > 1 << 40:
            raise ValueError(f"{model.name} holds no per-token cache under llama.cpp: any n_ctx fits")
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid)[0] else (low, mid)
    plan = fits(low)[1]
    cells, per_seq = plan["n_ctx"], plan["n_ctx_seq"]
    concurrency = None
    if max_model_len:
        if plan["unified"]:
            concurrency = min(float(n_seq), cells / max_model_len)
        else:
            concurrency = float(n_seq) if max_model_len <= per_seq else 0.0
    return Capacity(model=model.name, engine="llama.cpp", kv_memory=kv_memory, blocks=cells, tokens=cells,
                    max_concurrency=concurrency, max_model_len=per_seq, block_size=1,
                    notes=tuple(plan["notes"]),
                    details=dict(n_ctx=cells, n_ctx_seq=per_seq, n_seq=n_seq, kv_unified=plan["unified"],
                                 pad=step, swa_cells=plan["swa_cells"], caches=plan["caches"]))


def _style(build: str, style: str | None) -> str:
    if style is not None:
        if style not in LOG_STYLES:
            raise ValueError(f"style must be one of {', '.join(LOG_STYLES)}, got {style!r}")
        return style
    date = CURRENT if build == "current" else datetime.date.fromisoformat(build)
    chosen = "kv_self"
    for start, name in _STYLE_FROM:
        if date >= start:
            chosen = name
    return chosen


def log_lines(estimate: Estimate, style: str | None = None, prefix: str | None = None) -> list[str]:
    """The cache lines llama.cpp logs for this estimate (a llama.cpp Estimate), in its order.

    ``style`` pins a log format era (LOG_STYLES); by default it follows the estimate's build
    date. ``prefix`` sets the function name of a "kv_self" line.
    """
    d = estimate.details
    if estimate.engine != "llama.cpp" or "caches" not in d:
        raise ValueError(f"log_lines needs a llama.cpp estimate, got engine {estimate.engine!r}")
    style = _style(d["build"], style)
    kv = [c for c in d["caches"] if c["cache"] != "recurrent"]
    lines = []
    if style == "kv_self" and kv:
        if prefix is None:
            date = CURRENT if d["build"] == "current" else datetime.date.fromisoformat(d["build"])
            prefix = "llama_new_context_with_model"
            for start, name in _KV_SELF_PREFIX:
                prefix = name if date >= start else prefix
        k, v = sum(c["k_bytes"] for c in kv), sum(c["v_bytes"] for c in kv)
        lines.append(f"{prefix}: KV self size  = {_mib(k + v):7.2f} MiB, K ({kv[0]['k_type']}): {_mib(k):7.2f} MiB, "
                     f"V ({kv[0]['v_type']}): {_mib(v):7.2f} MiB")
    elif kv:
        name = "llama_kv_cache" if style == "current" else "llama_kv_cache_unified"
        iswa = len(kv) > 1
        for c in kv:
            if iswa:
                label = "non-SWA" if c["cache"] == "kv" else "    SWA"
                lines.append(f"{name}_iswa: creating {label} KV cache, size = {c['cells']} cells")
            seqs = {"unified": f"{c['seqs']:2d}", "unified_streams": f"{c['seqs']:2d}/{c['streams']:2d}"}.get(
                style, f"{c['seqs']:2d}/{c['streams']}")
            lines.append(f"{name}: size = {_mib(c['k_bytes'] + c['v_bytes']):7.2f} MiB ({c['cells']:6d} cells, "
                         f"{c['layers']:3d} layers, {seqs} seqs), K ({c['k_type']}): {_mib(c['k_bytes']):7.2f} MiB, "
                         f"V ({c['v_type']}): {_mib(c['v_bytes']):7.2f} MiB")
    for c in d["caches"]:
        if c["cache"] == "recurrent":
            rs = f" {c['rs_seq']:2d} rs_seq" if c["rs_seq"] is not None else ""
            lines.append(f"llama_memory_recurrent: size = {_mib(c['r_bytes'] + c['s_bytes']):7.2f} MiB "
                         f"({c['cells']:6d} cells, {c['layers']:3d} layers, {c['seqs']:2d} seqs{rs}), "
                         f"R ({c['r_type']}): {_mib(c['r_bytes']):7.2f} MiB, S ({c['s_type']}): {_mib(c['s_bytes']):7.2f} MiB")
    return lines


SPECS = (EngineSpec("llama.cpp", DEFAULTS, estimate, capacity, __doc__),)
