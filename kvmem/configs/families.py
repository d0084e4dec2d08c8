"""The families kvmem reads, one entry per model_type, and the refusal of everything else.

A config is sized only when every field that shapes its cache is understood: its
``model_type`` must be listed here (FAMILIES): an unknown one is refused with a ConfigError
naming it and the closest supported families, never read by a generic rule; and the cache
fields it sets must be ones its family's layout reads (kvmem.configs.reads).

Each family names its layout (kvmem.configs.layers), whether its attention layers cache an
MLA latent, and the transformers file whose rules it follows. GENERIC lists the families
whose config class and modeling code keep the rule of transformers' cache_utils.py
``get_layer_types_and_kwargs``: ``layer_types`` when given, else every layer sliding when
``sliding_window`` is set, else chunked when ``attention_chunk_size`` is set, else full --
checked for each of them against transformers' own modeling code (kvmem validate --engine
transformers, tests/oracles/test_transformers_oracle.py) and config classes
(tests/test_configs_hf_parity.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError
from .judged import JUDGED, WHY

__all__ = ["Family", "FAMILIES", "ALIASES", "family_of"]


@dataclass(frozen=True)
class Family:
    """How kvmem reads one model_type: its layout rule, MLA or per-head, its source, whether it
    is opt-in, and the cache fields its modeling code leaves without effect on the cache
    (``ignores``: (field, why) pairs, each decided by building the model with transformers and seeing the
    cache bytes unchanged, tools/field_effects.py; Model.reading lists those a file sets).

    ``opt_in``: the family was read after the engine modes' rules were first checked, so an
    engine mode sizes it only where the mode declares it checked it against its engine's code
    (EngineSpec.families, kvmem.engines.base.CheckedFamilies); kvmem.engines.check_family
    refuses it by name elsewhere. Every other family is sized by every mode."""

    layout: str = "generic"
    mla: bool = False
    source: str = ""
    opt_in: bool = False
    ignores: tuple[tuple[str, str], ...] = ()
    defaults: str = ""     # the transformers config class whose defaults fill what a file leaves out

    @property
    def ignored_fields(self) -> frozenset:
        return frozenset(name for name, _ in self.ignores)


_GENERIC = (
    "apertus", "apertus1p5_text", "arcee", "aria_text", "beam", "biogpt", "bitnet", "blip_text_model", "bloom",
    "chameleon", "codegen", "cohere", "cohere_compass_text", "cosmos3_edge_text", "cpmant", "ctrl", "cwm",
    "deepseek_ocr2_text", "diffllama", "doge", "emu3_text_model", "ernie4_5", "ernie4_5_moe", "evolla", "exaone",
    "flex_olmo", "flint", "git", "glm", "glm4", "glm4_moe", "glm4v_text", "glm_ocr_text", "gpt2", "gpt_neox",
    "gpt_neox_japanese", "gptj", "granite", "granite4_vision_text", "granite_docling_text", "granite_swa",
    "granitemoe", "granitemoe_swa", "granitemoeshared", "helium", "hrm_text", "hunyuan_v1_dense", "hunyuan_v1_moe",
    "hunyuan_vl_text", "hy_v3", "hyperclovax", "idefics", "internlm3", "iquestcoder", "jais2", "jetmoe", "kolibri1",
    "llama", "mellum", "ministral", "ministral3", "mistral", "mixtral", "molmo2_text", "moshi",
    "muse_glimmer_text", "muse_spark_text", "nanochat", "nemotron", "olmo", "olmo2", "olmo3", "olmoe", "openai-gpt",
    "opt", "paddleocr_vl_text", "persimmon", "phi", "phi3", "phi4_multimodal", "phimoe", "pix2struct_text_model",
    "qwen3_vl_moe_text", "qwen3_vl_text", "sarvam_moe", "seed_oss", "solar_open", "stablelm", "starcoder2", "udop",
    "vaultgemma",
)

_SPECIAL = {
    "gemma2": Family("alternate", source="configuration_gemma2.py: sliding if (i + 1) % 2",
                     ignores=(("sliding_window_size", "a legacy duplicate of sliding_window in Google's own files: "
                                                      "Gemma2Config has no such field, the cache reads "
                                                      "sliding_window"),)),
    "gpt_oss": Family("alternate", source="configuration_gpt_oss.py: sliding if (i + 1) % 2"),
    "gemma3_text": Family("pattern", source="configuration_gemma3.py: sliding if (i + 1) % sliding_window_pattern"),
    "cohere2": Family("pattern", source="configuration_cohere2.py: sliding if (i + 1) % sliding_window_pattern"),
    "cohere2_moe": Family("cohere2_moe", source="configuration_cohere2_moe.py: the first_k_dense_replace layers "
                                                "by prefix_dense_sliding_window_pattern, the rest by "
                                                "sliding_window_pattern",
                          opt_in=True),
    "qwen2": Family("qwen2", source="configuration_qwen2.py: sliding if use_sliding_window and i >= max_window_layers"),
    "qwen2_moe": Family("qwen2", source="configuration_qwen2_moe.py"),
    "qwen3": Family("qwen2", source="configuration_qwen3.py"),
    "qwen3_moe": Family("qwen2", source="configuration_qwen3_moe.py"),
    "qwen2_vl_text": Family("qwen2", source="configuration_qwen2_vl.py", opt_in=True),
    "qwen2_5_vl_text": Family("qwen2", source="configuration_qwen2_5_vl.py", opt_in=True),
    "dots1": Family("qwen2", source="configuration_dots1.py", opt_in=True),
    "exaone4": Family("pattern", source="configuration_exaone4.py: sliding if (i + 1) % sliding_window_pattern",
                      opt_in=True),
    "exaone_moe": Family("exaone_moe", source="configuration_exaone_moe.py; sliding_windows per layer as the "
                                              "published K-EXAONE files give them (vLLM 0.33 exaone_moe.py)",
                         opt_in=True),
    "afmoe": Family("pattern", source="configuration_afmoe.py: sliding if (i + 1) % global_attn_every_n_layers",
                    opt_in=True),
    "smollm3": Family("smollm3", source="configuration_smollm3.py: layer_types, else sliding on the NoPE layers "
                                        "(no_rope_layers 0) when use_sliding_window and sliding_window",
                      opt_in=True),
    "xglm": Family(source="configuration_xglm.py (num_layers, attention_heads, d_model)", opt_in=True),
    "mpt": Family("mpt", source="modeling_mpt.py MptAttention: one K/V head per query head",
                  opt_in=True),
    "gemma": Family(source="configuration_gemma.py, generic rule",
                    ignores=(("use_bidirectional_attention", "lets image tokens see each other (PaliGemma): a mask, "
                                                             "not the cache"),)),
    "gemma3n_text": Family("gemma3n", source="configuration_gemma3n.py; modeling_gemma3n.py kv sharing"),
    "gemma4_text": Family("gemma4", source="configuration_gemma4.py (per_layer_config, kv_sharing_modes); "
                                           "modeling_gemma4.py Gemma4TextAttention",
                          opt_in=True),
    "mimo_v2_flash": Family("mimo", source="configuration_mimo_v2_flash.py, modeling_mimo_v2_flash.py",
                            opt_in=True),
    "kimi_linear": Family("kimi_linear", mla=True, source="configuration_kimi_linear.py, modeling_kimi_linear.py",
                          opt_in=True),
    "minimax": Family("minimax", source="configuration_minimax.py, modeling_minimax.py", opt_in=True),
    "lfm2": Family("lfm2", source="configuration_lfm2.py, modeling_lfm2.py", opt_in=True),
    "lfm2_moe": Family("lfm2", source="configuration_lfm2_moe.py", opt_in=True),
    "lfm3": Family("lfm2", source="configuration_lfm3.py (conv, full and sliding layers)", opt_in=True),
    "gemma4_unified_text": Family("gemma4", source="configuration_gemma4_unified.py",
                                  opt_in=True),
    "olmo_hybrid": Family("interval", source="configuration_olmo_hybrid.py layer_types; gated DeltaNet state",
                          opt_in=True),
    "lara_mini": Family("interval", source="configuration_lara_mini.py layer_types; gated DeltaNet state",
                        opt_in=True),
    "glm_moe_dsa": Family(mla=True, source="configuration_glm_moe_dsa.py (indexer_types), cache_utils.py "
                                           "DynamicIndexedLayer", opt_in=True),
    "dbrx": Family("dbrx", source="modeling_dbrx.py DbrxAttention: kv heads = attn_config.kv_n_heads",
                   opt_in=True),
    "granitemoehybrid": Family("granite_hybrid", source="configuration_granitemoehybrid.py, "
                                                        "modeling_granitemoehybrid.py",
                               opt_in=True),
    "bamba": Family("bamba", source="configuration_bamba.py (attn_layer_indices), modeling_bamba.py",
                    opt_in=True),
    "falcon_h1": Family("falcon_h1", source="configuration_falcon_h1.py (every layer hybrid), modeling_falcon_h1.py",
                        opt_in=True),
    "mamba": Family("mamba", source="modeling_mamba.py MambaMixer: attention-free",
                    opt_in=True),
    "falcon_mamba": Family("mamba", source="modeling_falcon_mamba.py: attention-free",
                           opt_in=True),
    "mamba2": Family("mamba2", source="modeling_mamba2.py Mamba2Mixer: attention-free",
                     opt_in=True),
    "nemotron-nas": Family("decilm", source="vllm/model_executor/models/nemotron_nas.py (block_configs); "
                                            "transformers has no class for it", opt_in=True),
    "gpt_bigcode": Family("multi_query", source="modeling_gpt_bigcode.py: one K/V head when multi_query",
                          opt_in=True),
    "llama4_text": Family("llama4", source="configuration_llama4.py: chunked where no_rope_layers[i]"),
    "qwen3_next": Family("interval", source="configuration_qwen3_next.py: linear if (i + 1) % full_attention_interval"),
    "qwen3_5_text": Family("interval", source="configuration_qwen3_5.py"),
    "qwen3_5_moe_text": Family("interval", source="configuration_qwen3_5_moe.py"),
    "jamba": Family("jamba", source="configuration_jamba.py: attention if i % attn_layer_period == attn_layer_offset"),
    "nemotron_h": Family("nemotron_h", source="configuration_nemotron_h.py: hybrid_override_pattern / "
                                              "layers_block_type",
                         ignores=(("time_step_rank", "Mamba-1's dt-projection rank: NemotronHConfig has no such "
                                                     "field and a Mamba-2 state is heads x head_dim x state"),)),
    # MiniMax-M2's published files carry MiniMax-M1's attn_type_list (all 1): MiniMaxM2Config has no such
    # field and modeling_minimax_m2.py builds full attention in every layer (vllm@v0.33.0
    # vllm/model_executor/models/minimax_m2.py reads no attn_type_list either)
    "minimax_m2": Family(source="configuration_minimax_m2.py, generic rule",
                         ignores=(("attn_type_list", "MiniMaxM2Config has no such field: every layer is full "
                                                     "attention"),)),
    "falcon": Family("falcon", source="modeling_falcon.py FalconAttention: K/V heads by new_decoder_architecture"),
    "deepseek_v2": Family(mla=True, source="modeling_deepseek_v2.py DeepseekV2Attention"),
    "deepseek_v3": Family(mla=True, source="modeling_deepseek_v3.py DeepseekV3Attention"),
    "deepseek_v32": Family(mla=True, source="modeling_deepseek_v32.py: latent + rope key + indexer key"),
    "glm4_moe_lite": Family(mla=True, source="modeling_glm4_moe_lite.py"),
    **{t: Family(mla=True, source=f"modeling_{t}.py: latent + rope key, one head",
                 opt_in=True)
       for t in ("minicpm3", "mistral4", "youtu", "sarvam_mla", "axk1", "axk2", "hy_v4", "hy_v4_vl_text")},
    # Ernie-4.5-VL's text model: the attention of ernie4_5_moe; its MoE lists text and vision experts
    # (moe_num_experts, moe_intermediate_size as [text, vision]), which kvmem's parameter count does not read
    "ernie4_5_vl_moe_text": Family(source="configuration_ernie4_5_vl_moe.py, generic rule",
                                   opt_in=True),
    # modeling_gpt_neo.py builds DynamicCache(config=...) from a config without layer_types or sliding_window:
    # every layer is cached whole, the local layers' window_size only masks
    "gpt_neo": Family(source="modeling_gpt_neo.py: every layer cached whole, window_size a mask",
                      opt_in=True,
                      ignores=tuple((name, "modeling_gpt_neo.py caches every layer whole; the local layers' "
                                           "window only masks") for name in ("attention_types", "attention_layers",
                                                                             "window_size"))),
    # modeling_laguna.py LagunaAttention: num_attention_heads_per_layer sets the query heads; K and V keep
    # num_key_value_heads in every layer
    "laguna": Family("listed", source="configuration_laguna.py layer_types (else all full); modeling_laguna.py "
                                      "LagunaAttention",
                     opt_in=True, ignores=(("num_attention_heads_per_layer", "query heads per layer; K and V keep "
                                                                              "num_key_value_heads"),)),
    "modernbert-decoder": Family("modernbert", source="configuration_modernbert_decoder.py: sliding unless i % "
                                                      "global_attn_every_n_layers == 0, window local_attention // 2",
                                 opt_in=True),
    "kosmos_2_5_text_model": Family(source="configuration_kosmos2_5.py (layers, attention_heads, embed_dim), "
                                           "generic rule", opt_in=True),
    # MiniMax-M3: its "minimax_m3_sparse" layers keep a one-head indexer key of index_head_dim beside K and V
    "minimax_m3_vl_text": Family("minimax_m3", source="configuration_minimax_m3_vl.py (layer_types, "
                                                      "sparse_attention_config), modeling_minimax_m3_vl.py "
                                                      "MiniMaxM3VLSparseCacheLayer",
                                 opt_in=True),
    "inkling_text": Family("inkling", source="configuration_inkling.py (layer_types hybrid / hybrid_sliding), "
                                             "modeling_inkling.py InklingAttention, InklingShortConvolution",
                           opt_in=True),
    "inkling2_text": Family("inkling", source="configuration_inkling2.py, modeling_inkling2.py (its dynamic "
                                              "short convolutions keep the same fp32 state)",
                            opt_in=True),
    "inkling2_loop_text": Family("inkling_loop", source="configuration_inkling2_loop.py, modeling_inkling2_loop.py: "
                                                        "each pass after the first over layers loop_layer_index_start"
                                                        " to loop_layer_index_end - 1 caches in copies of them",
                                 opt_in=True),
    "zaya": Family("zaya", source="configuration_zaya.py (layer_types hybrid / hybrid_sliding), modeling_zaya.py "
                                  "ZayaCCAProjection", opt_in=True),
    "mistral_large4_text": Family("mistral_large4", mla=True,
                                  source="configuration_mistral_large4.py (kv_source_layers, indexer_types), "
                                         "modeling_mistral_large4.py MistralLarge4Attention",
                                  opt_in=True),
    "bailing_hybrid": Family("bailing", mla=True, source="configuration_bailing_hybrid.py (layer_group_size), "
                                                         "modeling_bailing_hybrid.py BailingHybridDeltaAttention",
                             opt_in=True),
    # DeepSeek-V4: every layer a sliding window of K=V rows, CSA / HCA layers compressed rows beside it
    "deepseek_v4": Family("deepseek_v4", source="configuration_deepseek_v4.py (layer_types, compress_ratios, "
                                                 "compress_rates), modeling_deepseek_v4.py DeepseekV4HCACache, "
                                                 "DeepseekV4CSACache",
                          opt_in=True),
    "longcat_flash": Family(mla=True, source="configuration_longcat_flash.py (num_hidden_layers = 2 x num_layers), "
                                             "modeling_longcat_flash.py LongcatFlashMLA: two per decoder layer",
                            opt_in=True),
    # EXAONE-4.5's text model, as its files name it: transformers renames it exaone4
    # (configuration_exaone4_5.py Exaone4_5_Config.__post_init__) and vllm@v0.33.0 exaone4_5.py builds
    # Exaone4ForCausalLM on it (init_vllm_registered_model, L358-L364)
    "exaone4_5_text": Family("pattern", source="configuration_exaone4_5.py (text model exaone4), modeling_exaone4.py: "
                                               "layer_types, else sliding if (i + 1) % sliding_window_pattern",
                             opt_in=True, defaults="exaone4"),
    # Step-3.5 / Step-3.7's text model (Step3p7TextConfig, model_type step3p5): K and V of
    # num_key_value_heads (its attribute_map's num_attention_groups) in every layer, the sliding ones
    # windowed; layer_types padded with the MTP layers' types is cut to num_hidden_layers
    "step3p5": Family("step3p5", source="configuration_step3p7.py Step3p7TextConfig, modeling_step3p7.py "
                                        "Step3p7Attention; vllm@v0.33.0 vllm/model_executor/models/step3p5.py",
                      opt_in=True,
                      ignores=(("num_sliding_attention_heads", "the sliding layers' query heads; their K and V keep "
                                                               "num_attention_groups"),)),
    # MiniMax-M3's text model as MiniMax's files (model_type minimax_m3) and vLLM's config class
    # (minimax_m3_text) name it: sparse_attention_config's layout of minimax_m3_vl_text
    **{t: Family("minimax_m3", source="vllm@v0.33.0 vllm/transformers_utils/configs/minimax_m3.py, "
                                      "vllm/models/minimax_m3/nvidia/model.py and common/indexer.py get_kv_cache_spec; "
                                      "configuration_minimax_m3_vl.py",
                 opt_in=True, defaults="minimax_m3_vl_text")
       for t in ("minimax_m3", "minimax_m3_text")},
    # MiMo-7B: Qwen2's layers (vllm@v0.33.0 mimo.py MiMoModel(Qwen2Model)) and num_nextn_predict_layers
    # MTP layers of Qwen2DecoderLayer (mimo_mtp.py); transformers has no mimo
    "mimo": Family("qwen2", source="vllm@v0.33.0 vllm/model_executor/models/mimo.py, mimo_mtp.py; transformers "
                                   "has no class for it", opt_in=True, defaults="qwen2"),
    # DeepSeek-V4 in DeepSeek's reference field names (sgl-project/DeepSeek-V4-Flash-FP8): the fields
    # of configuration_deepseek_v4.py, model_type deepseek_ref
    "deepseek_ref": Family("deepseek_v4", source="DeepSeek-V4's reference config (sgl-project's DeepSeek-V4 "
                                                 "checkpoints), read as configuration_deepseek_v4.py reads "
                                                 "deepseek_v4", opt_in=True),
    # kvmem's own spelled-out form (kvmem.configs.custom_config): every field it writes is read
    "custom": Family(source="kvmem.configs.custom_config"),
    "custom_mla": Family(mla=True, source="kvmem.configs.custom_config"),
}

# Published model_types that transformers reads with another family's class.
ALIASES = {"kimi_k2": "deepseek_v3",
           # MiniMax's published remote-code types: the geometry of transformers' minimax, with
           # attn_type_list (MiniMax-M1 config.json; transformers' own config class ignores the list)
           "minimax_m1": "minimax", "minimax_text_01": "minimax",
           # phi-1/1.5/2's remote-code MixFormerSequentialConfig (n_layer, n_head, n_embd; MHA): the
           # model transformers reads as phi
           "mixformer-sequential": "phi"}

# BERT-style encoders run as decoders (is_decoder true) cache like any generic decoder; as encoders
# (the default) they cache nothing, and are refused.
_DECODERS = ("bert", "bert-generation", "big_bird", "camembert", "data2vec-text", "electra", "ernie", "megatron-bert",
             "rembert", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "xlm-roberta", "xlm-roberta-xl",
             "xmod")

FAMILIES = {**{t: Family(source=f"configuration_{t}.py, generic rule") for t in _GENERIC},
            **{t: Family("decoder", source=f"modeling_{t.replace('-', '_')}.py as a decoder (is_decoder)",
                         opt_in=True) for t in _DECODERS},
            **_SPECIAL}
# the fields transformers' own model caches the same bytes with, changed (kvmem.configs.judged)
FAMILIES.update({t: replace(FAMILIES[t], ignores=FAMILIES[t].ignores + tuple((name, WHY) for name in fields
                                                                             if name not in FAMILIES[t].ignored_fields))
                 for t, fields in JUDGED.items()})


def family_of(model_type: str) -> Family:
    """The family of ``model_type`` (ALIASES already resolved), or a ConfigError naming it and the
    closest supported ones."""
    if not model_type:
        raise ConfigError("config has no 'model_type'; kvmem sizes only the families it reads exactly "
                          "(`kvmem models` lists presets; set model_type, e.g. \"llama\")")
    family = FAMILIES.get(model_type)
    if family is None:
        import difflib
        close = difflib.get_close_matches(model_type, list(FAMILIES), n=3, cutoff=0.6)
        hint = f"; closest supported: {', '.join(close)}" if close else ""
        raise ConfigError(f"model_type {model_type[:100]!r} is not a family kvmem reads: it is refused rather than "
                          f"sized by a rule it may not follow{hint}. Use a preset, or a config of a supported "
                          "family (kvmem.configs.FAMILIES)")
    return family
