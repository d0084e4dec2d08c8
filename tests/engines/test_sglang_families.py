"""SGLang 0.5.23's opt-in families (kvmem/engines/sglang/families.py): a real value per declared family,
the refusals in SGLang's own words, and the families still left unchecked (each with why, shrinking only).

All estimates: 1,000 tokens, batch 1, tp 1, the checkpoint's dtype; every pool layer holds the
sequence's rows plus one padding page (slot 0), so 1,001 rows at page_size 1.
"""

import json
from pathlib import Path

import pytest

import kvmem
from kvmem.configs.families import FAMILIES
from kvmem.engines import ENGINES
from kvmem.engines.sglang.families import FAMILIES as DECLARED
from kvmem.engines.sglang.refusals import REFUSALS
from kvmem.errors import EngineRefusal

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "corpus"


def corpus(name: str) -> dict:
    data = json.loads((CORPUS / name).read_text())
    return data.get("config", data)


def sglang(cfg: dict, **kw):
    return kvmem.estimate(kvmem.Model.from_hf_config(cfg), engine="sglang", tokens=1000, **kw)


def test_glm_5_2_latent_on_78_layers_indexer_on_the_21_that_compute_top_k():
    # GLM-5.2: 78 MLA layers of 512 + 64 (bf16: 1,152 B), page 64 forced (DSA): 1,000 -> 1,024 rows + 64 padding
    #   = 1,088 x 1,152 x 78 = 97,763,328 B; indexer only where dsa_layer_skips_topk is False (21 layers):
    #   (1,024 + 64 + 1) // 64 = 17 pages x 64 x 132 B = 143,616 x 21 = 3,015,936 B
    result = sglang(corpus("zai-org--GLM-5.2.json"))
    assert result.kv_bytes == 1088 * 1152 * 78 + 17 * 64 * 132 * 21 == 100_779_264
    assert any("57 of 78 DSA layers reuse the previous layer's top-k" in n for n in result.notes)
    # GLM-5: every layer computes top-k
    glm5 = sglang(corpus("zai-org--GLM-5.json"))
    assert glm5.kv_bytes == 1088 * 1152 * 78 + 17 * 64 * 132 * 78


def test_gemma_4_two_pools_with_their_own_head_dims():
    # Gemma-4-26B-A4B (Gemma4ForConditionalGeneration, hybrid SWA): 25 sliding layers x 8 heads x (256 + 256)
    # x 2 B = 8,192 B; 5 full layers x 2 heads x (512 + 512) x 2 B = 4,096 B; 1,000 < the 1,024 window
    result = sglang(corpus("google--gemma-4-26B-A4B.json"))
    assert result.kv_bytes == 1001 * (25 * 8192 + 5 * 4096) == 225_505_280
    assert result.details.swa_window == 1024
    cap = kvmem.capacity(kvmem.Model.from_hf_config(corpus("google--gemma-4-26B-A4B.json")), engine="sglang",
                         kv_memory=40 * 2**30)
    assert cap.details.swa_layer_tokens == int(cap.details.full_layer_tokens * 0.8)


def test_gemma_4_unified_two_pools():
    # Gemma4UnifiedConfig defaults (Gemma4UnifiedForConditionalGeneration, hybrid SWA): 25 sliding layers x 4 heads x
    # (256 + 256) x 2 B = 4,096 B; 5 full layers x 4 heads x (512 + 512) x 2 B = 8,192 B; 1,000 < the 1,024 window
    from kvmem.oracles.sglang_families import default_case
    result = sglang(default_case("gemma4_unified_text"))
    assert result.kv_bytes == 1001 * (25 * 4096 + 5 * 8192) == 143_503_360
    assert result.details.swa_window == 1024


def test_kimi_linear_mla_pool_and_kda_state():
    # Kimi-Linear-48B-A3B: 7 MLA layers x (512 + 64) x 2 B = 1,152 B x 1,001 = 8,072,064 B;
    # 20 KDA layers x (conv 12,288 x 3 x 2 B + state 32 x 128 x 128 x 4 B) = 20 x 2,170,880 = 43,417,600 B
    result = sglang(corpus("moonshotai--Kimi-Linear-48B-A3B-Instruct.json"))
    assert result.kv_bytes == 1001 * 7 * 1152 == 8_072_064
    assert result.state_bytes == 20 * (12288 * 3 * 2 + 524_288 * 4) == 43_417_600


def test_mimo_v2_flash_swa_heads_and_v_head_dim():
    # MiMo-V2-Flash: 9 full layers x 4 heads x (192 + 128) x 2 B = 2,560 B; 39 sliding layers x 8 heads x
    # (192 + 128) x 2 B = 5,120 B holding the 129-token window (+1 padding row)
    result = sglang(corpus("XiaomiMiMo--MiMo-V2-Flash.json"))
    assert result.kv_bytes == 1001 * 9 * 2560 + 130 * 39 * 5120 == 49_021_440


def test_lfm2_attention_layers_and_short_conv_state():
    # LFM2.5-1.2B (float16): 6 attention layers x 8 heads x 128 x 2 B = 2,048 B x 1,001 = 12,300,288 B;
    # 10 short-conv layers x 2,048 channels x (3 - 1) x 2 B = 81,920 B, no SSM state
    cfg = corpus("FlameF0X--LFM2.5-1.2B-Distilled-Claude-4.6.json")
    result = sglang(cfg)
    assert (result.kv_bytes, result.state_bytes) == (1001 * 6 * 2048, 10 * 2048 * 2 * 2) == (12_300_288, 81_920)
    # tp 2 halves the conv channels; the state has no recurrent heads to divide (configs/lfm2.py)
    assert sglang(cfg, tp=2).state_bytes == 40_960


def test_lfm2_moe():
    # Lfm2MoeConfig defaults with a layer pattern set (attention at 2, 6, 10, 14, 18, 21 of 32 layers):
    # 6 x 8 heads x 128 x 2 B = 2,048 B per layer; 26 short-conv layers x 2,048 channels x 2 x 2 B
    from kvmem.oracles.transformers import default_config
    cfg = default_config("lfm2_moe").to_dict()
    cfg["layer_types"] = ["full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(32)]
    result = sglang(cfg)
    assert (result.kv_bytes, result.state_bytes) == (1001 * 6 * 2048, 26 * 2048 * 2 * 2) == (12_300_288, 212_992)


def test_laguna_is_hybrid_swa_when_it_has_a_window():
    # Laguna-XS.2: 10 full + 30 sliding (512) layers, 8 heads x 256 x 2 B = 4,096 B each
    result = sglang(corpus("poolside--Laguna-XS.2-FP8.json"))
    assert result.kv_bytes == 1001 * 10 * 4096 + 513 * 30 * 4096 == 104_038_400


def test_nemotron_nas_buffers_every_layer_and_refuses_variable_gqa():
    # Llama-3.3-Nemotron-Super-49B: 80 layers, 49 with attention (8 KV heads x 128), 31 no_op; SGLang's pool
    # has a buffer per layer: 80 x 8 x 256 x 2 B = 327,680 B per token
    cfg = corpus("nvidia--Llama-3_3-Nemotron-Super-49B-v1.json")
    assert sglang(cfg).kv_bytes == 1001 * 80 * 4096 == 328_007_680
    varied = json.loads(json.dumps(cfg))
    varied["block_configs"][0]["attention"]["n_heads_in_group"] = 16
    with pytest.raises(ValueError, match=r"Variable GQA \(VGQA\) is not yet supported for nemotron-nas"):
        sglang(varied)
    varied = json.loads(json.dumps(cfg))
    varied["block_configs"][0]["attention"].update(replace_with_linear=True, n_heads_in_group=None)
    with pytest.raises(ValueError, match=r"block_configs\[0\]\.attention\.replace_with_linear: SGLang 0.5.23"):
        sglang(varied)


def test_dbrx_and_mimo():
    # DBRX-Instruct (databricks/dbrx-instruct config.json): 40 layers, attn_config.kv_n_heads 8, head_dim
    # d_model 6,144 // n_heads 48 = 128: 8 x 256 x 2 B = 4,096 B per layer
    dbrx = {"architectures": ["DbrxForCausalLM"], "model_type": "dbrx", "d_model": 6144, "n_heads": 48,
            "n_layers": 40, "max_seq_len": 32768, "vocab_size": 100352, "torch_dtype": "bfloat16",
            "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
            "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}}
    assert sglang(dbrx).kv_bytes == 1001 * 40 * 4096 == 164_003_840
    # MiMo-7B-Base: 36 Qwen2 layers x 8 heads x 128; its MTP layer is the draft's, not in the target's pool
    assert sglang(corpus("XiaomiMiMo--MiMo-7B-Base.json")).kv_bytes == 1001 * 36 * 4096 == 147_603_456


def test_pure_mamba_models_keep_a_state_and_no_kv():
    # transformers' MambaConfig defaults: 32 layers, hidden 768 x expand 2 = 1,536 inner channels, conv 4,
    # d_state 16: conv 1,536 x 3 x 2 B + SSM 1,536 x 16 x 4 B (float32) = 107,520 B per layer and request
    from kvmem.oracles.transformers import default_config
    for family, arch in (("mamba", "MambaForCausalLM"), ("falcon_mamba", "FalconMambaForCausalLM")):
        cfg = dict(default_config(family).to_dict(), architectures=[arch])
        result = sglang(cfg, batch=2)
        assert (result.kv_bytes, result.state_bytes) == (0, 2 * 32 * 107_520), family
        # capacity: the state pool takes 1 GiB x 0.9 / 1.9 first: int((508,630,338 - 3,440,640) // 3,440,640)
        # = 146 slots; no KV cell, so SGLang's token count is the context length (none set here: 2,048)
        cap = kvmem.capacity(kvmem.Model.from_hf_config(cfg), engine="sglang", kv_memory=2**30)
        assert (cap.tokens, cap.details.max_mamba_cache_size, cap.details.max_running_requests) == (2048, 146, 48)


def test_mamba2_is_pure_ssm_and_needs_intermediate_size():
    # transformers' Mamba2Config defaults (Mamba-Codestral-7B's shape) + intermediate_size 8,192 (128 heads x 64):
    # 64 layers x (conv (8,192 + 2 x 8 groups x 128) x 3 x 2 B = 61,440 B + SSM 128 x 64 x 128 x 4 B = 4,194,304 B)
    # = 272,367,616 B a request; no KV layer
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config("mamba2").to_dict(), architectures=["Mamba2ForCausalLM"], intermediate_size=8192)
    result = sglang(cfg, batch=2)
    assert (result.kv_bytes, result.state_bytes) == (0, 2 * 64 * (61_440 + 4_194_304)) == (0, 544_735_232)
    # 40 GiB: the state pool takes 0.9 / 1.9 of it: int((20,344,055,612 - 272,367,616) // 272,367,616) = 73 slots
    cap = kvmem.capacity(kvmem.Model.from_hf_config(cfg), engine="sglang", kv_memory=40 * 2**30)
    assert (cap.tokens, cap.details.max_mamba_cache_size) == (2048, 73)
    # 1 GiB holds no request's state: SGLang's RuntimeError
    assert "Not enough GPU memory for hybrid" in kvmem.capacity(kvmem.Model.from_hf_config(cfg), engine="sglang",
                                                                kv_memory=2**30).refusal.reason
    with pytest.raises(ValueError, match=r"intermediate_size is not set: SGLang 0.5.23's Mamba2Config"):
        sglang({k: v for k, v in cfg.items() if k != "intermediate_size"})
    with pytest.raises(ValueError, match=r"intermediate_size 4096 is not num_heads x head_dim \(128 x 64\)"):
        sglang(dict(cfg, intermediate_size=4096))
    with pytest.raises(ValueError, match=r"Mamba2 mixer asserts .*then num_groups must equal 1.*tp 4, n_groups 2"):
        sglang(dict(cfg, n_groups=2), tp=4)
    assert sglang(dict(cfg, n_groups=1), tp=4).state_bytes > 0   # one group: replicated (extra groups), allowed


def test_falcon_h1_keeps_kv_and_a_mamba2_state_on_every_layer():
    # FalconH1Config defaults: 32 layers, each attention (8 KV heads x 128: 8 x 256 x 2 B = 4,096 B a token) and a
    # Mamba2 mixer: conv (1,024 + 2 x 1 group x 256) x 3 x 2 B = 9,216 B + SSM 128 heads x 8 x 256 x 4 B = 1,048,576 B
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config("falcon_h1").to_dict(), architectures=["FalconH1ForCausalLM"])
    result = sglang(cfg)
    assert (result.kv_bytes, result.state_bytes) == (1001 * 32 * 4096, 32 * (9216 + 1_048_576)) == (131_203_072,
                                                                                                    33_849_344)
    # tp 2: 4 KV heads; the one group is replicated (tp - n_groups = 1 group more): (1,536 + 2 x 256) / 2 = 1,024
    # conv channels x 3 x 2 B = 6,144 B; 64 of the 128 SSM heads: 131,072 x 4 B = 524,288 B
    half = sglang(cfg, tp=2)
    assert (half.kv_bytes, half.state_bytes) == (1001 * 32 * 2048, 32 * (6144 + 524_288)) == (65_601_536, 16_973_824)
    # capacity, 40 GiB: the state pool first, 0.9 / 1.9 of it: 20,344,055,613 // 33,849,344 = 601 slots (600 and the
    # padding slot, 20,343,455,744 B); the rest 22,606,217,216 B / (32 x 4,096 B a token) = 172,471 tokens
    cap = kvmem.capacity(kvmem.Model.from_hf_config(cfg), engine="sglang", kv_memory=40 * 2**30)
    assert (cap.tokens, cap.details.max_mamba_cache_size) == (172_471, 600)


# The config classes' defaults (transformers 5.24) with SGLang's architecture; hand counts, 1,001 rows
DEFAULTS = {
    "exaone4": 1001 * 32 * 32 * 256 * 2,             # 32 layers (sliding ones at full length) x 32 heads x 128
    "exaone_moe": 1001 * 32 * 32 * 256 * 2,
    "cohere2_moe": 1001 * 40 * 64 * 256 * 2,         # 40 layers x 64 heads x 128
    "afmoe": 1001 * 32 * 16 * 256 * 2,               # 32 layers x 16 heads x 128
    "gpt_bigcode": 1001 * 12 * 1 * 128 * 2,          # 12 layers, one (multi-query) head of 64
    "minicpm3": 1001 * 62 * (256 + 32) * 2,          # 62 MLA layers
    "sarvam_mla": 1001 * 32 * (512 + 64) * 2,        # 32 MLA layers
    "longcat_flash": 1001 * 56 * (512 + 64) * 2,     # 28 layers x 2 MLA attentions
    "qwen2_vl_text": 1001 * 80 * 8 * 256 * 2,
    "qwen2_5_vl_text": 1001 * 80 * 8 * 256 * 2,
    "ernie4_5_vl_moe_text": 1001 * 28 * 4 * 256 * 2,
    # HY-V4: 34 MLA layers, page 64: 1,088 rows x 1,152 B; indexer (17 pages x 64 x 132 B) on 10 layers
    "hy_v4": 1088 * 1152 * 34 + 17 * 64 * 132 * 10,
    # through SGLang's Transformers backend: SmolLM3 36 layers x 4 heads x 128; dots1 62 layers x 32 heads x 144
    "smollm3": 1001 * 36 * 4 * 256 * 2,
    "dots1": 1001 * 62 * 32 * 288 * 2,
    # Granite-4.0-H defaults: 1 attention layer x 32 heads x 128
    "granitemoehybrid": 1001 * 1 * 32 * 256 * 2,
}


@pytest.mark.parametrize("model_type", sorted(DEFAULTS))
def test_default_configs(model_type):
    from kvmem.oracles.transformers import default_config
    assert sglang(default_config(model_type).to_dict()).kv_bytes == DEFAULTS[model_type]


def test_granite_hybrid_state_widens_its_groups_when_tp_does_not_divide_them():
    # Granite-4.0-H defaults: 31 Mamba2 layers, n_groups 1, d_state 256, inner 8,192: conv 8,704 channels;
    # tp 2 adds tp - n_groups = 1 group (extra_groups_for_head_shards): (8,704 + 2 x 256) / 2 = 4,608 channels
    # x 3 x 2 B = 27,648 B; SSM 128 heads / 2 x 64 x 256 x 4 B = 4,194,304 B; per layer 4,221,952 B
    from kvmem.oracles.transformers import default_config
    result = sglang(default_config("granitemoehybrid").to_dict(), tp=2)
    assert result.state_bytes == 31 * (4608 * 3 * 2 + 64 * 64 * 256 * 4) == 130_880_512


# Through SGLang's Transformers backend (no EntryClass): the config classes' defaults run as decoders; one MHA pool,
# every layer at full length, num_attention_heads x hidden_size // num_attention_heads for K and for V
BACKEND = {
    "bert": 1001 * 12 * 12 * 128 * 2,                # 12 layers x 12 heads x (64 + 64) x 2 B = 36,864 B a token
    "bert-generation": 1001 * 24 * 16 * 128 * 2,     # 24 layers x 16 heads x 64
    "camembert": 1001 * 12 * 12 * 128 * 2, "data2vec-text": 1001 * 12 * 12 * 128 * 2,
    "ernie": 1001 * 12 * 12 * 128 * 2, "roberta": 1001 * 12 * 12 * 128 * 2,
    "roberta-prelayernorm": 1001 * 12 * 12 * 128 * 2, "roc_bert": 1001 * 12 * 12 * 128 * 2,
    "xlm-roberta": 1001 * 12 * 12 * 128 * 2, "xmod": 1001 * 12 * 12 * 128 * 2,
    "electra": 1001 * 12 * 4 * 128 * 2,              # 12 layers x 4 heads x 64 (hidden 256)
    "xlm-roberta-xl": 1001 * 36 * 32 * 160 * 2,      # 36 layers x 32 heads x 80 (hidden 2,560)
    "modernbert-decoder": 1001 * 22 * 12 * 128 * 2,  # 22 layers, the sliding ones at full length too
}


@pytest.mark.parametrize("model_type", sorted(BACKEND))
def test_transformers_backend_families(model_type):
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config(model_type).to_dict(), is_decoder=True)
    if model_type == "xmod":
        cfg["default_language"] = "en_XX"
    assert sglang(cfg).kv_bytes == BACKEND[model_type]
    # no tensor- or pipeline-parallel plan in the transformers model: SGLang's backend raises
    with pytest.raises(ValueError, match=r"SGLang 0.5.23 runs .* only through its Transformers backend, which raises "
                                         r"ValueError at tp 2: .* has no tensor-parallel plan"):
        sglang(cfg, tp=2)
    with pytest.raises(ValueError, match=r"at pp 2: .* has no pipeline-parallel plan"):
        sglang(cfg, pp=2)


def test_kosmos_2_5_through_the_multimodal_backend():
    # Kosmos2_5Config defaults (Kosmos2_5ForConditionalGeneration): 24 text layers, embed_dim 1,536, 16 heads of 96:
    # 16 x (96 + 96) x 2 B = 6,144 B a layer and token
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config("kosmos-2.5").to_dict(), architectures=["Kosmos2_5ForConditionalGeneration"])
    assert sglang(cfg).kv_bytes == 1001 * 24 * 6144 == 147_603_456
    with pytest.raises(ValueError, match=r"Kosmos2_5Model has no tensor-parallel plan"):
        sglang(cfg, tp=2)


def test_exaone_4_5_through_the_multimodal_backend():
    # EXAONE-4.5-33B's text config (tests/engines/test_trtllm_families.py): 64 layers x 8 KV heads x 128, the 48
    # sliding ones at full length (Exaone4_5_ForConditionalGeneration is not hybrid SWA): 4,096 B a layer and token
    from tests.engines.test_trtllm_families import EXAONE4_5_33B
    assert sglang(EXAONE4_5_33B).kv_bytes == 1001 * 64 * 4096 == 262_406_144
    assert sglang(EXAONE4_5_33B, tp=8).kv_bytes == 1001 * 64 * 512
    # tp 16 > 8 KV heads: the backend's RadixAttention divides them by tp (no replication as in SGLang's own models)
    with pytest.raises(ValueError, match=r"divides the 8 KV heads by tp 16 \(divide\(\) asserts divisibility"):
        sglang(EXAONE4_5_33B, tp=16)


def test_step3p5_sliding_layers_take_their_own_kv_heads():
    # Step3p5Config defaults + Step-3.5-Flash's pattern (12 full, 33 sliding layers, window 512) and
    # attention_other_setting.num_attention_groups 4: full 8 heads x 256 x 2 B = 4,096 B; sliding 4 x 256 x 2 B =
    # 2,048 B holding the 512-token window (+1 padding row)
    from kvmem.oracles.sglang_families import default_case
    cfg = default_case("step3p5")
    assert sglang(cfg).kv_bytes == 1001 * 12 * 4096 + 513 * 33 * 2048 == 83_871_744
    with pytest.raises(ValueError, match=r"with the window pool disabled SGLang 0.5.23 sizes every layer"):
        sglang(cfg, disable_hybrid_swa_memory=True)
    # the condensed Step-3.7-Flash config's architecture: no model file, no transformers class
    with pytest.raises(ValueError, match=r"SGLang 0.5.23 has no model file for Step3p7FlashForCausalLM"):
        sglang(dict(cfg, architectures=["Step3p7FlashForCausalLM"]))


def test_xmod_needs_its_default_language_under_sglang():
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config("xmod").to_dict(), is_decoder=True)
    with pytest.raises(ValueError, match=r"default_language is not set: SGLang 0.5.23's Transformers backend passes "
                                         r"no lang_ids"):
        sglang(cfg)


def test_refusals_name_sglangs_own_reason():
    for model_type, why in REFUSALS.items():
        # jamba is a base family (not opt-in): kvmem.engines.check_family honours the refusal all the same
        assert (FAMILIES[model_type].opt_in or model_type == "jamba") and not DECLARED.sizes(model_type), model_type
        assert why.startswith(("SGLang 0.5.23 has no model file for", "SGLang 0.5.23 cannot read this config",
                               "SGLang 0.5.23 runs ZAYA1 only")), model_type
    from kvmem.oracles.transformers import default_config
    hy_vl = dict(default_config("hy_v4_vl").to_dict(), architectures=["HYV4VLForConditionalGeneration"])
    large4 = dict(default_config("mistral_large4").to_dict(), architectures=["MistralLarge4ForConditionalGeneration"])
    for run, why in ((lambda: sglang(hy_vl), "SGLang 0.5.23 has no model file for HYV4VLForConditionalGeneration"),
                     (lambda: sglang(large4), "SGLang 0.5.23 has no model file for "
                                              "MistralLarge4ForConditionalGeneration"),
                     (lambda: kvmem.estimate("minimax-m1", engine="sglang", tokens=10),
                      "SGLang 0.5.23 has no model file for MiniMax-Text-01 / MiniMax-M1")):
        with pytest.raises(EngineRefusal) as refused:
            run()
        assert (refused.value.engine, refused.value.release) == ("sglang", "SGLang 0.5.23")
        assert refused.value.reason.startswith(why), refused.value.reason


@pytest.mark.parametrize("model_type, arch, why", [
    ("axk1", "AXK1ForCausalLM", "K and V do not fit the pool's one row a token"),
    ("youtu", "YoutuForCausalLM", "K and V do not fit the pool's one row a token"),
    ("axk2", "AXK2ForCausalLM", r"subscripts it \(modeling_axk2.py"),
    ("lfm3", "Lfm3ForCausalLM", "a RuntimeError on the first forward"),
])
def test_families_only_the_transformers_backend_could_run_are_refused(model_type, arch, why):
    # no EntryClass; transformers' class fails under SGLang's attention (judged by running it:
    # tests/oracles/test_sglang_families_oracle.py test_the_backend_fails_on_the_refused_families)
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config(model_type).to_dict(), architectures=[arch])
    with pytest.raises(ValueError, match=rf"does not size model_type '{model_type}': SGLang 0.5.23 has no model file "
                                         rf"for {arch} .*{why}"):
        sglang(cfg)


def test_mistral_4_through_the_transformers_backend_is_mha_of_the_expanded_heads():
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config("mistral4").to_dict(), architectures=["Mistral4ForCausalLM"])
    # 36 layers x 32 heads x (128 + 128) x 2 B = 589,824 B a token (not the 36 x (256 + 64) x 2 B latent), x 1,001 rows
    assert sglang(cfg).kv_bytes == 589_824 * 1001
    assert sglang(cfg, tp=4).kv_bytes == 589_824 // 4 * 1001      # 8 heads a rank
    with pytest.raises(ValueError, match=r"RadixAttention divides the 32 KV heads by tp 3"):
        sglang(cfg, tp=3)
    with pytest.raises(ValueError, match=r"per-head K of qk_nope_head_dim \+ qk_rope_head_dim \(128\) and V of "
                                         r"v_head_dim \(96\)"):
        sglang(dict(cfg, v_head_dim=96))
    with pytest.raises(ValueError, match=r"expands the latent to num_attention_heads \(32\) heads of K and V, while "
                                         r"the backend's RadixAttention \(and ModelConfig's pool\) holds "
                                         r"num_key_value_heads \(8\)"):
        sglang(dict(cfg, num_key_value_heads=8))
    wrapped = {"model_type": "mistral3", "architectures": ["Mistral3ForConditionalGeneration"],
               "text_config": default_config("mistral4").to_dict(), "vision_config": {"model_type": "pixtral"}}
    with pytest.raises(ValueError, match=r"Mistral4Config -> Mistral4ForCausalLM, not in SGLang's model registry"):
        sglang(wrapped)


def minimax_m3_vl(**sparse) -> dict:
    """MiniMax-M3 as SGLang runs it: transformers' minimax_m3_vl wrapper (its defaults) around MiniMax-M3's published
    text config (tests/fixtures/configs/new/minimax-m3.json), architecture MiniMaxM3SparseForConditionalGeneration."""
    from kvmem.oracles.transformers import default_config
    text = dict(json.loads((CORPUS.parent / "new" / "minimax-m3.json").read_text()), model_type="minimax_m3_vl_text")
    del text["architectures"]
    text["sparse_attention_config"] = {**text["sparse_attention_config"], **sparse}
    return dict(default_config("minimax_m3_vl").to_dict(), text_config=text,
                architectures=["MiniMaxM3SparseForConditionalGeneration"])


def test_minimax_m3_keeps_one_head_indexer_rows_on_its_sparse_layers_beside_the_mha_pool():
    cfg = minimax_m3_vl()
    # main pool: 60 layers x 4 KV heads x 128 x 2 (K, V) x 2 B = 122,880 B a token; indexer K (index value disabled on
    # every sparse layer): layers 3..59, 57 x 128 x 2 B = 14,592 B; 1,001 rows
    assert sglang(cfg).kv_bytes == (122_880 + 14_592) * 1001
    from kvmem.engines.sglang import cell_size, pools
    assert cell_size(kvmem.Model.from_hf_config(cfg)) == 137_472
    # SGLang logs the main pool, then the K-only indexer pool: 100,001 x 57 x 256 B = 1,459,214,592 B = 1.36 GB
    assert [p.log_line() for p in pools(kvmem.Model.from_hf_config(cfg), num_tokens=100_000)] == [
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: 5.72 GB, V size: 5.72 GB",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: 1.36 GB, V size: 0.00 GB"]
    # with the index value kept: 57 x 128 x 2 (K, V) x 2 B = 29,184 B; tp 4: one KV head a rank, 30,720 B main
    assert sglang(minimax_m3_vl(sparse_disable_index_value=[0] * 60)).kv_bytes == (122_880 + 29_184) * 1001
    assert sglang(cfg, tp=4).kv_bytes == (30_720 + 14_592) * 1001
    with pytest.raises(ValueError, match=r"kv_dtype fp8_e4m3: SGLang 0.5.23 keeps MiniMax-M3's indexer cache in fp8 "
                                         r"on Hopper"):
        sglang(cfg, kv_dtype="fp8_e4m3")
    # another architecture: no EntryClass, the Transformers backend's one MHA pool (the indexer keeps nothing there)
    assert sglang(dict(cfg, architectures=["MiniMaxM3VLForCausalLM"])).kv_bytes == 122_880 * 1001
    # a top-level text config: transformers' MiniMaxM3VLTextConfig consumes sparse_attention_config, SGLang finds none
    top = dict(cfg["text_config"], architectures=["MiniMaxM3SparseForCausalLM"])
    with pytest.raises(ValueError, match=r"Could not find sparse config"):
        sglang(top)


def test_zaya_in_transformers_layout_is_not_the_layout_sglang_serves():
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config("zaya").to_dict(), architectures=["ZayaForCausalLM"])
    with pytest.raises(ValueError, match=r"does not size model_type 'zaya': SGLang 0.5.23 runs ZAYA1 only in Zyphra's "
                                         r"Megatron-style layout"):
        sglang(cfg)


def test_configs_sglang_cannot_read():
    # DeepSeek-V4 in its reference format, MiniMax-M3 as MiniMax publishes it and as vLLM's config class names it
    m3 = json.loads((CORPUS.parent / "new" / "minimax-m3.json").read_text())
    for model_type, cfg in (("deepseek_ref", corpus("sgl-project--DeepSeek-V4-Flash-FP8.json")),
                            ("minimax_m3", m3), ("minimax_m3_text", dict(m3, model_type="minimax_m3_text"))):
        with pytest.raises(ValueError, match=rf"does not size model_type '{model_type}': SGLang 0.5.23 cannot read "
                                             rf"this config: model_type {model_type} is neither"):
            sglang(cfg)


# Opt-in families kvmem does not yet size the way SGLang 0.5.23 does (docs/research/families_sglang.md says why
# for each). This set may only shrink.
NOT_YET = {
    "inkling_text",
}


def test_every_opt_in_family_is_sized_refused_with_sglangs_reason_or_listed():
    spec = ENGINES["sglang"]
    opt_in = {t for t, family in FAMILIES.items() if family.opt_in}
    undecided = {t for t in opt_in if not spec.families.sizes(t) and t not in spec.refusals}
    assert undecided <= NOT_YET, sorted(undecided - NOT_YET)
    assert not (set(spec.refusals) & set(spec.families.names))
