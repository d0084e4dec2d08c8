"""llama.cpp's options as its CLI sets them, the builds that changed a rule, and every option resolved."""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass

from ...datafiles import read_json
from ...dtypes import dtype
from ...layer import MLA
from ...model import Model
from ...units import MAX_COUNT, parse_tokens, require_positive_int
from .rs_seq import kept_rs_seq

# Engine defaults, each as llama.cpp's CLI (common/common.h, common/arg.cpp) sets it.
DEFAULTS = {
    "n_ctx": None,        # -c; None: tokens x n_seq (= tokens x batch when n_seq is unset)
    "n_seq": None,        # -np; None: batch
    "n_batch": 2048,      # -b, common_params.n_batch
    "n_ubatch": 512,      # -ub, common_params.n_ubatch
    "type_k": None,       # -ctk; None: kv_dtype; "auto": f16 (common_params.cache_type_k)
    "type_v": None,       # -ctv; likewise (common_params.cache_type_v)
    "flash_attn": None,   # -fa; None: "auto" from 2025-08-30, off before
    # --swa-full (the SWA cache at n_ctx_seq cells: still two caches, two lines); the CLI's default false
    # (llama.cpp@0c1e57098 common/common.h#L574), llama_context_default_params()'s true (src/llama-context.cpp#L3788)
    "swa_full": False,
    "kv_unified": False,  # -kvu; common_params.kv_unified = false (llama-server -np auto: true)
    "mla": None,          # None: the build's mode for an MLA GGUF
    "build": None,        # None: current; else the build's date "YYYY-MM-DD"
    "n_rs_seq": None,     # recurrent rollback snapshots (2026 builds); None: builds without them
    "nextn": False,       # MTP/NextN layers loaded (n_layer_all): counted in the recurrent line
}

CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")  # common/arg.cpp
MLA_MODES = ("latent", "latent+v", "none")
LLAMA_MAX_SEQ = 256  # llama.cpp@0c1e57098 src/llama-cparams.h#L8
# -c is read by std::stoi into an int (llama.cpp@0c1e57098 common/arg.cpp#L853-L857, #L1639-L1642): a larger
# value stops the tool with "error while handling argument" (#L871-L875); the C API's n_ctx is a uint32_t (llama.h#L366)
MAX_N_CTX = 2**31 - 1
# ggml_blck_size of q8_0, q5_0, q5_1, q4_0, q4_1, iq4_nl: 32 values a block of q8_0 34 B, q5_1 24, q5_0 22, q4_1 20,
# q4_0 and iq4_nl 18 (f32 4 B, f16/bf16 2 B a value): llama.cpp@0c1e57098 ggml/src/ggml-common.h#L194-L256, #L447-L452
_QUANT_BLOCK = 32

_D = datetime.date


# PR number -> (its first build or None, the date of its squash merge on master, the merge commit, its subject):
# kvmem/data/llamacpp_prs.json, which tools/llamacpp_builds.py reads from master's history; every llama.cpp rule's
# PR date is one (PR_DATES)
PR_ROWS = {int(n): tuple(row) for n, row in read_json("llamacpp_prs.json")["prs"].items()}
PR_DATES = {n: _D.fromisoformat(row[1]) for n, row in PR_ROWS.items()}
# The llama.cpp pull requests kvmem's rules switch on, each dated by its squash merge on master (a build of the merge
# day is taken to have it; builds.build_date dates a log's build number by the first build holding each):
# - #5021 flash attention; #6177 n_ctx padded to 32, #5021 to 256, #7257 256 with flash attention only (_n_pad);
# - #11110 / #12181 / #12799: the KV self line's prefix llama_init_from_model / llama_context / llama_kv_cache_unified,
#   #13194 / #13660 / #14363 / #15040 / #15467 its "size = " line's forms (log_lines._STYLE_FROM);
# - #12801 / #19067 the MLA cache modes; #14363 per-sequence streams; #14959 ggml_set_rows by default (layouts);
# - #15434 flash attention "auto" by default (FA_AUTO); #16812 / #17046 the padding removed, then 256;
# - #18148 the output layer offloaded first (placement); #18898 build_inp_embd's unused input (layouts, compute);
# - #16884 build_attn's Q, V, K order, #21038 a quantised cache's Hadamard rotations, #23764 the f16 KQ mask (graphs);
#   #23861 n_outputs_max, #23907
#   the quantised-KV flash-attention alloc (scheduled);
# - the DSA ones below.
(PR_5021, PR_6177, PR_7257, PR_11110, PR_12181, PR_12799, PR_12801, PR_13194, PR_13660, PR_14363, PR_14959,
 PR_15040, PR_15434, PR_15467, PR_16812, PR_16884, PR_17046, PR_18148, PR_18550, PR_19067, PR_21038, PR_23764,
 PR_23861, PR_23907) = (PR_DATES[n] for n in (5021, 6177, 7257, 11110, 12181, 12799, 12801, 13194, 13660, 14363,
                                               14959, 15040, 15434, 15467, 16812, 16884, 17046, 18148, 18550, 19067,
                                               21038, 23764, 23861, 23907))
# ggml-org/llama.cpp PR #18898 (557515be1, 2026-01-23) "graph : utilize ggml_build_forward_select()": from it
# build_inp_embd makes the inp_embd input whatever the batch holds
# (llama.cpp@3f545becc src/llama-graph.cpp#L2321-L2323), before it only for a batch of embeddings (PR #18550,
# 2026-01-19, added ggml_build_forward_select to ggml alone: no src/ file)
PR_18898 = PR_DATES[18898]
# PR #18047 (e1f15b454, 2025-12-21): Vulkan devices report async compute and events (pipeline); PR #14158 (a0535ffa0,
# 2025-06-29) ggml_swiglu, #14568 (12f55c302, 2025-07-07) and #15662 (cf0e3ba15, 2025-09-08) phi3's views of its fused
# QKV product (graphs_gemma_phi3)
PR_14158, PR_14568, PR_15662, PR_18047 = (PR_DATES[n] for n in (14158, 14568, 15662, 18047))
FA_AUTO = PR_15434      # "llama: use FA + max. GPU layers by default": -fa's default "auto"
CURRENT = datetime.date.max
# DeepSeek sparse attention (glm-dsa, deepseek32) by build date (b<N>: the first build holding the PR):
# - PR #19460 752584d5f 2026-02-13 b8036: LLM_ARCH_GLM_DSA, deepseek2's graph over a plain MLA llama_kv_cache, the
#   indexer tensors loaded and unused (required in every trunk layer) and the MTP block without a cache
#   (n_layer_kv_from_start = n_layer - nextn_predict_layers);
# - PR #23346 1f0aa2a69 2026-05-29 b9411: LLM_ARCH_DEEPSEEK32 over llama_kv_cache_dsa (the latent + an indexer key
#   cache in every layer), its lightning indexer of generic ggml ops;
# - PR #24060 7acb4e8cd 2026-06-05 b9523 "hparams : refactor hparams.n_layer": glm-dsa and deepseek32 no longer set
#   n_layer_kv_from_start and llama_kv_cache loops over n_layer_all (src/llama-kv-cache.cpp#L100 at 00f5442cc), so
#   a GGUF's MTP block gets a cache layer (and an indexer one) until PR #25980 / #26457 below;
# - PR #24770 796f41bed 2026-06-20 b9736: glm-dsa's indexer tensors optional (GLM-5.2's "shared" layers load);
# - PR #24231 00f5442cc 2026-07-11 b9970: GGML_OP_LIGHTNING_INDEXER, used where the layer's backend runs it
#   (cparams.auto_flid resolves fused_lid, src/llama-context.cpp#L540-L546 at 00f5442cc): the CPU;
# - PR #25545 3b5321936 2026-07-15 b10032: its CUDA kernel (before it a CUDA build disables fused_lid: generic ops);
# - PR #25407 88bfee142 2026-07-24 b10119: glm-dsa's own graph (its indexer) over llama_kv_cache_dsa;
# - PR #25980 7be2c65dc 2026-07-29 b10174: glm-dsa's DSA cache filtered to the trunk (il < n_layer());
# - PR #26457 2b63e0610 2026-08-03 b10237: deepseek32's likewise; PR #26474 563dec81c 2026-08-03 b10243: glm-dsa's
#   indexer cache in its "full" layers only;
# - PR #27176 3cb7ffb1a 2026-08-16 b10453 "model : remove some ggml_concat": before it both graphs rope the indexer's
#   first n_rot values as views and concatenate them back (ggml_concat); after it they rope it whole, as at 0c1e57098.
# Build 10505 (ee4c505a4, 2026-08-19) has them all: its published GLM-5.2 runs print llama_kv_cache_dsa with a
# 21-layer indexer cache (docs/research/llamacpp_offload_logs.json); the vendored 0c1e57098 is b11312 of 2026-10-01.
PR_19460, PR_23346, PR_24060, PR_24770, PR_24231, PR_25545, PR_25407, PR_25980, PR_26457, PR_26474, PR_27176 = (
    PR_DATES[n] for n in (19460, 23346, 24060, 24770, 24231, 25545, 25407, 25980, 26457, 26474, 27176))
# ggml_backend_sched with pipeline parallelism (n_copies > 1) makes the n_copies copies of a graph input when a node
# reads it (pass 5, ggml/src/ggml-backend.cpp#L1330-L1350 at 76f46ad29 of 2026-07-20), so the unused inp_embd input
# (PR #18898) is allocated once; the vendored build copies every input leaf (pass 6 "collect all input tensors",
# llama.cpp@0c1e57098 ggml/src/ggml-backend.cpp#L1407-L1444). Master has the old rule up to 3f545becc (2026-08-22);
# the commit that changed it, after that and by 0c1e57098, is not pinned here
SCHED_USED_INPUT_COPIES_TO = _D(2026, 8, 22)
# PR #22673 255582687 2026-05-16 "llama + spec: MTP Support": convert_hf_to_gguf writes Qwen3.5/3.6's MTP block
# (_Qwen35MtpMixin, conversion/qwen.py#L538-L582 at 255582687: block_count + mtp_num_hidden_layers and
# nextn_predict_layers) and qwen35/qwen35moe load it as a NextN block; before it the converter skipped every mtp.*
# tensor (Qwen3NextModel.modify_tensors, convert_hf_to_gguf.py#L4781-L4782 at e365e658f of 2026-04-19), so a build
# before it loads only trunk-only Qwen3.5 files (arch_tensors.gguf_nextn_layers)
PR_22673 = PR_DATES[22673]
# PR #27382 873e5d8e3 2026-08-21 b10568 "model: use ggml_rope_set_offset()": deepseek2's Q roped whole (graphs_mla_oss)
PR_27382, PR_27018 = PR_DATES[27382], PR_DATES[27018]     # 27018: minimax-01 added (arch_builds.ADDED)
# the PRs that added the architectures kvmem lays out (arch_builds.ADDED has their commits and lines)
(PR_7519, PR_11049, PR_12791, PR_12867, PR_14654, PR_14939, PR_15091, PR_16095, PR_16831, PR_19468, PR_21309) = (
    PR_DATES[n] for n in (7519, 11049, 12791, 12867, 14654, 14939, 15091, 16095, 16831, 19468, 21309))
PR_7531, PR_15507, PR_18058, PR_26725 = (PR_DATES[n] for n in (7531, 15507, 18058, 26725))  # jamba, nemotron_h(_moe)
PR_2717, PR_4555, PR_7461 = (PR_DATES[n] for n in (2717, 4555, 7461))    # falcon, gpt2, gptneox (graphs_classic)
PR_14400, PR_18755, PR_26185 = (PR_DATES[n] for n in (14400, 18755, 26185))  # gemma3n, kimi-linear, kimi-k3 (ADDED)


def glm_dsa_indexer_ignored(model_type: str | None, build) -> bool:
    """Whether llama.cpp ``build`` runs a glm-dsa GGUF (model_type glm_moe_dsa) without its lightning indexer:
    PR #19460 (2026-02-13) until PR #25407 (2026-07-24) load the indexer weights and leave them unused,
    deepseek2's graph over a plain MLA llama_kv_cache (plan._dsa_build has the sources)."""
    return model_type == "glm_moe_dsa" and PR_19460 <= build < PR_25407


# Models with both windowed and full layers get a second cache for the windowed ones (chunked attention, Llama 4,
# counts as windowed; llama.cpp@0c1e57098 src/llama-model.cpp#L2806-L2857 create_memory, the iSWA caches).
# Models whose every attention layer is windowed (Mistral-7B-v0.1, Phi-3: its SWA disabled, PR #13676) and the
# Qwen2/3 families get one full-size cache: llama.cpp does not read their window.
# Families whose sliding window llama.cpp does not read: one full-size cache. Qwen2-VL / Qwen2.5-VL
# (src/models/qwen2vl.cpp), dots1 (dots1.cpp) and SmolLM3 (smollm3.cpp) read no sliding_window key.
WINDOW_IGNORED = {"llama", "mistral", "mixtral", "phi3", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                  "qwen2_vl_text", "qwen2_5_vl_text", "dots1", "smollm3"}
# Architectures llama.cpp always gives the two-cache iSWA memory (hparams.swa_type set in
# llama_model::load_hparams), even when every layer is windowed: fewer layers than the pattern. Then the non-SWA
# cache is empty, "0 layers", 0.00 MiB, beside a window-sized SWA cache (llama.cpp@0c1e57098
# src/models/gemma2.cpp#L3-L6, src/models/gemma3.cpp#L3-L7 swa_type; llama4: src/models/llama4.cpp#L13, chunked).
ALWAYS_ISWA = {"gemma2", "gemma3", "gemma3_text", "llama4", "llama4_text"}
# MLA in transformers, per-head K/V in llama.cpp: conversion/minicpm.py MiniCPM3Model writes head_count_kv =
# num_key_value_heads, key_length = qk_nope + qk_rope and no value_length (n_embd_head_v = n_embd / n_head)
# nor the MLA lengths, so hparams.is_mla() is false and src/models/minicpm3.cpp caches the decompressed heads
PER_HEAD_MLA = {"minicpm3"}
SWA_FULL_WARNING = ("using full-size SWA cache (ref: "
                     "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)")


def as_f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def mib(nbytes: int) -> float:
    """(float)bytes / (1024.0f * 1024.0f), as llama.cpp computes it before printing."""
    return as_f32(float(nbytes)) / 1048576.0


def printed_mib(nbytes: int) -> float:
    """The MiB number the log prints ("%.2f" of the float32 value)."""
    return float(f"{mib(nbytes):.2f}")


# ---- inputs ---------------------------------------------------------------------------------

def build_date(value) -> datetime.date:
    """The build option (a date, "current" / "latest", or None) as the day of the llama.cpp build."""
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
        from ...sources.bounded import quote
        raise ValueError(f"{field} must be a llama.cpp cache type ({', '.join(CACHE_TYPES)}), got {quote(value)}")
    return name


def kvmem_dtype(ggml_name: str):
    return dtype({"f32": "fp32", "f16": "fp16"}.get(ggml_name, ggml_name))


def _flash_attn(value, build: datetime.date) -> bool:
    """The flash-attention setting the cache is built with: "auto" is on while the cache is created
    (llama.cpp@0c1e57098 src/llama-context.cpp#L230-L231 cparams.flash_attn = type != DISABLED). A quantised V
    cache needs it: builds before the tri-state -fa (2025-08-30) refuse with "V cache quantization requires
    flash_attn"; later ones with "quantized V cache requires flash_attn to be enabled" for -fa off
    (src/llama-context.cpp#L3840-L3849)."""
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


def count_option(field: str, value, *, allow_zero: bool = False) -> int:
    if allow_zero and value == 0 and not isinstance(value, bool):
        return 0
    return require_positive_int(field, value, MAX_COUNT)


# n_pad: 1 before 2024-03-22 (PR #4280 of 2023-12-03 padded the graph's KV view kv_self.n to 32, not the cache);
# 32 from PR #6177 (95d576b48 llama.cpp#L13047 "cparams.n_ctx = GGML_PAD(cparams.n_ctx, 32)"); 256 from PR #5021,
# 2024-04-30 (9c67c2773 llama.cpp "GGML_PAD(cparams.n_ctx, 256)"); 256 with flash attention, 32 without, from
# 2024-05-13 (PR #7257, 614d3b914 llama_kv_cache_get_padding); 1 from 2025-10-28 (PR #16812, "remove KV cache size
# padding"); 256 always from 2025-11-07 (PR #17046: llama.cpp@0c1e57098 src/llama-context.cpp#L290-L296, the
# llama_context ctor)
def _n_pad(build: datetime.date, flash_attn: bool) -> int:
    if build >= PR_17046:
        return 256
    if build >= PR_16812:
        return 1
    if build >= PR_7257:
        return 256 if flash_attn else 32
    if build >= PR_5021:
        return 256
    return 32 if build >= PR_6177 else 1


@dataclass(frozen=True)
class Settings:
    """Every option resolved and checked, as llama.cpp holds them before it builds the cache."""

    build: datetime.date
    type_k: str
    type_v: str
    flash_attn: bool
    n_seq: int
    n_ctx_requested: int
    n_batch: int
    n_ubatch: int
    n_rs_seq: int | None
    swa_full: bool
    kv_unified: bool
    nextn: bool
    mla: str | None
    n_pad: int


def resolve_settings(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, options: dict) -> Settings:
    """Every option resolved and checked, as llama.cpp would before building the cache."""
    if tp > 1:
        # llama.cpp splits layers, not heads: --split-mode row keeps the KV cache on the main GPU
        # (llama.cpp@0c1e57098 common/arg.cpp#L2858-L2863, -mg's help)
        raise ValueError(f"tp={tp}: llama.cpp does not split the KV cache by heads across tensor-parallel "
                         "ranks (--split-mode row keeps the whole KV cache on the main GPU); use pp for "
                         "--split-mode layer")
    build = build_date(options["build"])
    type_k = _cache_type("type_k", options["type_k"] if options["type_k"] is not None else kv_dtype)
    type_v = _cache_type("type_v", options["type_v"] if options["type_v"] is not None else kv_dtype)
    flash_attn = _flash_attn(options["flash_attn"], build)
    mla_default = None if not model.count(MLA) or model.model_type in PER_HEAD_MLA else (
        "none" if build < PR_12801 else "latent+v" if build < PR_19067 else "latent")
    if (options["mla"] or mla_default) == "latent" and type_k != type_v:
        # llama_init_from_model, before every other cache-type check: hparams.is_mla() (a GGUF with the
        # MLA split cache) refuses different K and V types (llama.cpp@0c1e57098 src/llama-context.cpp#L3835-L3838).
        # The build that added it is not pinned: kvmem applies it with mla="latent" (builds from 2026-01-25);
        # GGUFs without the split (mla="none") take mixed types.
        raise ValueError(f"type_k={type_k}, type_v={type_v}: llama_init_from_model: model does not support "
                         f"different K ({type_k}) and V ({type_v}) cache types")
    if type_v not in ("f32", "f16", "bf16") and not flash_attn:
        if build < FA_AUTO:
            raise ValueError(f"type_v={type_v}: V cache quantization requires flash_attn")
        raise ValueError(f"type_v={type_v}: llama_init_from_model: quantized V cache requires flash_attn to be enabled")
    if flash_attn:
        _check_blocks_divide_heads(model, type_k, type_v, options["mla"] or mla_default)
    n_seq = count_option("n_seq", options["n_seq"] if options["n_seq"] is not None else batch)
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
    if n_ctx > MAX_N_CTX:
        raise ValueError(f"n_ctx={n_ctx:,} cells (-c, context x sequences): llama.cpp reads -c as an int (std::stoi), "
                         f"at most {MAX_N_CTX:,}; a larger value stops it with \"error while handling argument\"")
    n_batch = min(n_ctx, count_option("n_batch", options["n_batch"]))
    n_ubatch = min(n_batch, count_option("n_ubatch", options["n_ubatch"]))
    n_rs_seq = options["n_rs_seq"]
    if n_rs_seq is not None:
        # -ub and -b as set: a context shorter than n_rs_seq + 2 (a search's probe) is laid out, with plan's note
        set_ub = min(count_option("n_batch", options["n_batch"]), count_option("n_ubatch", options["n_ubatch"]))
        n_rs_seq = kept_rs_seq(model, count_option("n_rs_seq", n_rs_seq, allow_zero=True), set_ub)
    for name in ("swa_full", "kv_unified", "nextn"):
        if not isinstance(options[name], bool):
            raise ValueError(f"{name} must be True or False, got {options[name]!r}")
    if options["nextn"] and not model.mtp_layers:
        raise ValueError(f"nextn=True but {model.name} has no MTP/NextN layers")
    return Settings(build=build, type_k=type_k, type_v=type_v, flash_attn=flash_attn, n_seq=n_seq,
                    n_ctx_requested=n_ctx, n_batch=n_batch, n_ubatch=n_ubatch, n_rs_seq=n_rs_seq,
                    swa_full=options["swa_full"], kv_unified=options["kv_unified"], nextn=options["nextn"],
                    mla=options["mla"], n_pad=_n_pad(build, flash_attn))


def _head_dims(model: Model, layer, mla_mode: str | None) -> tuple[int, int]:
    """(n_embd_head_k, n_embd_head_v) of a layer as llama.cpp's hparams hold them."""
    if layer.kind != MLA:
        return layer.head_dim_k, layer.head_dim_v
    if model.model_type in PER_HEAD_MLA:
        return model.facts.qk_nope_head_dim + layer.qk_rope_head_dim, model.hidden_size // model.num_attention_heads
    if mla_mode == "none":
        return model.facts.qk_nope_head_dim + layer.qk_rope_head_dim, model.facts.v_head_dim
    return layer.kv_lora_rank + layer.qk_rope_head_dim, layer.kv_lora_rank


def _check_blocks_divide_heads(model: Model, type_k: str, type_v: str, mla_mode: str | None) -> None:
    """Flash attention on or auto: a quantised type's 32-value block must divide n_embd_head_k (n_embd_head_v)
    of every layer, not only the whole row ("K cache type q8_0 with block size 32 does not divide
    n_embd_head_k=80"), checked after the quantised-V rule (llama.cpp@0c1e57098 src/llama-context.cpp#L3851-L3870);
    with flash attention off only the row counts."""
    for field, name, side in (("type_k", type_k, 0), ("type_v", type_v, 1)):
        if name in ("f32", "f16", "bf16"):
            continue
        for layer in model.layers:
            head = _head_dims(model, layer, mla_mode)[side]
            if head and head % _QUANT_BLOCK:
                which = "K" if side == 0 else "V"
                raise ValueError(f"{field}={name}: llama_init_from_model: {which} cache type {name} with block "
                                 f"size {_QUANT_BLOCK} does not divide n_embd_head_{which.lower()}={head}")
