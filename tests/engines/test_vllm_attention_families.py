"""kvmem's vllm mode on attention-only families added after the first engine checks, bytes derived by
hand from vLLM 0.33.0's model files (vllm/model_executor/models/<file>.py, cited per test); page =
block x KV heads per rank x (head_size + head_size_v) x 2 B (kv_cache_interface.py AttentionSpec).
Checked against vLLM's planning: tests/oracles/test_vllm_attention_families_oracle.py."""

import pytest

import kvmem
from kvmem.errors import EngineRefusal


def _model(**cfg):
    return kvmem.Model.from_hf_config({"torch_dtype": "bfloat16", "vocab_size": 1000, "intermediate_size": 100,
                                       "max_position_embeddings": 131072, **cfg})


@pytest.mark.parametrize("model_type,pattern_field", (("exaone4", "sliding_window_pattern"),
                                                      ("afmoe", "global_attn_every_n_layers")))
def test_exaone4_and_afmoe_sliding_layers_from_layer_types(model_type, pattern_field):
    # exaone4.py Exaone4Attention / afmoe.py AfmoeAttention: sliding_window = config.sliding_window where
    # config.layer_types[i] == "sliding_attention" (the config class: sliding unless (i + 1) % 4 == 0),
    # head_dim = config.head_dim. 8 KV heads x (64 + 64) x 2 B = 2,048 B/token, blocks of 16 (32,768 B).
    # 8,192 tokens: full 512 blocks = 16,777,216 B; sliding (4,096) 512 - (8,192 - 4,096) // 16 = 256 blocks
    model = _model(model_type=model_type, num_hidden_layers=4, hidden_size=2048, num_attention_heads=32,
                   num_key_value_heads=8, head_dim=64, sliding_window=4096, **{pattern_field: 4})
    result = kvmem.estimate(model, engine="vllm", tokens=8192)
    assert result.per_layer == (8_388_608,) * 3 + (16_777_216,)


def test_cohere2_and_cohere2_moe_windows_are_one_token_longer_in_vllm():
    # commandr.py CohereAttention / cohere2_moe.py: "cohere swa layer sees [pos - sliding_window, pos]",
    # so the layer's window is sliding_window + 1 = 4,097 (transformers holds 4,096). 8 KV heads x 128 x
    # 2 x 2 B = 4,096 B/token, pages of 65,536 B. At 4,112 tokens: cdiv(4,112, 16) = 257 blocks allocated,
    # (4,112 - 4,097) // 16 = 0 freed -> 257 blocks = 16,842,752 B (a window of 4,096 would free one)
    for model_type in ("cohere2", "cohere2_moe"):
        model = _model(model_type=model_type, num_hidden_layers=4, hidden_size=4096, num_attention_heads=32,
                       num_key_value_heads=8, sliding_window=4096, sliding_window_pattern=4)
        result = kvmem.estimate(model, engine="vllm", tokens=4112)
        assert result.per_layer[0] == 257 * 65_536
        assert result.per_layer[3] == 257 * 65_536                       # the full layer
        older = kvmem.estimate(model, engine="vllm", tokens=4112, version="0.20.0")
        assert older.per_layer[0] == 256 * 65_536                        # releases before the +1: 4,096


def test_dbrx_kv_heads_from_attn_config():
    # dbrx.py DbrxAttention: head_dim = d_model // n_heads = 6,144 / 48 = 128, KV heads
    # attn_config.kv_n_heads = 8: 8 x 128 x 2 x 2 B = 4,096 B/token; 1,024 tokens = 64 blocks x 65,536 B
    # = 4,194,304 B per layer, x 40 layers; tp 4: 2 heads per rank, a quarter of it
    model = _model(model_type="dbrx", architectures=["DbrxForCausalLM"], d_model=6144, n_heads=48, n_layers=40,
                   attn_config={"kv_n_heads": 8})
    assert kvmem.estimate(model, engine="vllm", tokens=1024).kv_bytes == 40 * 4_194_304
    assert kvmem.estimate(model, engine="vllm", tokens=1024, tp=4).kv_bytes == 40 * 4_194_304 // 4


def test_dbrx_head_dim_other_than_d_model_over_heads_is_refused():
    model = _model(model_type="dbrx", d_model=6144, n_heads=48, n_layers=2, head_dim=64,
                   attn_config={"kv_n_heads": 8})
    with pytest.raises(ValueError, match="head_dim = hidden_size // num_attention_heads = 128"):
        kvmem.estimate(model, engine="vllm", tokens=1024)


def test_qwen2_vl_text_model_is_qwen2():
    # qwen2_vl.py / qwen2_5_vl.py: the language model is Qwen2ForCausalLM on the text config (qwen2.py);
    # Qwen2.5-VL-7B's text: 28 layers x 4 KV heads x 128 x 2 x 2 B = 57,344 B/token; 1,024 tokens
    # = 64 blocks of 16 -> 28 x 64 x 16 x 2,048 B = 58,720,256 B
    for model_type in ("qwen2_vl_text", "qwen2_5_vl_text"):
        model = _model(model_type=model_type, num_hidden_layers=28, hidden_size=3584, num_attention_heads=28,
                       num_key_value_heads=4, use_sliding_window=False, sliding_window=32768)
        assert kvmem.estimate(model, engine="vllm", tokens=1024).kv_bytes == 58_720_256


def test_families_vllm_cannot_load_are_refused_with_the_reason():
    from kvmem.configs.families import FAMILIES
    from kvmem.engines.vllm import FAMILIES as VLLM_FAMILIES
    from kvmem.engines.vllm import REFUSALS
    assert set(REFUSALS) <= set(FAMILIES)
    assert not [t for t in REFUSALS if not FAMILIES[t].opt_in or VLLM_FAMILIES.sizes(t)]
    model = _model(model_type="xglm", num_layers=2, attention_heads=4, d_model=64)
    with pytest.raises(EngineRefusal) as refused:
        kvmem.estimate(model, engine="vllm", tokens=64)
    assert (refused.value.engine, refused.value.release) == ("vllm", "vLLM 0.33.0")
    assert refused.value.reason.startswith("vLLM 0.33.0's model registry") and \
        refused.value.reason.endswith("has no architecture for it")


def test_minicpm3_caches_per_head_k_and_v_not_the_latent():
    # minicpm3.py MiniCPM3Attention: Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads):
    # MiniCPM3-4B 40 heads x (64 + 32 = 96) for K and for V x 2 B = 15,360 B/token per layer (the latent
    # would be (256 + 32) x 2 = 576); blocks of 16 (minicpm3 is not an MLA model to vLLM's
    # model_arch_config_convertor.py): 1,024 tokens = 64 blocks -> 15,728,640 B per layer x 62
    model = _model(model_type="minicpm3", architectures=["MiniCPM3ForCausalLM"], hidden_size=2560,
                   num_attention_heads=40, num_key_value_heads=40, num_hidden_layers=62, q_lora_rank=768,
                   kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    assert kvmem.estimate(model, engine="vllm", tokens=1024).kv_bytes == 62 * 15_728_640
    assert kvmem.estimate(model, engine="vllm", tokens=1024, tp=2).kv_bytes == 62 * 15_728_640 // 2


def test_longcat_flash_two_mla_attentions_per_layer():
    # longcat_flash.py: DeepseekV2MLAAttention for i in range(2) per decoder layer: 28 layers -> 56
    # latents of (512 + 64) x 2 B = 1,152 B/token; FlashMLA blocks of 64: 1,024 tokens = 16 blocks
    # -> 56 x 16 x 64 x 1,152 B
    model = _model(model_type="longcat_flash", architectures=["LongcatFlashForCausalLM"], hidden_size=6144,
                   num_attention_heads=64, num_key_value_heads=64, num_layers=28, q_lora_rank=1536,
                   kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
    assert kvmem.estimate(model, engine="vllm", tokens=1024).kv_bytes == 56 * 16 * 64 * 1_152
    with pytest.raises(ValueError, match="pp > 1 with longcat_flash"):
        kvmem.estimate(model, engine="vllm", tokens=1024, pp=2)


def test_k_exaone_per_layer_windows():
    # exaone_moe.py ExaoneMoeAttention: a sliding layer's window is sliding_windows[i] where the config
    # lists them. 2 KV heads x (64 + 64) x 2 B = 512 B/token, pages of 8,192 B. At 8,192 tokens: window
    # 128 -> 512 - (8,192 - 128) // 16 = 8 blocks; window 4,096 -> 512 - 256 = 256 blocks; full 512
    model = _model(model_type="exaone_moe", architectures=["ExaoneMoeForCausalLM"], num_hidden_layers=3,
                   hidden_size=1024, num_attention_heads=16, num_key_value_heads=2, head_dim=64, sliding_window=4096,
                   layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                   sliding_windows=[128, 4096, None])
    result = kvmem.estimate(model, engine="vllm", tokens=8192)
    assert result.per_layer == (8 * 8_192, 256 * 8_192, 512 * 8_192)
    # with the hybrid manager off, vLLM promotes both windows into one group and refuses
    # (FullAttentionSpec.merge_window_sizes, kv_cache_interface.py)
    with pytest.raises(ValueError, match="must have the same window size"):
        kvmem.estimate(model, engine="vllm", tokens=8192, hybrid_kv_cache_manager=False)


def test_laguna_per_layer_heads_set_head_dim_without_a_config_head_dim():
    # laguna.py LagunaAttention: head_dim = config.head_dim or hidden_size // that layer's query heads
    # (num_attention_heads_per_layer); K and V keep num_key_value_heads. With head_dim given (the
    # published files): 2 KV heads x (128 + 128) x 2 B = 1,024 B/token on every layer
    config = dict(model_type="laguna", architectures=["LagunaForCausalLM"], num_hidden_layers=2, hidden_size=2048,
                  num_attention_heads=32, num_key_value_heads=2, num_attention_heads_per_layer=[32, 16],
                  layer_types=["full_attention", "full_attention"])
    assert kvmem.estimate(_model(**config, head_dim=128), engine="vllm", tokens=1024).per_layer == (64 * 16_384,) * 2
    with pytest.raises(ValueError, match=r"Total number of attention heads \(16, a layer's"):
        kvmem.estimate(_model(**config, head_dim=128), engine="vllm", tokens=1024, tp=32)


NAS_BLOCKS = [{"attention": {"no_op": False, "n_heads_in_group": 8}}, {"attention": {"no_op": True}},
              {"attention": {"no_op": False, "n_heads_in_group": 16}}]


def test_nemotron_nas_per_block_kv_heads():
    # nemotron_nas.py DeciLMDecoderLayer: 64 // 8 = 8 and 64 // 16 = 4 KV heads, head_dim 8,192 / 64 = 128,
    # no attention (no spec) on a no_op block: 8 x 256 x 2 B = 4,096 B/token (pages of 65,536 B) and
    # 2,048 B/token (blocks of 32 to match). 1,024 tokens: 64 and cdiv(1,024, 32) = 32 pages of 65,536 B
    model = _model(model_type="nemotron-nas", architectures=["DeciLMForCausalLM"], num_hidden_layers=3,
                   num_attention_heads=64, hidden_size=8192, num_key_value_heads=None, block_configs=NAS_BLOCKS)
    assert kvmem.estimate(model, engine="vllm", tokens=1024).per_layer == (64 * 65_536, 0, 32 * 65_536)


def test_nemotron_nas_replace_with_linear_is_refused():
    blocks = [*NAS_BLOCKS[:2], {"attention": {"replace_with_linear": True}}]
    model = _model(model_type="nemotron-nas", num_hidden_layers=3, num_attention_heads=64, hidden_size=8192,
                   num_key_value_heads=None, block_configs=blocks)
    with pytest.raises(ValueError, match=r"block_configs\[2\].attention.replace_with_linear: vLLM 0.33.0"):
        kvmem.estimate(model, engine="vllm", tokens=1024)


def test_gemma4_unified_text_is_sized_as_gemma4():
    # gemma4_unified.py Gemma4UnifiedForConditionalGeneration: the language model is Gemma4ForCausalLM on
    # config.text_config (gemma4.py, the rules kvmem's vllm mode already follows for gemma4_text; the
    # Gemma4Config hook of models/config.py covers both): the same config, the same pages
    config = dict(num_hidden_layers=12, hidden_size=2048, num_attention_heads=8, num_key_value_heads=4,
                  head_dim=256, global_head_dim=512, sliding_window=512)
    unified = kvmem.estimate(_model(model_type="gemma4_unified_text", **config), engine="vllm", tokens=4096)
    text = kvmem.estimate(_model(model_type="gemma4_text", **config), engine="vllm", tokens=4096)
    assert unified.per_layer == text.per_layer and unified.kv_bytes == text.kv_bytes > 0
    # sliding: 4 x (256 + 256) x 2 B = 4,096 B/token; full (global_head_dim 512): 8,192 B/token, pages of
    # 16 x 8,192 = 131,072 B, so sliding layers take blocks of 32: cdiv(4,096, 32) - (4,096 - 512) // 32
    # = 16 blocks of 131,072 B
    assert unified.per_layer[0] == 16 * 131_072


def test_ernie_4_5_vl_text_model_full_attention():
    # ernie45_vl_moe.py Ernie4_5_VLMoeAttention: head_dim = config.head_dim or hidden // heads, KV heads
    # num_key_value_heads, no window: 4 x (128 + 128) x 2 B = 2,048 B/token; 1,024 tokens = 64 pages of
    # 32,768 B per layer
    config = dict(model_type="ernie4_5_vl_moe_text", num_hidden_layers=2, hidden_size=2560, num_attention_heads=20,
                  num_key_value_heads=4, head_dim=128)
    assert kvmem.estimate(_model(**config), engine="vllm", tokens=1024).per_layer == (64 * 32_768,) * 2
    with pytest.raises(ValueError, match="gives every layer full attention"):
        kvmem.estimate(_model(**config, sliding_window=4096), engine="vllm", tokens=1024)


def test_gpt_bigcode_through_the_transformers_backend_keeps_one_kv_head():
    # registry.py: GPTBigCodeForCausalLM runs on the Transformers backend; transformers/base.py gives each layer
    # num_kv_heads = get_num_kv_heads (GPTBigCodeConfig.num_key_value_heads: 1 with multi_query), head_size
    # 1,536 / 12 = 128: a page of 16 x 1 x 256 x 2 B = 8,192 B; 4 layers x 64 pages for 1,024 tokens
    model = _model(model_type="gpt_bigcode", n_layer=4, n_head=12, n_embd=1536, multi_query=True, n_positions=8192)
    assert kvmem.estimate(model, engine="vllm", tokens=1024).total_bytes == 4 * 64 * 8_192
    mha = _model(model_type="gpt_bigcode", n_layer=4, n_head=12, n_embd=1536, multi_query=False, n_positions=8192)
    assert kvmem.estimate(mha, engine="vllm", tokens=1024).total_bytes == 4 * 64 * 12 * 8_192


def test_smollm3_sliding_only_on_its_layer_types_sliding_layers():
    # transformers/base.py: per_layer_sliding_window = sliding_window where layer_types[i] == "sliding_attention"
    # (SmolLM3Config: the NoPE layers, with use_sliding_window); the others full. 4 layers, 4 x 128 K/V:
    # a page of 16 x 4 x 256 x 2 B = 32,768 B; 1,024 tokens: full 64 pages, sliding (window 256)
    # 64 - (1,024 - 256) // 16 = 16
    model = _model(model_type="smollm3", num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
                   hidden_size=2048, use_sliding_window=True, sliding_window=256, no_rope_layers=[1, 0, 1, 0])
    assert kvmem.estimate(model, engine="vllm", tokens=1024).per_layer == (64 * 32_768, 16 * 32_768) * 2


def test_sarvam_mla_caches_the_latent():
    # sarvam.py SarvamMLAAttention: MultiHeadLatentAttentionWrapper -> MLAAttention's one latent row of
    # kv_lora_rank + qk_rope_head_dim; the MLA backend's blocks of 64 (flashmla.py: [64]): 1,024 tokens =
    # 16 pages of 64 x 576 x 2 B a layer
    model = _model(model_type="sarvam_mla", num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=16,
                   hidden_size=1024, q_lora_rank=256, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                   v_head_dim=128)
    assert kvmem.estimate(model, engine="vllm", tokens=1024).total_bytes == 2 * 16 * 64 * 576 * 2


def test_gpt_neo_is_refused_with_vllms_reason():
    model = _model(model_type="gpt_neo", num_layers=2, num_heads=4, hidden_size=256,
                   attention_types=[[["global", "local"], 1]])
    with pytest.raises(ValueError, match="vLLM 0.33.0 has no architecture for GPTNeoForCausalLM"):
        kvmem.estimate(model, engine="vllm", tokens=1024)
