"""The newest families, read right: hand-derived bytes at 1k and 128k tokens, bf16, batch 1.

Each derivation cites the modeling code it follows (transformers 5.24 unless named). The
Kimi-Linear, MiniMax-M1, Nemotron-3 and LFM2 configs are verbatim files
(tests/fixtures/configs/new/SOURCES.md); for Gemma 4, GLM-5, MiMo-V2-Flash and DBRX no verbatim
file could be found, and the configs below carry the cache fields as the published text
configs give them (docs/research/new_families_a.md).
"""

from pathlib import Path

import pytest

import kvmem
from kvmem import ConfigError, Model
from tests.fixtures import ABRIDGED

NEW = Path(__file__).parent.parent / "fixtures" / "configs" / "new"
K, M = 1024, 131072


def ideal(model, tokens):
    e = kvmem.estimate(model, tokens=tokens, kv_dtype="bf16")
    return e.kv_bytes, e.state_bytes


def gemma4(layers, kv_heads, global_kv_heads, window, *, shared=0, k_eq_v=True, period=6):
    types = ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(layers)]
    return {"model_type": "gemma4", "text_config": {
        "model_type": "gemma4_text", "num_hidden_layers": layers, "num_attention_heads": 32, "hidden_size": 5376,
        "num_key_value_heads": kv_heads, "head_dim": 256, "global_head_dim": 512,
        "num_global_key_value_heads": global_kv_heads, "attention_k_eq_v": k_eq_v, "sliding_window": window,
        "layer_types": types, "num_kv_shared_layers": shared}}


def test_gemma_4_31b_global_layers_are_4_heads_of_512():
    # modeling_gemma4.py Gemma4TextAttention: full layers take per_layer_config's head_dim = global_head_dim
    # and, with attention_k_eq_v, num_global_key_value_heads; K and V are normed apart: two tensors.
    # sliding 50 x 16 x (256 + 256) x 2 B = 819,200 B/token up to the 1,024 window
    # full    10 x  4 x (512 + 512) x 2 B =  81,920 B/token
    model = Model.from_hf_config(gemma4(60, 16, 4, 1024))
    full = model.layers[5]
    assert (full.kind, full.kv_heads, full.head_dim_k, full.head_dim_v) == ("full", 4, 512, 512)
    assert ideal(model, K) == (819_200 * 1024 + 81_920 * 1024, 0) == (922_746_880, 0)
    assert ideal(model, M) == (819_200 * 1024 + 81_920 * M, 0) == (11_576_279_040, 0)


def test_gemma_4_26b_a4b():
    # sliding 25 x 8 x 512 x 2 = 204,800 B/token (window 1,024); full 5 x 2 x 1,024 x 2 = 20,480 B/token
    model = Model.from_hf_config(gemma4(30, 8, 2, 1024))
    assert ideal(model, K)[0] == 230_686_720 and ideal(model, M)[0] == 204_800 * 1024 + 20_480 * M


def test_gemma_4_e2b_shares_kv_and_keeps_its_global_heads_without_k_eq_v():
    # 35 layers, 4 sliding : 1 full; the last 20 read layers 0-14's KV (kv_sharing_modes "reuse").
    # Without attention_k_eq_v num_global_key_value_heads is not applied: full layers keep 1 KV head of 512.
    # owners: 12 sliding x 1 x 512 x 2 = 12,288 B/token (window 512); 3 full x 1 x 1,024 x 2 = 6,144 B/token
    model = Model.from_hf_config(gemma4(35, 1, 2, 512, shared=20, k_eq_v=False, period=5))
    assert model.kinds == {"full": 3, "sliding": 12, "shared": 20}
    assert model.layers[4].kv_heads == 1 and model.layers[4].head_dim_k == 512
    assert ideal(model, K)[0] == 12_288 * 512 + 6_144 * 1024 == 12_582_912
    assert ideal(model, M)[0] == 12_288 * 512 + 6_144 * M == 811_597_824


def test_gemma_4_last_layer_is_always_full_and_per_layer_config_overrides():
    cfg = gemma4(6, 8, 2, 128)
    cfg["text_config"]["layer_types"] = ["sliding_attention"] * 6     # Gemma4TextConfig forces the last one full
    cfg["text_config"]["per_layer_config"] = {"5": {"head_dim": 384, "num_key_value_heads": 3}}
    model = Model.from_hf_config(cfg)
    assert [layer.kind for layer in model.layers] == ["sliding"] * 5 + ["full"]
    assert (model.layers[5].kv_heads, model.layers[5].head_dim_k) == (3, 384)
    cfg["text_config"]["per_layer_config"] = {"5": {"sliding_window": 64}}
    with pytest.raises(ConfigError, match=r"per_layer_config\[5\] overrides 'sliding_window'"):
        Model.from_hf_config(cfg)


def test_gemma_4_is_sized_or_refused_by_each_engine_in_its_own_terms():
    model = Model.from_hf_config(gemma4(6, 8, 2, 128))
    assert kvmem.estimate(model, engine="hf-dynamic", tokens=64).kv_bytes > 0
    assert kvmem.estimate(model, engine="llama.cpp", tokens=64).kv_bytes > 0   # checked against llama.cpp's logs
    # vLLM 0.33 gemma4.py: per_layer_config's head_dim and KV heads per layer, as kvmem reads them;
    # the allocator checked against vLLM's own planning on Gemma-4-shaped models (tests/oracles)
    assert kvmem.estimate(model, engine="vllm", tokens=64).kv_bytes > 0
    # SGLang 0.5.23 keeps one head shape in its full pool (kvmem/engines/sglang): this config's two shapes are refused
    with pytest.raises(ValueError, match=r"SGLang's full pool has one head shape for all its layers"):
        kvmem.estimate(model, engine="sglang", tokens=64)
    # TensorRT-LLM's KVCacheManagerV2 (tests/engines/test_trtllm_families.py: per layer, windows by default)
    assert kvmem.estimate(model, engine="trtllm", tokens=64).kv_bytes > 0


GLM5 = {"model_type": "glm_moe_dsa", "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64,
        "hidden_size": 6144, "head_dim": 64, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192,
        "v_head_dim": 256, "q_lora_rank": 2048, "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048}


def test_glm_5_counts_the_indexer_key_as_vllm_keys_it_on_index_topk():
    # cache_utils.py DynamicIndexedLayer: latent [B,1,T,512] + rope key [B,1,T,64] + indexer key [B,T,128];
    # 78 x (512 + 64 + 128) x 2 B = 109,824 B/token (the indexer alone: 19,968 B, the -18% of the issue)
    model = Model.from_hf_config(GLM5)
    assert ideal(model, K)[0] == 109_824 * K == 112_459_776
    assert ideal(model, M)[0] == 109_824 * M == 14_394_851_328


def test_glm_5_indexer_only_on_full_indexer_layers():
    # configuration_glm_moe_dsa.py: index_topk_freq 4, offset 2 -> full where max(i - 1, 0) % 4 == 0
    model = Model.from_hf_config({**GLM5, "num_hidden_layers": 8, "index_topk_freq": 4})
    assert [layer.index_head_dim for layer in model.layers] == [128, 128, 0, 0, 0, 128, 0, 0]
    model = Model.from_hf_config({**GLM5, "num_hidden_layers": 4, "index_topk_pattern": "FSSF"})
    assert [layer.index_head_dim for layer in model.layers] == [128, 0, 0, 128]


def test_kimi_linear_7_mla_layers_and_20_kda_states():
    # linear_attn_config: full_attn_layers [4, 8, ..., 24, 27] (1-indexed) are MLA, the other 20 KDA.
    # MLA 7 x (512 + 64) x 2 B = 8,064 B/token.
    # KDA (modeling_kimi_linear.py): conv 3 x 32 x 128 = 12,288 channels x (4 - 1) x 2 B = 73,728 B
    #      + recurrent 32 x 128 x 128 x 4 B (fp32, .to(torch.float32)) = 2,097,152 B; x 20 = 43,417,600 B
    model = Model.from_hf_config(NEW / "kimi-linear-48b-a3b-instruct.json")
    assert model.kinds == {"mla": 7, "linear": 20}
    assert ideal(model, K) == (8_064 * K, 43_417_600) and ideal(model, M) == (8_064 * M, 43_417_600)
    # transformers keeps the whole 4-column conv window: 12,288 x 4 x 2 + 2,097,152 = 2,195,456 B x 20
    assert kvmem.estimate(model, engine="hf-dynamic", tokens=K, kv_dtype="bf16").state_bytes == 43_909_120


def test_minimax_m1_10_full_layers_of_80():
    # attn_type_list [0]*7 + [1], ten times: 10 full layers x 8 x (128 + 128) x 2 B = 40,960 B/token;
    # 70 lightning layers, state [64 heads, 128, 128] in bf16 (modeling_minimax.py) = 2,097,152 B each
    model = Model.from_hf_config(NEW / "minimax-m1.json")
    assert model.kinds == {"full": 10, "linear": 70}
    assert ideal(model, K) == (41_943_040, 146_800_640) and ideal(model, M) == (5_368_709_120, 146_800_640)
    assert kvmem.estimate(model, engine="hf-dynamic", tokens=K, kv_dtype="bf16").state_bytes == 146_800_640


def test_nemotron_3_state_in_its_float32_cache_dtype():
    # 6 attention layers x 2 KV heads x (128 + 128) x 2 B = 6,144 B/token; 23 Mamba2 layers:
    # conv (64 x 64 + 2 x 8 x 128 = 6,144 channels) x 3 x 2 B = 36,864 B + ssm 64 x 64 x 128 x 4 B
    # (mamba_ssm_cache_dtype float32) = 2,097,152 B -> 2,134,016 B x 23 = 49,082,368 B
    model = Model.from_hf_config(NEW / "nemotron-3-nano-30b-a3b.json")
    assert ideal(model, K) == (6_144 * K, 49_082_368) and ideal(model, M) == (6_144 * M, 49_082_368)


def test_nemotron_3_layer_count_from_layers_block_type_alone():
    cfg = {"model_type": "nemotron_h", "layers_block_type": ["mamba", "attention", "moe", "mamba"],
           "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "hidden_size": 2688,
           "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4}
    assert Model.from_hf_config(cfg).kinds == {"full": 1, "linear": 2, "none": 1}


def test_lfm2_short_convolutions():
    # layer_types: 6 full_attention (8 KV heads x 64) and 10 conv; fp16 checkpoint.
    # KV 6 x 8 x (64 + 64) x 2 B = 12,288 B/token; conv state 2,048 channels x (3 - 1) x 2 B x 10 = 81,920 B
    model = Model.from_hf_config(NEW / "lfm2.5-1.2b-finetune.json")
    assert model.kinds == {"full": 6, "linear": 10}
    assert kvmem.estimate(model, tokens=K).kv_bytes == 12_288 * K
    assert ideal(model, M) == (12_288 * M, 81_920)


def test_mimo_v2_flash_reads_its_swa_fields():
    # hybrid_layer_pattern: 9 full (4 KV heads) and 39 sliding (swa_num_key_value_heads 8), K 192 / V 128;
    # the window holds sliding_window_size + 1 = 129 tokens (configuration_mimo_v2_flash.py)
    # full 9 x 4 x 320 x 2 = 23,040 B/token; sliding 39 x 8 x 320 x 2 = 199,680 B/token up to 129
    cfg = {"model_type": "mimo_v2_flash", "num_hidden_layers": 48, "num_attention_heads": 64,
           "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128, "hidden_size": 4096,
           "sliding_window_size": 128, "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
           "swa_num_attention_heads": 64,
           "hybrid_layer_pattern": [0 if i == 0 or (i + 1) % 6 == 0 else 1 for i in range(48)]}
    model = Model.from_hf_config(cfg)
    assert model.kinds == {"full": 9, "sliding": 39}
    assert ideal(model, K)[0] == 23_040 * K + 199_680 * 129 == 49_351_680
    assert ideal(model, M)[0] == 23_040 * M + 199_680 * 129


def test_dbrx_kv_heads_from_attn_config():
    # modeling_dbrx.py: num_key_value_heads = attn_config.kv_n_heads (8); head_dim 6144 / 48 = 128
    # 40 x 8 x (128 + 128) x 2 B = 163,840 B/token
    cfg = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40, "max_seq_len": 32768,
           "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000}}
    assert ideal(Model.from_hf_config(cfg), K)[0] == 163_840 * K == 167_772_160


def test_nemotron_nas_block_configs():
    # vllm nemotron_nas.py: no cache where attention.no_op or replace_with_linear, else
    # num_attention_heads // n_heads_in_group KV heads: 64 // 8 = 8 and 64 // 16 = 4, head_dim 8192 / 64 = 128
    # (8 + 4) x (128 + 128) x 2 B = 6,144 B/token
    blocks = [{"attention": {"no_op": False, "n_heads_in_group": 8, "replace_with_linear": False}},
              {"attention": {"no_op": True, "n_heads_in_group": None}},
              {"attention": {"replace_with_linear": True}},
              {"attention": {"n_heads_in_group": 16}}]
    cfg = {"model_type": "nemotron-nas", "num_hidden_layers": 4, "num_attention_heads": 64, "hidden_size": 8192,
           "num_key_value_heads": None, "block_configs": blocks}
    model = Model.from_hf_config(cfg)
    assert [(layer.kind, layer.kv_heads) for layer in model.layers] == [("full", 8), ("none", 0), ("none", 0),
                                                                          ("full", 4)]
    assert ideal(model, K)[0] == 6_144 * K
    blocks[0]["attention"]["window_length"] = 4096
    with pytest.raises(ConfigError, match=r"block_configs\[0\].attention sets 'window_length'"):
        Model.from_hf_config(cfg)


def test_nemotron_3_moe_blocks_count_their_experts():
    # 23 "E" blocks: 128 relu2 experts x (up + down) x 2,688 x 1,856 + one shared expert 2 x 2,688 x 3,712
    # + router 2,688 x 128; 23 Mamba2 blocks, 6 attention blocks, untied 131,072 x 2,688 embeddings:
    # 31.58B in all, 3.23B read per token (6 experts): the model card's "31.6B total, 3.2B active"
    model = Model.from_hf_config(NEW / "nemotron-3-nano-30b-a3b.json")
    assert model.facts.moe.shared_intermediate_size == 3712
    assert model.params_total == 31_577_937_344 and model.params_active == 3_227_751_872


def test_new_families_have_no_parameter_count_until_one_is_checked():
    # fit then asks for the weight bytes (or reads them from the checkpoint's headers); MiniMax-M1 and the
    # gemma-3n presets have their count now (tests/configs/test_params_new.py): an abridged gemma-3n config
    # (no vocab_size, no intermediate_size: tests/fixtures/configs) has none
    model = kvmem.Model.from_hf_config(ABRIDGED, name="gemma-3n-e2b-abridged")
    assert model.params_total is None
    with pytest.raises(ValueError, match="has no parameter count"):
        kvmem.fit(model, gpu="h100-sxm-80gb", context=4096, engine="ideal")


def test_gemma_4_bidirectional_all_halves_the_window():
    # configuration_gemma4.py: use_bidirectional_attention "all" -> sliding_window // 2 + 1 (512 -> 257);
    # "vision" only unmasks image tokens
    cfg = gemma4(6, 8, 2, 512)
    cfg["text_config"]["use_bidirectional_attention"] = "all"
    assert Model.from_hf_config(cfg).layers[0].window == 257
    cfg["text_config"]["use_bidirectional_attention"] = "vision"
    assert Model.from_hf_config(cfg).layers[0].window == 512


def test_mamba2_is_attention_free():
    # MambaConfig defaults of transformers' Mamba2 (Codestral-Mamba-like): 64 layers, 128 heads x 64 = 8,192
    # inner, 8 groups, state 128, conv 4 (modeling_mamba2.py Mamba2Mixer):
    # conv (8,192 + 2 x 8 x 128 = 10,240 channels) x 3 x 2 B = 61,440 B + ssm 128 x 64 x 128 x 2 B = 2,097,152 B
    # -> 2,158,592 B x 64 layers; transformers keeps 4 conv columns and an fp32 state: 4,276,224 B x 64
    cfg = {"model_type": "mamba2", "num_hidden_layers": 64, "hidden_size": 4096, "num_heads": 128, "head_dim": 64,
           "expand": 2, "n_groups": 8, "state_size": 128, "conv_kernel": 4, "vocab_size": 32768}
    model = Model.from_hf_config(cfg)
    assert model.kinds == {"linear": 64} and model.num_attention_heads == 0
    assert ideal(model, K) == (0, 2_158_592 * 64) == ideal(model, M)
    assert kvmem.estimate(model, engine="hf-dynamic", tokens=K, kv_dtype="bf16").state_bytes == 4_276_224 * 64
    assert kvmem.compare_strategies(model, tokens=K)        # no architecture variant, no crash


@pytest.mark.parametrize("name", ["qwen3.5-27b", "nemotron-h-8b", "nemotron-3-nano-30b-a3b"])
def test_the_default_mode_keeps_the_state_in_the_dtype_the_config_names_as_sglang_does(name):
    # mamba_ssm_dtype / mamba_ssm_cache_dtype float32: the recurrent state in fp32, the conv window
    # (kernel - 1 columns) in bf16 -- what SGLang's MambaPool allocates (its mamba_ssm_dtype float32)
    ideal_state = kvmem.estimate(name, tokens=4096).state_bytes
    assert ideal_state == kvmem.estimate(name, engine="sglang", tokens=4096).state_bytes
    model = kvmem.get_model(name)
    state = next(layer.state for layer in model.layers if layer.state)
    per_layer = state.conv_channels * (state.conv_kernel - 1) * 2 + state.ssm_elements * 4
    assert state.ssm_dtype == "fp32" and ideal_state == per_layer * model.count("linear")
