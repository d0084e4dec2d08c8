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
    MLA GGUF. DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): llama_kv_cache_dsa, the latent cache
    and a second cache of one indexer_head_size key per indexer layer, same cells, streams and type_k
    (src/llama-kv-cache-dsa.cpp), at the vendored build only.
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
Family rules (which layers slide, recurrent rows, per-head MiniCPM3, DeciLM's 0-wide layers): .families.
Not modelled: the one-day f16 SWA cache of PR #21277 (2026-04-01, reverted by #21332), the
    DeepSeek-V4 cache (llama_kv_cache_dsv4), --n-gpu-layers partial offload, backend buffer alignment.
MiniMax-M3 (llama_kv_cache_msa): K and V in every layer, and an indexer cache of one sparse_index_dim K
    head and one value_length V head on the layers after the leading dense ones (indexers.msa_indexer).

Modules: settings (defaults, builds, options resolved), plan (cells, streams, the SWA cache,
per-layer rows, devices), entry (estimate, capacity, the start-up numbers), logs (the lines each
build prints), budget (what kvmem.sizing asks: weights + KV + compute buffer). Offload: tensors and
placement (the GGUF's tensors on their devices), compute, graphs and ggml_graph (the compute
buffers), layouts (one set of flags: memory per device, decode bound), fitting (--fit on), offload
(the search, the commands, kvmem.llamacpp_offload), panel (what the app and the CLI pass to it).
"""

from ..base import CheckedFamilies, EngineSpec, Option, PastPositions
from .budget import SIZING, llamacpp_compute_bytes, prefix_sharing
from .entry import capacity, estimate
from .launch import LAUNCHER
from .logs import READER
from .log_lines import LOG_STYLES, log_lines
from .settings import CACHE_TYPES, DEFAULTS, LLAMA_MAX_SEQ, MLA_MODES

__all__ = ["estimate", "capacity", "log_lines", "LOG_STYLES", "CACHE_TYPES", "MLA_MODES", "SPECS",
           "llamacpp_compute_bytes", "DEFAULTS", "LLAMA_MAX_SEQ"]

# src/llama-context.cpp: "n_ctx_seq (N) > n_ctx_train (M) -- possible training context overflow";
# tools/server caps each slot at n_ctx_train ("exceeds the training context ... - capping")
POSITIONS = PastPositions("llama.cpp warns \"possible training context overflow\" and runs; llama-server caps "
                          "each slot at the training context")
# Options with a fixed set of values (common/arg.cpp)
DECLARED = (Option("type_k", choices=CACHE_TYPES, help="-ctk: the K cache type (common/arg.cpp kv_cache_types)"),
            Option("type_v", choices=CACHE_TYPES, help="-ctv: the V cache type (common/arg.cpp kv_cache_types)"),
            Option("flash_attn", choices=("on", "off", "auto"), help="-fa on|off|auto"),
            Option("mla", choices=MLA_MODES, help="what an MLA model caches: latent, latent+v or full K/V"))
# Families kvmem reads that llama.cpp 0c1e57098 does not run. Its converter takes a checkpoint by
# config.json "architectures"[0]: conversion/__init__.py TEXT_MODEL_MAP (L19-L289) lists every HF
# architecture it converts, and get_model_class (L391-L399) raises "Architecture ... not supported!"
# for any other; without a GGUF, llama.cpp has nothing to load.
_NOT_CONVERTED = ("its converter convert_hf_to_gguf.py has no {arch} (conversion/__init__.py TEXT_MODEL_MAP; "
                  "get_model_class raises \"Architecture ... not supported!\"), so there is no GGUF to load")
# BERT-style encoders run as decoders: the converter has no causal-LM head for them; the four it takes
# (BertModel, CamembertModel, RobertaModel, XLMRobertaModel: conversion/bert.py) become LLM_ARCH_BERT,
# an embedding model for which llama_model::create_memory makes no KV cache (src/llama-model.cpp
# L2358-L2373: res = nullptr)
_ENCODER = ("its converter convert_hf_to_gguf.py has no decoder (is_decoder) head for {arch}; "
            "{encoder}llama.cpp keeps no KV cache for an encoder (src/llama-model.cpp create_memory: nullptr "
            "for LLM_ARCH_BERT)")
REFUSALS = {
    **{t: _ENCODER.format(arch=arch, encoder=(f"it converts {enc} as LLM_ARCH_BERT, an encoder, and " if enc
                                              else ""))
       for t, arch, enc in (
           ("bert", "BertLMHeadModel", "BertModel"), ("camembert", "CamembertForCausalLM", "CamembertModel"),
           ("roberta", "RobertaForCausalLM", "RobertaModel"),
           ("xlm-roberta", "XLMRobertaForCausalLM", "XLMRobertaModel"),
           ("bert-generation", "BertGenerationDecoder", ""), ("big_bird", "BigBirdForCausalLM", ""),
           ("data2vec-text", "Data2VecTextForCausalLM", ""), ("electra", "ElectraForCausalLM", ""),
           ("ernie", "ErnieForCausalLM", ""), ("megatron-bert", "MegatronBertForCausalLM", ""),
           ("rembert", "RemBertForCausalLM", ""), ("roberta-prelayernorm", "RobertaPreLayerNormForCausalLM", ""),
           ("roc_bert", "RoCBertForCausalLM", ""), ("roformer", "RoFormerForCausalLM", ""),
           ("xlm-roberta-xl", "XLMRobertaXLForCausalLM", ""), ("xmod", "XmodForCausalLM", ""))},
    # ModernBERT: ModernBertModel is converted as LLM_ARCH_MODERN_BERT, an encoder (create_memory: nullptr)
    "modernbert-decoder": _NOT_CONVERTED.format(arch="ModernBertDecoderForCausalLM (ModernBertModel is converted "
                                                     "as LLM_ARCH_MODERN_BERT, an encoder without a KV cache)"),
    **{t: _NOT_CONVERTED.format(arch=arch) for t, arch in (
        ("xglm", "XGLMForCausalLM"), ("gpt_neo", "GPTNeoForCausalLM"), ("lfm3", "Lfm3ForCausalLM"),
        ("olmo_hybrid", "OlmoHybridForCausalLM"), ("lara_mini", "LaraMiniForCausalLM"),
        ("axk1", "AXK1ForCausalLM"), ("axk2", "AXK2ForCausalLM"),
        ("sarvam_mla", "SarvamMLAForCausalLM (Sarvam-105B; only SarvamMoEForCausalLM is converted)"),
        ("hy_v4_vl_text", "HYV4VLForConditionalGeneration (only HYV4ForCausalLM is converted)"),
        ("ernie4_5_vl_moe_text", "Ernie4_5_VLMoeForConditionalGeneration"),
        ("kosmos_2_5_text_model", "Kosmos2_5ForConditionalGeneration"),
        ("inkling_text", "InklingForCausalLM"), ("inkling2_text", "Inkling2ForConditionalGeneration"),
        ("inkling2_loop_text", "Inkling2LoopForConditionalGeneration"), ("zaya", "ZayaForCausalLM"),
        ("mistral_large4_text", "MistralLarge4ForConditionalGeneration"),
        ("bailing_hybrid", "BailingHybridForCausalLM"), ("longcat_flash", "LongcatFlashForCausalLM"),
        ("mimo", "MiMoForCausalLM (MiMo-7B; only MiMoV2ForCausalLM and MiMoV2FlashForCausalLM are converted)"))},
}
# The opt-in families (kvmem.configs.families) it sizes, each checked against the vendored source: its
# converter (conversion/*.py) and src/models/<arch>.cpp, with the family rules of .families and .plan
# (docs/research/families_llamacpp.md has one row per family; tests/engines/test_llamacpp_families.py).
# Gemma 4: per-layer head_count_kv and key_length (from its GGUF) reproduce published logs
# (tests/engines/test_llamacpp.py); Gemma-4-Unified converts to the same gemma4 architecture
# (conversion/gemma.py Gemma4UnifiedModel).
FAMILIES = CheckedFamilies(frozenset({
    "afmoe", "bamba", "cohere2_moe", "dbrx", "dots1", "exaone4", "exaone_moe", "falcon_h1", "falcon_mamba",
    "gemma4_text", "gemma4_unified_text", "glm_moe_dsa", "gpt_bigcode", "granitemoehybrid", "hy_v4", "kimi_linear",
    "laguna",
    "lfm2", "lfm2_moe", "mamba", "mamba2", "mimo_v2_flash", "minicpm3", "minimax", "minimax_m3_vl_text", "mistral4",
    "mpt", "exaone4_5_text", "minimax_m3", "minimax_m3_text", "step3p5",
    "nemotron-nas", "qwen2_5_vl_text", "qwen2_vl_text", "smollm3", "youtu", "deepseek_v4", "deepseek_ref"}))
SPECS = (EngineSpec("llama.cpp", DEFAULTS, estimate, capacity, SIZING, prefix_sharing, POSITIONS,
                    pinned="llama.cpp 0c1e57098 (llama-cpp-python 0.3.36)", declared=DECLARED,
                    panels=("offload",), families=FAMILIES, refusals=REFUSALS, launch=LAUNCHER, log_reader=READER),)
