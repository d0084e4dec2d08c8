"""llama.cpp: the KV cache a llama.cpp context allocates, cell by cell, and the lines it logs.

kvmem follows the build llama-cpp-python 0.3.36 vendors (0c1e57098, ``build="current"``) and older
builds by date (``build``: what changed when, with its PR, is in docs/research/engines_llamacpp_hf_rules.md).
Each rule sits beside the code it governs with its pin, read in the vendored source (the cache's size
line: llama.cpp@0c1e57098 src/llama-kv-cache.cpp#L301-L303):

  settings   defaults, builds, options resolved and checked: n_pad by build, cache types and their
             ggml blocks, MLA's one cache type, a quantised V needs flash attention, blocks per head
  plan       cells and streams (-c, -np, -kvu), the SWA cache's cells, MLA modes, per-layer rows
             (V transposed and padded without flash attention), indexer caches, recurrent rows,
             layers on devices (--split-mode layer; tp is refused: llama.cpp splits layers)
  families   which layers slide, recurrent rows, per-head MiniCPM3, DeciLM's 0-wide layers
  indexers   DeepSeek sparse attention's and MiniMax-M3's indexer caches
  entry      estimate, capacity (the most cells that fit the fullest device), the start-up numbers
  log_lines  the lines each build prints, by era; logs: a startup log read back (READER)
  budget     what kvmem.sizing asks: weights + KV + compute buffer
  offload    tensors and placement (the GGUF's tensors on their devices), compute, graphs and
             ggml_graph (compute buffers), layouts, fitting (--fit on), best, verdict, panel
  launch     the llama-server command (LAUNCHER)
Not modelled: the one-day f16 SWA cache of PR #21277 (2026-04-01, reverted by #21332), --n-gpu-layers
partial offload in the cache lines, backend buffer alignment.
"""

from ..base import CheckedFamilies, EngineSpec
from ..declared import Option
from ..positions import PastPositions
from .budget import SIZING, llamacpp_compute_bytes, prefix_sharing
from .ctx_train import trained_context
from .entry import capacity, estimate
from .launch import LAUNCHER
from .log_lines import LOG_STYLES, log_lines
from .logs import READER
from .settings import CACHE_TYPES, DEFAULTS, LLAMA_MAX_SEQ, MLA_MODES

# the master commits whose files rules for older builds are read at (llama.cpp@<commit> <path>#L<a>-L<b>), each
# named by its build and date (kvmem/data/llamacpp_builds.json); the vendored build is SPECS' pinned 0c1e57098
READ_AT = {
    "33eff4024": "b5331, 2025-05-09: deepseek2's MLA cache with V (graphs_mla_oss)",
    "70d860824": "2026-01-25, the parent of PR #19067's merge d9c6ce46f (b7832): the last MLA cache with V, its "
                 "transposed V without flash attention (graphs_mla_attn)",
    "b81c2cdd7": "2026-05-16, the parent of PR #22673's merge 255582687: qwen35 / qwen35moe without MTP (plan)",
    "873e5d8e3": "b10568, 2026-08-21: PR #27382's merge, deepseek2's Q roped whole (graphs_mla_oss)",
    "1d36b3670": "b5269, 2025-05-03: ggml-blas and llama-context of a BLAS build (ggml_sched, logs)",
    "74b8fc17f": "a 2025 master commit: the build line's printf (builds)",
    "00f5442cc": "b9970, 2026-07-11: PR #24231's merge, the lightning indexer as one op (graphs_dsa, indexers)",
    "88bfee142": "b10119, 2026-07-24: PR #25407's merge, glm-dsa over llama_kv_cache_dsa (indexers)",
    "563dec81c": "b10243, 2026-08-03: PR #26474's merge, the indexer cache in full layers (graphs_dsa)",
    "76f46ad29": "2026-08 master: ggml-backend's input copies, the indexer cache's layers (ggml_sched, indexers)",
    "3f545becc": "b10587, 2026-08-22: the newest master commit kvmem reads (logs: tools/cli)",
}

__all__ = ["estimate", "capacity", "log_lines", "LOG_STYLES", "CACHE_TYPES", "MLA_MODES", "SPECS",
           "llamacpp_compute_bytes", "DEFAULTS", "LLAMA_MAX_SEQ"]

# src/llama-context.cpp: "n_ctx_seq (N) > n_ctx_train (M) -- possible training context overflow";
# tools/server caps each slot at n_ctx_train ("exceeds the training context ... - capping")
POSITIONS = PastPositions("llama.cpp warns \"possible training context overflow\" and runs; llama-server caps "
                          "each slot at the training context", trained=trained_context)
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
