"""kvmem's trtllm mode on the opt-in families: each one TensorRT-LLM's PyTorch backend runs, sized by hand
from its model file (kvmem/engines/trtllm/families.py cites each), and each one it does not run, refused
with the backend's own reason (trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118).

Bytes per token on one rank = 2 (K, V) x sum over the layers of ceil(kv_heads / tp) x head_dim x dtype
bytes (KVCacheManager.get_cache_bytes_per_token, resource_manager.py @ 001541ba); MLA one latent of
kv_lora_rank + qk_rope_head_dim, factor 1.
"""

import json

import pytest

import kvmem
from kvmem.configs.families import FAMILIES
from kvmem.engines import engine_spec, trtllm

SPEC = engine_spec("trtllm")
# Families TensorRT-LLM runs whose cache kvmem's trtllm mode does not lay out yet (docs/research/families_trtllm.md
# says why for each): they keep kvmem's "not yet" refusal. None is left.
NOT_YET: set[str] = set()
# base families (kvmem.configs.FAMILIES, not opt-in) the pinned registry has no architecture for: GLM-4-0414, the
# families of the presets gpt2, gpt-neox-20b, falcon-7b/40b, gemma-2-*, deepseek-v2(-lite), gemma-3n-*, jamba-1.5-mini,
# and 33 more (each held to transformers' class name in tests/engines/test_trtllm_registry.py)
BASE_REFUSED = {"glm4", "gpt2", "gpt_neox", "falcon", "gemma2", "deepseek_v2", "gemma3n_text", "jamba",
                "arcee", "biogpt", "bitnet", "bloom", "codegen", "cohere", "cpmant", "ctrl", "diffllama", "ernie4_5",
                "ernie4_5_moe", "flex_olmo", "gemma", "glm", "glm4_moe_lite", "gpt_neox_japanese", "gptj", "granite",
                "granitemoe", "granitemoeshared", "helium", "jetmoe", "olmo", "olmo2", "olmo3", "olmoe", "openai-gpt",
                "opt", "persimmon", "phi", "phimoe", "stablelm", "vaultgemma",
                # by transformers 5.24's class for the model_type
                "apertus", "apertus1p5_text", "aria_text", "beam", "cohere_compass_text", "cwm", "doge", "flint", "git",
                "granite_swa", "granitemoe_swa", "hrm_text", "hy_v3", "hyperclovax", "jais2", "kolibri1", "mellum",
                "ministral", "moshi", "nanochat", "phi4_multimodal", "solar_open",
                # multimodal text configs, by the outer model's class
                "blip_text_model", "chameleon", "cosmos3_edge_text", "deepseek_ocr2_text", "emu3_text_model", "evolla",
                "glm4v_text", "glm_ocr_text", "granite4_vision_text", "granite_docling_text", "hunyuan_vl_text",
                "idefics", "molmo2_text", "muse_glimmer_text", "muse_spark_text", "paddleocr_vl_text",
                "pix2struct_text_model", "udop",
                # by the class their checkpoints name (families.PUBLISHED)
                "exaone", "internlm3", "iquestcoder", "sarvam_moe"}


def _model(**cfg):
    return kvmem.Model.from_hf_config({"torch_dtype": "bfloat16", "vocab_size": 1000, "intermediate_size": 100,
                                       "max_position_embeddings": 131072, **cfg})


def test_every_opt_in_family_is_sized_refused_with_the_engines_reason_or_listed_as_not_yet():
    opt_in = {t for t, family in FAMILIES.items() if family.opt_in}
    declared = {t for t in opt_in if SPEC.families.sizes(t)}
    assert declared == {"afmoe", "deepseek_v4", "exaone4", "exaone4_5_text", "exaone_moe", "gemma4_text", "gemma4_unified_text",
                        "glm_moe_dsa", "kimi_linear", "laguna", "minimax_m3", "minimax_m3_text", "minimax_m3_vl_text",
                        "nemotron-nas", "qwen2_5_vl_text", "qwen2_vl_text", "step3p5"}
    # base families (read by every mode) refused all the same: the registry has none of their architectures
    assert set(SPEC.refusals) - opt_in == BASE_REFUSED and not set(SPEC.refusals) & declared
    assert opt_in - declared - set(SPEC.refusals) == NOT_YET
    assert all("TensorRT-LLM's PyTorch backend" in why and "trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118" in why
               for why in SPEC.refusals.values())


def test_a_family_the_registry_lacks_is_refused_naming_the_architecture():
    model = _model(model_type="mimo_v2_flash", num_hidden_layers=2, hidden_size=1024, num_attention_heads=8,
                   num_key_value_heads=4, head_dim=128, v_head_dim=128, swa_num_attention_heads=8,
                   swa_num_key_value_heads=8, swa_head_dim=128, swa_v_head_dim=128, sliding_window_size=128,
                   hybrid_layer_pattern=[0, 1])
    with pytest.raises(ValueError, match=r"engine 'trtllm' \(TensorRT-LLM main \(resource_manager.py @ 001541ba, "
                                         r"model registry @ 065ff9e9\)\) does not size model_type 'mimo_v2_flash': "
                                         r"TensorRT-LLM's PyTorch backend registers no MiMoV2FlashForCausalLM"):
        kvmem.estimate(model, engine="trtllm", tokens=1024)


def test_glm_4_0414_is_refused_as_the_registry_has_glm4_moe_only():
    # trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118: Glm4MoeForCausalLM (#L58) and
    # GlmMoeDsaForCausalLM, no Glm4ForCausalLM: AutoModelForCausalLM raises "Unknown architecture" for the dense GLM-4
    for name in ("glm-4-32b-0414", "glm-z1-32b-0414", "glm-4-9b-0414"):
        with pytest.raises(ValueError, match=r"does not size model_type 'glm4': TensorRT-LLM's PyTorch backend "
                                             r"registers no Glm4ForCausalLM \(it has Glm4MoeForCausalLM only\)"):
            kvmem.estimate(name, engine="trtllm", tokens=1024)


def test_deepseek_ref_is_refused_as_the_backend_cannot_load_its_config():
    # tests/fixtures/configs/new/sgl-deepseek-v4-flash-fp8.json: model_type deepseek_ref, no auto_map
    model = kvmem.Model.from_hf_config("tests/fixtures/configs/new/sgl-deepseek-v4-flash-fp8.json")
    assert model.model_type == "deepseek_ref"
    with pytest.raises(ValueError, match=r"hands model_type 'deepseek_ref' to transformers' AutoConfig, and neither "
                                         r"transformers nor TensorRT-LLM registers a config class for it"):
        kvmem.estimate(model, engine="trtllm", tokens=1024)


def test_minimax_m1_is_refused_as_the_registry_has_minimax_m2_and_m3_only():
    with pytest.raises(ValueError, match="registers no MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM"):
        kvmem.estimate("minimax-m1", engine="trtllm", tokens=1024)


# ---- GLM-5 (glm_moe_dsa) and DeepSeek-V3.2: MLA latent + DSA indexer key --------------------------

# zai-org/GLM-5 config.json fields (as in tests/engines/test_vllm_dsa.py)
GLM5 = {"model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"], "num_hidden_layers": 78,
        "num_attention_heads": 64, "num_key_value_heads": 64, "hidden_size": 6144, "head_dim": 64,
        "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192, "v_head_dim": 256, "q_lora_rank": 2048,
        "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048, "torch_dtype": "bfloat16",
        "max_position_embeddings": 202752}


def test_glm_5_latent_and_indexer_key_per_token():
    # DSACacheManager.get_cache_bytes_per_token: (kv_lora_rank + rope) + (index_head_dim + 128 // 128 x 4)
    # = 576 + 132 = 708 elements per layer in the cache dtype: 78 x 708 x 2 B = 110,448 B (bf16), 55,224 (fp8);
    # get_cache_size_per_token: 2 B x 78 x 576 x (1 + 132 / 576), the same; not split by tp
    model = kvmem.Model.from_hf_config(GLM5)
    for kv_dtype, expected in (("auto", 110_448), ("fp8", 55_224)):
        assert trtllm.bytes_per_token(model, kv_dtype=kv_dtype, tokens_per_block=64) == expected
        assert trtllm.bytes_per_token(model, kv_dtype=kv_dtype, tokens_per_block=64, allocated=True) == expected
        assert trtllm.bytes_per_token(model, kv_dtype=kv_dtype, tp=8, allocated=True) == expected
    # 1,000 tokens in blocks of 64: 16 blocks = 1,024 slots x 1,416 B per layer
    result = kvmem.estimate(model, engine="trtllm", tokens=1000, tokens_per_block=64)
    assert result.per_layer == (1024 * 1416,) * 78 and result.v_bytes == 0
    assert not any("DSACacheManager" in note for note in result.notes)


def test_dsa_at_the_default_block_size_is_sized_without_a_note():
    # the pinned DSACacheManager.__init__ checks no tokens_per_block: 1,000 tokens in blocks of 32 are 32 blocks
    result = kvmem.estimate(kvmem.Model.from_hf_config(GLM5), engine="trtllm", tokens=1000)   # the default, 32
    assert result.per_layer[0] == 1024 * 1416
    assert not any("tokens_per_block" in note for note in result.notes)


def test_glm_5_layers_without_their_own_indexer_still_keep_one_in_trtllm():
    # transformers' indexer_types: layer 1 shares layer 0's indexer; TRT-LLM's pool covers every layer
    model = kvmem.Model.from_hf_config({**GLM5, "num_hidden_layers": 4, "indexer_types": ["full", "shared"] * 2})
    result = kvmem.estimate(model, engine="trtllm", tokens=64, tokens_per_block=64)
    assert result.per_layer == (64 * 1416,) * 4
    assert any("2 layers the config gives no indexer key" in note for note in result.notes)


def test_deepseek_v32_preset_same_rule():
    # 61 layers x 708 x 2 B = 86,376 B per token
    assert trtllm.bytes_per_token(kvmem.get_model("deepseek-v3.2"), tokens_per_block=64) == 86_376


# ---- Nemotron-NAS: per-layer KV heads, and the pool estimate's float mean --------------------------

# TensorRT-LLM's own test config (tests/unittest/_torch/modeling/test_modeling_nemotron_nas.py,
# NEMOTRON_NAS_MINI_CONFIG, code-index id 684606791), 14 blocks; its model_type "deci" is nemotron-nas here
_G = (8, 16, "linear", "no_op", 8, 4, 8, 8, 16, "linear", "no_op", 8, 4, 8)
NAS_MINI = {"architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas", "hidden_size": 2048,
            "num_attention_heads": 32, "num_hidden_layers": 14, "num_key_value_heads": None,
            "block_configs": [{"attention": {"n_heads_in_group": None if isinstance(g, str) else g,
                                             "no_op": g == "no_op", "replace_with_linear": g == "linear"},
                               "ffn": {"ffn_mult": 2.0, "no_op": False, "replace_with_linear": False}} for g in _G]}


def test_nemotron_nas_per_layer_heads_and_the_floored_mean_estimate():
    model = _model(**NAS_MINI)
    # KV heads 32 // n_heads_in_group: 4, 2, 0, 0, 4, 8, 4, 4, 2, 0, 0, 4, 8, 4 (sum 44), head_dim 2,048 / 32 = 64
    # allocated: 2 x 44 x 64 x 2 B = 11,264 B per token
    assert trtllm.bytes_per_token(model, allocated=True) == 11_264
    # estimate: mean 44 / 14 = 3.142...; 64 x 3.142... = 201.14 // 1 = 201 -> 2 x 14 x 201 x 2 B = 11,256
    assert trtllm.bytes_per_token(model) == 11_256
    # tp 2: ceil(heads / 2) = 2, 1, 0, 0, 2, 4, 2, 2, 1, 0, 0, 2, 4, 2 (sum 22): 2 x 22 x 64 x 2 = 5,632;
    # the estimate 201.14 // 2 = 100 -> 2 x 14 x 100 x 2 = 5,600
    assert trtllm.bytes_per_token(model, tp=2, allocated=True) == 5_632
    assert trtllm.bytes_per_token(model, tp=2) == 5_600
    result = kvmem.estimate(model, engine="trtllm", tokens=32)
    assert result.per_layer[:4] == (32 * 1024, 32 * 512, 0, 0)     # 4 x 64 x 2 x 2 B = 1,024 B per token
    assert any("sizes its pool with 11,256 B/token but allocates 11,264" in note for note in result.notes)


def test_nemotron_nas_block_without_attention_but_with_heads_is_refused():
    blocks = [dict(block) for block in NAS_MINI["block_configs"]]
    blocks[3] = {"attention": {"n_heads_in_group": 8, "no_op": True}, "ffn": blocks[3]["ffn"]}
    with pytest.raises(ValueError, match=r"block_configs\[3\].attention: TensorRT-LLM's NemotronNASModel gives"):
        kvmem.estimate(_model(**{**NAS_MINI, "block_configs": blocks}), engine="trtllm", tokens=32)


# ---- attention-only families: full-length cache unless max_attention_window --------------------------

# EXAONE-4.0-32B (LGAI-EXAONE/EXAONE-4.0-32B config.json): 64 layers, 40 heads, 8 KV heads, hidden 5,120,
# head_dim 128, sliding_window 4,096, sliding_window_pattern "LLLG" (spelled out in layer_types, as
# EXAONE-4.5's text config publishes it: kvmem's reader takes the pattern string only through them)
EXAONE4_32B = {"model_type": "exaone4", "architectures": ["Exaone4ForCausalLM"], "num_hidden_layers": 64,
               "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
               "sliding_window": 4096, "sliding_window_pattern": "LLLG",
               "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 16}


def test_exaone4_32b_every_layer_full_length_in_bf16():
    model = _model(**EXAONE4_32B)
    # 64 x 2 x 8 x 128 x 2 B = 262,144 B per token
    assert trtllm.bytes_per_token(model) == 262_144
    result = kvmem.estimate(model, engine="trtllm", tokens=8192)
    assert result.kv_bytes == 8192 * 262_144
    assert any("48 sliding/chunked layers are cached at full length" in note for note in result.notes)
    # Exaone4ForCausalLM sets torch_dtype bfloat16: an fp32 config still caches 2 B values
    assert trtllm.bytes_per_token(_model(**{**EXAONE4_32B, "torch_dtype": "float32"})) == 262_144
    # max_attention_window="model": sliding layers hold cdiv(4,096, 32) = 128 blocks, full ones 256
    windowed = kvmem.estimate(model, engine="trtllm", tokens=8192, max_attention_window="model")
    assert windowed.per_layer[:4] == (4096 * 4096,) * 3 + (8192 * 4096,)


# EXAONE-4.5-33B's config.json as ports quote it (tests/fixtures/configs/new/SOURCES.md: no copy of the file itself;
# code-index id 56783952881, ollama's exaone4_5 test): its text_config is EXAONE-4.0-32B's geometry
EXAONE4_5_33B = {"architectures": ["Exaone4_5_ForConditionalGeneration"], "model_type": "exaone4_5",
                 "vocab_size": 153600,
                 "text_config": {"architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4_5_text",
                                 "hidden_size": 5120, "intermediate_size": 27392, "num_hidden_layers": 64,
                                 "num_attention_heads": 40, "num_key_value_heads": 8, "max_position_embeddings": 262144,
                                 "rms_norm_eps": 1e-5, "sliding_window": 4096, "sliding_window_pattern": "LLLG",
                                 "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 16,
                                 "rope_theta": 1000000}}


def test_exaone4_5_text_is_exaone4_on_the_text_config():
    model = kvmem.Model.from_hf_config(EXAONE4_5_33B)
    assert model.model_type == "exaone4_5_text"
    # head_dim 5,120 / 40 = 128: 64 layers x 2 x 8 x 128 x 2 B (bf16, forced by Exaone4ForCausalLM) = 262,144 B
    assert trtllm.bytes_per_token(model) == trtllm.bytes_per_token(model, allocated=True) == 262_144
    fp32 = {**EXAONE4_5_33B, "text_config": {**EXAONE4_5_33B["text_config"], "torch_dtype": "float32"}}
    assert trtllm.bytes_per_token(kvmem.Model.from_hf_config(fp32)) == 262_144
    # tp 16: ceil(8 / 16) = 1 head per rank allocated, 2 x 64 x 128 x 2 = 32,768 B; the pool estimate floors
    # 128 x 8 // 16 = 64 elements: 2 x 64 x 64 x 2 = 16,384 B
    assert trtllm.bytes_per_token(model, tp=16, allocated=True) == 32_768
    assert trtllm.bytes_per_token(model, tp=16) == 16_384
    result = kvmem.estimate(model, engine="trtllm", tokens=8192, max_attention_window="model")
    # 48 sliding layers hold 4,096 slots, 16 full ones 8,192, of 4,096 B each
    assert result.kv_bytes == (48 * 4096 + 16 * 8192) * 4096


def _step_3_7_flash():
    # aiconfigurator's flattened copy names Step3p7FlashForCausalLM, which the pinned registry lacks (refused below);
    # the flat text model is registered as Step3p5ForCausalLM (trtllm@065ff9e9
    # tensorrt_llm/_torch/models/_arch_index.py#L114 -> modeling_step3p7): the geometry under that name
    with open("tests/fixtures/configs/new/step-3.7-flash.json") as f:
        return {**json.load(f), "architectures": ["Step3p5ForCausalLM"]}


def test_step_3_7_flash_flat_copy_names_an_architecture_the_registry_lacks():
    with open("tests/fixtures/configs/new/step-3.7-flash.json") as f:
        flat = json.load(f)
    assert flat["architectures"] == ["Step3p7FlashForCausalLM"]
    with pytest.raises(ValueError, match="registers no Step3p7FlashForCausalLM"):
        kvmem.estimate(kvmem.Model.from_hf_config(flat), engine="trtllm", tokens=64)


def test_step_3_7_flash_every_layer_full_length_unless_windows_are_asked():
    # tests/fixtures/configs/new/step-3.7-flash.json (stepfun-ai/Step-3.7-Flash, aiconfigurator's flattened copy):
    # 45 layers, 8 KV heads (num_attention_groups) x 128 on full and sliding layers alike:
    # 45 x 2 x 8 x 128 x 2 B = 184,320 B per token
    model = kvmem.Model.from_hf_config(_step_3_7_flash())
    assert model.model_type == "step3p5"
    assert trtllm.bytes_per_token(model) == trtllm.bytes_per_token(model, allocated=True) == 184_320
    result = kvmem.estimate(model, engine="trtllm", tokens=32_768)
    assert result.kv_bytes == 32_768 * 184_320
    assert any("33 sliding/chunked layers are cached at full length" in note for note in result.notes)
    # max_attention_window="model": 12 full layers x 32,768 slots + 33 sliding x 512 (16 blocks of 32), 4,096 B each
    windowed = kvmem.estimate(model, engine="trtllm", tokens=32_768, max_attention_window="model")
    assert windowed.kv_bytes == 12 * 4096 * 32_768 + 33 * 4096 * 512 == 1_679_818_752


def test_step_3_7_flash_nested_with_its_second_attention_geometry():
    # the published file nests text_config (step3p5) and gives the sliding layers 96 query heads and, in
    # attention_other_setting, their KV heads: 8, as the others -- sized; 4 would be refused
    flat = _step_3_7_flash()
    text = {**flat, "model_type": "step3p5", "num_attention_groups": 8,
            "attention_other_setting": {"num_attention_heads": 96, "num_attention_groups": 8}}
    del text["num_key_value_heads"]
    nested = {"model_type": "step3p7", "architectures": ["Step3p7ForConditionalGeneration"], "text_config": text}
    assert trtllm.bytes_per_token(kvmem.Model.from_hf_config(nested)) == 184_320
    text["attention_other_setting"] = {"num_attention_heads": 96, "num_attention_groups": 4}
    with pytest.raises(ValueError, match=r"attention_other_setting.num_attention_groups = 4: TensorRT-LLM's "
                                         r"Step3p7Attention gives the sliding layers 4 KV heads"):
        kvmem.estimate(kvmem.Model.from_hf_config(nested), engine="trtllm", tokens=64)


def test_step3p5_without_layer_types_has_no_model_windows_kvmem_can_follow():
    cfg = {k: v for k, v in _step_3_7_flash().items() if k != "layer_types"}
    model = kvmem.Model.from_hf_config(cfg)
    assert trtllm.bytes_per_token(model) == 184_320      # every layer full length by default
    with pytest.raises(ValueError, match="slides 3 of every 4 layers and kvmem's reading none"):
        kvmem.estimate(model, engine="trtllm", tokens=64, max_attention_window="model")


def test_k_exaone_geometry():
    # TensorRT-LLM's own test config of K-EXAONE (test_modeling_exaone_moe.py EXAONE_MOE_CONFIG, code-index
    # id 4294797590): 4 layers, 8 KV heads, head_dim 128 -> 4 x 2 x 8 x 128 x 2 B = 16,384 B per token
    model = _model(model_type="exaone_moe", architectures=["ExaoneMoEForCausalLM"], num_hidden_layers=4,
                   hidden_size=6144, num_attention_heads=64, num_key_value_heads=8, head_dim=128, sliding_window=4,
                   sliding_window_pattern="LLLG",
                   layer_types=["sliding_attention"] * 3 + ["full_attention"])
    assert trtllm.bytes_per_token(model) == 16_384
    windowed = kvmem.estimate(model, engine="trtllm", tokens=64, max_attention_window="model")
    assert windowed.per_layer == (32 * 4096,) * 3 + (64 * 4096,)   # window 4: one block of 32


def test_k_exaone_per_layer_windows_are_not_the_model_windows_trtllm_uses():
    model = _model(model_type="exaone_moe", num_hidden_layers=3, hidden_size=1024, num_attention_heads=16,
                   num_key_value_heads=2, head_dim=64, sliding_window=4096,
                   layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                   sliding_windows=[128, 4096, None])
    assert trtllm.bytes_per_token(model) == 3 * 2 * 2 * 64 * 2
    with pytest.raises(ValueError, match="ExaoneMoeAttention gives every sliding layer config.sliding_window"):
        kvmem.estimate(model, engine="trtllm", tokens=8192, max_attention_window="model")


def test_trinity_nano_afmoe():
    # arcee-ai/Trinity-Nano-Preview config.json (code-index id 52090868887): 56 layers, 2 KV heads, head_dim 128,
    # sliding_window 2,048 on 3 of every 4 layers (global_attn_every_n_layers 4): 56 x 2 x 2 x 128 x 2 B
    model = _model(model_type="afmoe", architectures=["AfmoeForCausalLM"], num_hidden_layers=56, hidden_size=1024,
                   num_attention_heads=8, num_key_value_heads=2, head_dim=128, sliding_window=2048,
                   global_attn_every_n_layers=4)
    assert trtllm.bytes_per_token(model) == 57_344
    windowed = kvmem.estimate(model, engine="trtllm", tokens=4096, max_attention_window="model")
    # 42 sliding layers x 2,048 slots + 14 full x 4,096 slots, 1,024 B per slot
    assert windowed.kv_bytes == (42 * 2048 + 14 * 4096) * 1024


def test_laguna_kv_heads_on_every_layer():
    # LagunaAttention: query heads per layer, num_key_value_heads 2 everywhere: 2 x 2 x 128 x 2 B x 2 layers
    model = _model(model_type="laguna", architectures=["LagunaForCausalLM"], num_hidden_layers=2, hidden_size=2048,
                   num_attention_heads=32, num_key_value_heads=2, num_attention_heads_per_layer=[32, 16],
                   head_dim=128, layer_types=["full_attention", "full_attention"])
    assert trtllm.bytes_per_token(model) == 2_048


def test_qwen2_vl_text_model_is_qwen2():
    # Qwen2.5-VL-7B's text config: 28 layers x 2 x 4 KV heads x 128 x 2 B = 57,344 B per token
    for model_type in ("qwen2_vl_text", "qwen2_5_vl_text"):
        model = _model(model_type=model_type, num_hidden_layers=28, hidden_size=3584, num_attention_heads=28,
                       num_key_value_heads=4, use_sliding_window=False, sliding_window=32768)
        assert trtllm.bytes_per_token(model) == 57_344
        assert kvmem.estimate(model, engine="trtllm", tokens=1000).kv_bytes == 1024 * 57_344


# ---- Kimi-K3 (kimi_linear): MLA layers in blocks, KDA layers a per-sequence state ---------------------------

# moonshotai/Kimi-K3 text_config (code-index id 60257099257: "K3's real text config, trimmed to the fields the
# planner reads"; kda_layers / full_attn_layers verbatim): 93 layers, 24 MLA (every 4th to 88, then 92 and 93),
# 69 KDA of 96 heads x 128, short_conv_kernel_size 4; TRT-LLM flattens kimi_k3 to this text config
# (config_utils.py load_pretrained_config). K3's latent-MoE fields as published.
_FULL = [*range(4, 89, 4), 92, 93]
KIMI_K3_TEXT = {"architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "dtype": "bfloat16",
                "num_hidden_layers": 93, "hidden_size": 7168, "intermediate_size": 33792, "moe_intermediate_size": 3072,
                "routed_expert_hidden_size": 3584, "latent_moe_use_norm": True, "num_experts": 896,
                "num_experts_per_token": 16, "num_shared_experts": 2, "first_k_dense_replace": 1, "kv_lora_rank": 512,
                "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                "num_attention_heads": 96, "num_key_value_heads": 96, "vocab_size": 163840, "rms_norm_eps": 1e-5,
                "linear_attn_config": {"full_attn_layers": _FULL,
                                       "kda_layers": [i for i in range(1, 94) if i not in _FULL],
                                       "head_dim": 128, "num_heads": 96, "short_conv_kernel_size": 4,
                                       "use_full_rank_gate": True}}


def test_kimi_k3_mla_blocks_and_kda_states():
    model = kvmem.Model.from_hf_config(KIMI_K3_TEXT)
    # MLA: 24 layers x 576 x 2 B = 27,648 B per token, not split by tp
    assert trtllm.bytes_per_token(model) == trtllm.bytes_per_token(model, tp=8, allocated=True) == 27_648
    # KDA per layer and sequence: conv 3 x 96 x 128 = 36,864 channels x 4 columns (the whole window) x 2 B
    # = 294,912 B; recurrent 96 x 128 x 128 x 4 B (fp32) = 6,291,456 B; 69 layers -> 454,459,392 B
    result = kvmem.estimate(model, engine="trtllm", tokens=1000, batch=2)
    assert result.state_bytes == 2 * 69 * (294_912 + 6_291_456) == 908_918_784
    assert result.kv_bytes == 2 * 1024 * 27_648
    assert any("max_batch_size + 1 sequences" in note for note in result.notes)
    # tp 8: 12 KDA heads per rank, an eighth of each state
    assert kvmem.estimate(model, engine="trtllm", tokens=1000, tp=8).state_bytes == 69 * (294_912 + 6_291_456) // 8


def test_kimi_linear_48b_is_refused_as_trtllm_runs_kimi_k3_only():
    # tests/fixtures/configs/new/kimi-linear-48b-a3b-instruct.json: no routed_expert_hidden_size
    model = kvmem.Model.from_hf_config("tests/fixtures/configs/new/kimi-linear-48b-a3b-instruct.json")
    with pytest.raises(ValueError, match="KimiLinearForCausalLM builds Kimi-K3's latent MoE layer only, and its MoE "
                                         "layer raises for this model's config: no routed_expert_hidden_size"):
        kvmem.estimate(model, engine="trtllm", tokens=1024)


# Gemma 4 under KVCacheManagerV2 (kvmem/engines/trtllm/models.py gemma4_layout, v2_window_blocks)

def _gemma4(**text):
    layer_types = ["sliding_attention"] * 3 + ["full_attention"]
    cfg = {"model_type": "gemma4_text", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
           "num_key_value_heads": 4, "head_dim": 64, "global_head_dim": 128, "num_global_key_value_heads": 1,
           "attention_k_eq_v": True, "sliding_window": 100, "layer_types": layer_types, "num_kv_shared_layers": 0,
           "hidden_size_per_layer_input": 0, **text}
    return _model(**cfg)


def test_gemma_4_26b_holds_per_layer_heads_and_windows_by_default():
    # the preset's text config: 25 sliding layers 8 KV heads x 256, 5 full layers (attention_k_eq_v)
    # num_global_key_value_heads 2 x global_head_dim 512; bf16, K and V each:
    # 25 x 2 x 8 x 256 x 2 + 5 x 2 x 2 x 512 x 2 = 204,800 + 20,480 = 225,280 B/token.
    # 2,000 tokens, 32-token blocks: full layers ceil(2000/32) = 63 blocks = 2,016 tokens x 20,480 = 41,287,680;
    # sliding layers (window 1,024 by default, _util.py): 63 - (2000 + 1 - 1024) // 32 = 63 - 30 = 33 blocks =
    # 1,056 tokens x 204,800 = 216,268,800; total 257,556,480
    result = kvmem.estimate("gemma-4-26b-a4b", engine="trtllm", tokens=2000, batch=1)
    assert result.details.bytes_per_token == 225_280
    assert result.details.blocks_per_sequence == {0: 63, 1024: 33}
    assert result.kv_bytes == 257_556_480
    # 4,096 tokens: full 128 blocks x 32 x 20,480 = 83,886,080; sliding 128 - 3073 // 32 = 32 blocks x 32 x 204,800 =
    # 209,715,200; x 2 sequences = 587,202,560
    assert kvmem.estimate("gemma-4-26b-a4b", engine="trtllm", tokens=4096, batch=2).kv_bytes == 587_202_560
    # windows as a list keep the V1 arithmetic of the pattern (every layer whole): 4,096 x 225,280 = 922,746,880
    whole = kvmem.estimate("gemma-4-26b-a4b", engine="trtllm", tokens=4096, max_attention_window=[4096])
    assert whole.kv_bytes == 922_746_880


def test_gemma_4_kv_shared_layers_keep_their_own_buffers():
    # sliding, full, sliding, full; the last 2 KV-shared: TRT-LLM still gives all 4 their K/V (_util.py: no
    # layer_mask exclusion). sliding 2 x (2 x 4 x 64 x 2) = 2,048, full (K=V: 1 global head) 2 x (2 x 1 x 128 x 2)
    # = 1,024 -> 3,072 B/token; 64 tokens (< window 100): 2 blocks of 32 on each layer: 64 x 3,072 = 196,608
    shared = _gemma4(num_kv_shared_layers=2, layer_types=["sliding_attention", "full_attention"] * 2)
    result = kvmem.estimate(shared, engine="trtllm", tokens=64)
    assert result.details.bytes_per_token == 3_072 and result.kv_bytes == 196_608
    # without K=V the full layer takes num_key_value_heads: 2 x 4 x 128 x 2 = 2,048 -> 3,072 + 2,048 = 5,120
    plain = kvmem.estimate(_gemma4(attention_k_eq_v=False), engine="trtllm", tokens=64)
    assert plain.details.bytes_per_token == 5_120
    # tp 2: ceil(4 / 2) = 2 sliding heads, ceil(1 / 2) = 1 global head: 3 x 2 x 2 x 64 x 2 + 2 x 128 x 2 = 1,536 + 512
    assert kvmem.estimate(_gemma4(), engine="trtllm", tokens=64, tp=2).details.bytes_per_token == 2_048


def test_gemma_4_without_layer_types_takes_transformers_default_pattern():
    # no layer_types: Gemma4TextConfig fills 5 sliding then 1 full (kvmem's reading), 12 layers, the last 2 KV-shared
    # (layer 10 reads 9, sliding; 11 reads 5, full) and still given their own buffers by TRT-LLM:
    # 10 sliding x (2 x 4 x 64 x 2) + 2 full x (2 x 1 x 128 x 2) = 10,240 + 1,024 = 11,264 B/token; 64 tokens: 720,896
    model = _gemma4(num_hidden_layers=12, layer_types=None, num_kv_shared_layers=2)
    assert "layer_types" not in {k for k, v in model.config.items() if v is not None}
    result = kvmem.estimate(model, engine="trtllm", tokens=64)
    assert result.details.bytes_per_token == 11_264 and result.kv_bytes == 720_896
    # "model" windows are the ones TRT-LLM sets by default: 200 tokens, sliding 7 - 101 // 32 = 4 blocks (the shared
    # sliding layer 10 too), full 7 blocks: 10 x 4 x 32 x 1,024 + 2 x 7 x 32 x 512 = 1,310,720 + 229,376 = 1,540,096
    for windows in (None, "model"):
        held = kvmem.estimate(model, engine="trtllm", tokens=200, max_attention_window=windows)
        assert held.kv_bytes == 1_540_096 and held.details.blocks_per_sequence == {0: 7, 100: 4}


def test_gemma_4_unified_is_its_text_config_under_the_same_rules():
    # modeling_gemma4_unified.py: Gemma4ForCausalLM on text_config; the wrapper's text config as in _gemma4():
    # 3 x 1,024 + 512 = 3,584 B/token; 640 tokens: full 20 blocks = 640 x 512 = 327,680, sliding (window 100)
    # 20 - (641 - 100) // 32 = 20 - 16 = 4 blocks = 128 x 3,072 = 393,216; total 720,896
    text = {k: v for k, v in _gemma4().config.items()}
    text["model_type"] = "gemma4_unified_text"
    model = kvmem.Model.from_hf_config({"model_type": "gemma4_unified", "text_config": text,
                                        "architectures": ["Gemma4UnifiedForConditionalGeneration"]})
    result = kvmem.estimate(model, engine="trtllm", tokens=640)
    assert result.details.bytes_per_token == 3_584 and result.kv_bytes == 720_896


def test_a_sliding_layer_frees_the_blocks_that_leave_its_window():
    # _life_cycle_registry.py AttnLifeCycle.get_stale_range: stale = (h + 1 - window) // tokens_per_block
    assert [trtllm.models.v2_window_blocks(t, 100, 32) for t in (99, 100, 127, 131, 1000)] == [4, 4, 4, 4, 4]
    # 1,000 tokens: ceil(1000/32) = 32 minus (1000 + 1 - 100) // 32 = 28 -> 4; 160 tokens: 5 - 61 // 32 = 4
    assert trtllm.models.v2_window_blocks(160, 100, 32) == 4 and trtllm.models.v2_window_blocks(140, 100, 32) == 4
    assert trtllm.models.v2_window_blocks(96, 64, 32) == 2      # 3 - (96 + 1 - 64) // 32 = 3 - 1


def test_gemma_4_refusals_name_the_engines_reason():
    with pytest.raises(ValueError, match="asserts pp_size == 1"):
        kvmem.estimate(_gemma4(), engine="trtllm", tokens=64, pp=2)
    with pytest.raises(ValueError, match="global_head_dim equal to head_dim"):
        kvmem.estimate(_gemma4(global_head_dim=64), engine="trtllm", tokens=64)
    with pytest.raises(ValueError, match="one byte quota that its runtime splits"):
        kvmem.capacity(_gemma4(), engine="trtllm", kv_memory=1 << 30)


# MiniMax-M3 (kvmem/engines/trtllm/minimax.py): MiniMaxM3KVCacheManagerV2 -- K and V of ceil(kv_heads / tp) heads on every
# layer, and a one-head index key of 128 in bf16 (fp16/fp32 when the cache is) on layers 3..N-1
# (trtllm@0462117e sparse/minimax_m3/cache_manager.py _extra_buffers_per_layer, _torch_dtype_for_index_cache)

def test_minimax_m3_keeps_kv_on_every_layer_and_a_bf16_index_key_on_layers_3_to_59():
    model = kvmem.get_model("minimax-m3")      # MiniMaxAI/MiniMax-M3's config.json: 60 layers, 4 KV heads x 128
    est = kvmem.estimate(model, engine="trtllm", tokens=1024)
    # K/V 60 x 2 x 4 x 128 x 2 B = 122,880 + index 57 x 128 x 2 B = 14,592 -> 137,472 B/token
    assert est.details.bytes_per_token == 137_472
    # the per-token cost TensorRT-LLM sizes its quota with: K and V only
    assert est.details.bytes_per_token_estimate == 122_880
    # 1,024 tokens = 32 whole blocks of 32: 1,024 x 137,472 = 140,771,328 B
    assert est.kv_bytes == 140_771_328
    assert any("MiniMaxM3KVCacheManagerV2" in note and "layers 3..59" in note for note in est.notes)


def test_minimax_m3_tp8_fp8_replicates_one_kv_head_and_keeps_the_index_key_in_bf16():
    est = kvmem.estimate("minimax-m3", engine="trtllm", tokens=1000, tp=8, kv_dtype="fp8")
    # ceil(4 / 8) = 1 head: 60 x 2 x 1 x 128 x 1 B = 15,360; the index key stays bf16, whole on each rank: 14,592
    assert est.details.bytes_per_token == 29_952
    # 1,000 tokens take 32 blocks of 32 = 1,024 slots: 1,024 x 29,952 = 30,670,848 B
    assert est.kv_bytes == 30_670_848


def test_minimax_m3_fp32_cache_keeps_an_fp32_index_key():
    est = kvmem.estimate("minimax-m3", engine="trtllm", tokens=32, kv_dtype="fp32")
    # 60 x 2 x 4 x 128 x 4 = 245,760 + 57 x 128 x 4 = 29,184 -> 274,944 B/token, 32 tokens = one block
    assert est.kv_bytes == 32 * 274_944


def test_minimax_m3_capacity_and_nvfp4_are_refused():
    with pytest.raises(ValueError, match="MiniMaxM3KVCacheManagerV2 \\(KVCacheManagerV2\\) as one byte quota"):
        kvmem.capacity("minimax-m3", engine="trtllm", kv_memory=10 << 30)
    with pytest.raises(ValueError, match="kv_dtype nvfp4: KVCacheManagerV2 adds per-layer block-scale buffers"):
        kvmem.estimate("minimax-m3", engine="trtllm", tokens=32, kv_dtype="nvfp4")


def _m3_text(**changes):
    config = json.loads(open("kvmem/data/models/minimax-m3.json").read())["config"]["text_config"]
    return kvmem.Model.from_hf_config({**config, "model_type": "minimax_m3", **changes})


def test_minimax_m3_text_config_under_the_registered_architecture_is_sized_as_the_vl_shell():
    # the checkpoint's text_config names MiniMaxM3SparseForCausalLM: the same 137,472 B/token
    assert kvmem.estimate(_m3_text(), engine="trtllm", tokens=32).kv_bytes == 32 * 137_472


def test_minimax_m3_under_an_architecture_the_registry_lacks_is_refused():
    with pytest.raises(ValueError, match="architectures\\[0\\] 'MiniMaxM3ForCausalLM': TensorRT-LLM's PyTorch backend "
                                         "registers MiniMax-M3 as MiniMaxM3SparseForCausalLM"):
        kvmem.estimate(_m3_text(architectures=["MiniMaxM3ForCausalLM"]), engine="trtllm", tokens=32)


def test_minimax_m3_sparse_layers_other_than_3_onwards_are_refused():
    config = json.loads(open("kvmem/data/models/minimax-m3.json").read())["config"]["text_config"]
    sparse = dict(config["sparse_attention_config"])
    sparse["sparse_attention_freq"] = [0] * 4 + [1] * 56
    sparse["sparse_disable_index_value"] = [0] * 4 + [1] * 56
    with pytest.raises(ValueError, match="keeps an index key on layers 3..59 whatever the config's"):
        kvmem.estimate(_m3_text(sparse_attention_config=sparse), engine="trtllm", tokens=32)
