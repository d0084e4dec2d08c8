"""kvmem's vllm mode on the Mamba / linear-attention families, bytes derived by hand from vLLM 0.33.0.

Sources (vllm@v0.33.0): vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator
and MambaStateDtypeCalculator; each family's model file (its get_mamba_state_shape_from_config);
vllm/platforms/interface.py _align_hybrid_block_size; vllm/v1/kv_cache_interface.py MambaSpec,
MLAAttentionSpec. The same numbers against vLLM's own code: tests/oracles/test_vllm_states_oracle.py.
"""

import json
from pathlib import Path

import pytest

import kvmem
from kvmem.errors import EngineRefusal
from kvmem.units import cdiv

KIMI = "kimi-linear-48b-a3b"
# State pages a sequence holds per Mamba group in vLLM 0.33.0's default for a hybrid: --enable-prefix-caching is on
# (vllm/engine/arg_utils.py#L3075-L3080, config/model.py#L2279-L2281), so mamba_cache_mode "align"
# (model_executor/models/config.py#L762-L770): MambaSpec.max_memory_usage_bytes = 2 pages
# (v1/kv_cache_interface.py#L1135-L1141); 1 with --no-enable-prefix-caching ("none")
ALIGN = 2


def test_kimi_linear_kda_state_and_mla_pages():
    # vllm/models/kimi_k3/nvidia/model.py KimiLinearForCausalLM.get_mamba_state_shape_from_config ->
    # mamba_utils.py kda_state_shape: conv (3 x 32 heads x 128 / tp, kernel 4 - 1), recurrent
    # (32 / tp, 128, 128); kda_state_dtype: conv bf16 (mamba_cache_dtype auto = model dtype),
    # recurrent float32 ("auto").
    #   conv 12,288 x 3 x 2 B = 73,728 B; recurrent 32 x 128 x 128 x 4 B = 2,097,152 B -> 2,170,880 B
    # MLA (mla.py get_kv_cache_spec): (512 + 64) x 2 B = 1,152 B per token.
    # _align_hybrid_block_size: MLA hybrid -> multiple of 128: 128 x cdiv(2,170,880, 128 x 1,152) = 1,920
    # tokens; attention page 1,920 x 1,152 = 2,211,840 B, the KDA page padded to it.
    for tokens, mla_pages in ((1024, 1), (131072, 69)):        # cdiv(131,072, 1,920) = 69
        result = kvmem.estimate(KIMI, engine="vllm", tokens=tokens)
        assert result.per_layer[3] == mla_pages * 2_211_840     # layer 4 (1-indexed) is MLA
        assert result.per_layer[0] == ALIGN * 2_211_840         # a KDA layer: its padded state pages
        # 20 KDA layers' pages and, grouped by 7 (the MLA layers), a third KDA group's padding slot
        assert result.state_bytes == (20 + 1) * ALIGN * 2_211_840
    # 7 MLA layers; the padding slot is a state page, so K (the latent) is the MLA pages alone and V none
    long = kvmem.estimate(KIMI, engine="vllm", tokens=131072)
    assert (long.k_bytes, long.v_bytes) == (7 * 69 * 2_211_840, 0)


def test_kimi_linear_at_tp2():
    # conv 6,144 x 3 x 2 B = 36,864; recurrent 16 x 128 x 128 x 4 B = 1,048,576 -> 1,085,440 B;
    # block 128 x cdiv(1,085,440, 147,456) = 1,024 tokens, page 1,024 x 1,152 = 1,179,648 B (MLA: one
    # latent head on every rank)
    result = kvmem.estimate(KIMI, engine="vllm", tokens=1024, tp=2)
    assert result.per_layer[0] == ALIGN * 1_179_648 and result.per_layer[3] == 1_179_648
    assert result.state_bytes == (20 + 1) * ALIGN * 1_179_648       # with the padding slot of the third KDA group


def test_kimi_linear_speculative_conv_columns():
    # kda_state_shape: kernel - 1 + num_spec conv columns: 12,288 x (3 + 2) x 2 B = 122,880
    # + 2,097,152 = 2,220,032 B; block 128 x cdiv(2,220,032, 147,456) = 128 x 16 = 2,048 tokens (15 pages
    # of 147,456 B fall 8,192 B short), page 2,048 x 1,152 = 2,359,296 B
    result = kvmem.estimate(KIMI, engine="vllm", tokens=1024, num_speculative_tokens=2)
    assert result.per_layer[3] == 2_359_296


def test_kimi_linear_ssm_dtype_other_than_float32_is_refused():
    # kimi_gdn_linear_attn.py get_state_dtype keeps float32 whatever mamba_ssm_cache_dtype says
    with pytest.raises(ValueError, match="KDA layers keep their recurrent state in float32"):
        kvmem.estimate(KIMI, engine="vllm", tokens=1024, mamba_ssm_cache_dtype="bfloat16")
    float32 = kvmem.estimate(KIMI, engine="vllm", tokens=1024, mamba_ssm_cache_dtype="float32")
    assert float32.state_bytes == kvmem.estimate(KIMI, engine="vllm", tokens=1024).state_bytes


def test_minimax_is_refused_naming_vllm_and_why():
    # vllm/model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS: MiniMaxM1ForCausalLM "0.23.0"
    with pytest.raises(EngineRefusal) as refused:
        kvmem.estimate("minimax-m1", engine="vllm", tokens=1024)
    assert (refused.value.engine, refused.value.release) == ("vllm", "vLLM 0.33.0")
    assert refused.value.reason.startswith("vLLM 0.33.0 has no MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM")


def _model(**cfg):
    return kvmem.Model.from_hf_config({"torch_dtype": "bfloat16", "vocab_size": 1024, "intermediate_size": 256, **cfg})


GRANITE = dict(model_type="granitemoehybrid", architectures=["GraniteMoeHybridForCausalLM"], hidden_size=2048,
               num_attention_heads=16, num_key_value_heads=4, num_hidden_layers=4, mamba_n_heads=64,
               mamba_n_groups=1, mamba_d_state=128, mamba_d_conv=4, mamba_expand=2,
               layer_types=["mamba", "mamba", "mamba", "attention"])


def test_granitemoehybrid_mamba2_state_and_block():
    # granitemoehybrid.py get_mamba_state_shape_from_config -> mamba2_state_shape: inner = mamba_expand x
    # hidden = 4,096; conv (4,096 + 2 x 1 group x 128) x (4 - 1) x 2 B = 26,112 B; ssm 64 x 64 x 128 x 2 B
    # = 1,048,576 B -> 1,074,688 B. Attention (GraniteMoeHybridAttention: head_dim = 2,048 / 16 = 128)
    # 4 x 128 x 2 x 2 B = 2,048 B per token: block 16 x cdiv(1,074,688, 16 x 2,048) = 528 tokens,
    # page 528 x 2,048 = 1,081,344 B, the Mamba page padded to it.
    result = kvmem.estimate(_model(**GRANITE), engine="vllm", tokens=1024)
    assert result.per_layer == (ALIGN * 1_081_344,) * 3 + (2 * 1_081_344,)      # cdiv(1,024, 528) = 2 pages
    assert result.state_bytes == 3 * ALIGN * 1_081_344
    off = kvmem.estimate(_model(**GRANITE), engine="vllm", tokens=1024, enable_prefix_caching=False)
    assert off.per_layer == (1_081_344,) * 3 + (2 * 1_081_344,)         # "none": one state page


def test_granitemoehybrid_tp2_replicates_the_group():
    # extra_groups_for_head_shards: 1 group % tp 2 -> 2 groups; conv (4,096 + 2 x 2 x 128) / 2 x 3 x 2 B
    # = 13,824 B; ssm 32 x 64 x 128 x 2 B = 524,288 B -> 538,112 B; attention 2 heads: 1,024 B per token,
    # block 16 x cdiv(538,112, 16,384) = 528, page 540,672 B
    result = kvmem.estimate(_model(**GRANITE), engine="vllm", tokens=1024, tp=2)
    assert result.per_layer[0] == ALIGN * 540_672
    assert result.per_layer[3] == 2 * 540_672


def test_granitemoehybrid_head_dim_other_than_hidden_over_heads_is_refused():
    with pytest.raises(ValueError, match="head_dim = hidden_size // num_attention_heads = 128"):
        kvmem.estimate(_model(**GRANITE, head_dim=64), engine="vllm", tokens=1024)


def test_falcon_h1_every_layer_attention_and_mamba2():
    # falcon_h1.py: inner = mamba_d_ssm 1,536; conv (1,536 + 2 x 128) x 3 x 2 B = 10,752 B; ssm
    # 24 x 64 x 128 x 2 B = 393,216 B -> 403,968 B; attention head_dim 64 (config), 2 KV heads:
    # 512 B per token; block 16 x cdiv(403,968, 8,192) = 800, page 409,600 B
    model = _model(model_type="falcon_h1", architectures=["FalconH1ForCausalLM"], hidden_size=1024,
                   num_attention_heads=8, num_key_value_heads=2, head_dim=64, num_hidden_layers=2, mamba_d_ssm=1536,
                   mamba_n_heads=24, mamba_n_groups=1, mamba_d_state=128, mamba_d_conv=4, mamba_expand=2)
    result = kvmem.estimate(model, engine="vllm", tokens=1024)
    assert result.per_layer == ((2 + ALIGN) * 409_600,) * 2   # cdiv(1,024, 800) = 2 attention pages + the state's
    assert result.state_bytes == 2 * ALIGN * 409_600


def test_mamba_and_falcon_mamba_attention_free():
    # mamba.py -> mamba1_state_shape(intermediate_size = 2 x 768): conv 1,536 x (4 - 1) x 2 B = 9,216 B,
    # ssm 1,536 x 16 x 2 B = 49,152 B -> 58,368 B per layer and sequence, no speculative columns
    for model_type in ("mamba", "falcon_mamba"):
        model = _model(model_type=model_type, hidden_size=768, num_hidden_layers=3, expand=2, state_size=16,
                       conv_kernel=4)
        result = kvmem.estimate(model, engine="vllm", tokens=4096, batch=2)
        assert result.kv_bytes == 0
        assert result.state_bytes == 2 * 3 * 58_368


def test_mamba2_attention_free():
    # mamba2.py -> mamba2_state_shape: conv (8,192 + 2 x 8 x 128) x 3 x 2 B = 61,440 B, ssm 128 x 64 x 128
    # x 2 B = 2,097,152 B -> 2,158,592 B; at tp 4 (8 groups divide): conv 2,560 x 3 x 2 = 15,360, ssm
    # 32 x 64 x 128 x 2 = 524,288 -> 539,648 B
    model = _model(model_type="mamba2", hidden_size=4096, num_hidden_layers=2, expand=2, num_heads=128, head_dim=64,
                   n_groups=8, state_size=128, conv_kernel=4)
    assert kvmem.estimate(model, engine="vllm", tokens=1024).state_bytes == 2 * 2_158_592
    assert kvmem.estimate(model, engine="vllm", tokens=1024, tp=4).state_bytes == 2 * 539_648


LFM2 = Path(__file__).parent.parent / "fixtures" / "configs" / "new" / "lfm2.5-1.2b-finetune.json"


def test_lfm2_short_conv_from_conv_dim():
    # lfm2.py get_mamba_state_shape_from_config -> short_conv_state_shape(conv_dim 2,048, conv_L_cache 3):
    # 2,048 x 2 x 2 B (float16) = 8,192 B; attention head_dim 2,048 / 32 = 64, 8 KV heads: 2,048 B per
    # token; block 16 (16 x 2,048 = 32,768 >= 8,192), the conv page padded to 32,768 B.
    # 10 conv layers, 6 attention layers
    result = kvmem.estimate(kvmem.Model.from_hf_config(LFM2), engine="vllm", tokens=1024)
    assert result.per_layer[0] == ALIGN * 32_768
    assert result.per_layer[2] == 64 * 32_768                  # cdiv(1,024, 16) = 64 pages
    # 10 conv layers' pages, and 2 padding slots: grouped by 6 (the attention layers), the conv layers
    # take 2 groups of 6
    assert result.state_bytes == (10 + 2) * ALIGN * 32_768


def test_lfm2_refusals():
    config = json.loads(LFM2.read_text())
    del config["conv_dim"]
    # vLLM's own failure: lfm2.py#L356 reads config.conv_dim, which Lfm2Config does not define
    refusal = r"vLLM 0.33.0 cannot build this model: its LFM2 short-conv layers read config.conv_dim"
    with pytest.raises(ValueError, match=refusal):
        kvmem.estimate(kvmem.Model.from_hf_config(config), engine="vllm", tokens=1024)
    # LFM2-VL: its language model is the same Lfm2ForCausalLM on text_config (lfm2_vl.py#L713-L718)
    wrapper = {"model_type": "lfm2_vl", "architectures": ["Lfm2VlForConditionalGeneration"], "text_config": config,
               "vision_config": {"model_type": "siglip2_vision_model"}}
    with pytest.raises(ValueError, match=refusal):
        kvmem.estimate(kvmem.Model.from_hf_config(wrapper), engine="vllm", tokens=1024)
    with pytest.raises(ValueError, match="num_speculative_tokens with lfm2"):
        kvmem.estimate(kvmem.Model.from_hf_config(LFM2), engine="vllm", tokens=1024, num_speculative_tokens=1)


def test_olmo_hybrid_gated_deltanet_state():
    # olmo_hybrid.py get_mamba_state_shape_from_config -> gated_delta_net_state_shape: conv (2 x 8 x 128
    # + 16 x 128 = 4,096 channels) x (4 - 1) x 2 B = 24,576 B; ssm 16 x 128 x 128 x 2 B (no ssm-dtype hook:
    # the conv dtype) = 524,288 B -> 548,864 B. Attention head_dim = hidden // heads = 4,096 / 32 = 128
    # (OlmoHybridAttention), 8 KV heads: 4,096 B/token; block 16 x cdiv(548,864, 65,536) = 144, page
    # 144 x 4,096 = 589,824 B
    model = _model(model_type="olmo_hybrid", architectures=["OlmoHybridForCausalLM"], hidden_size=4096,
                   num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=4, linear_num_key_heads=8,
                   linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
                   linear_conv_kernel_dim=4,
                   layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"])
    result = kvmem.estimate(model, engine="vllm", tokens=1024)
    # olmo's GatedDeltaNet (olmo_gdn_linear_attn.py) exports no prefill checkpoints: "align" keeps the block
    assert result.per_layer == (ALIGN * 589_824,) * 3 + (cdiv(1024, 144) * 589_824,)
    assert result.state_bytes == 3 * ALIGN * 589_824
