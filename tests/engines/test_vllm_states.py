"""kvmem's vllm mode on the Mamba / linear-attention families, bytes derived by hand from vLLM 0.33.0.

Sources (vllm@v0.33.0): vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator
and MambaStateDtypeCalculator; each family's model file (its get_mamba_state_shape_from_config);
vllm/platforms/interface.py _align_hybrid_block_size; vllm/v1/kv_cache_interface.py MambaSpec,
MLAAttentionSpec. The same numbers against vLLM's own code: tests/oracles/test_vllm_states_oracle.py.
"""

import pytest

import kvmem

KIMI = "kimi-linear-48b-a3b"


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
        assert result.per_layer[0] == 2_211_840                 # a KDA layer: one padded state page
        assert result.state_bytes == 20 * 2_211_840
    # 7 MLA layers; grouped by 7, the 20 KDA layers take 3 groups and one padding layer of slots
    assert kvmem.estimate(KIMI, engine="vllm", tokens=131072).kv_bytes == 7 * 69 * 2_211_840 + 2_211_840


def test_kimi_linear_at_tp2():
    # conv 6,144 x 3 x 2 B = 36,864; recurrent 16 x 128 x 128 x 4 B = 1,048,576 -> 1,085,440 B;
    # block 128 x cdiv(1,085,440, 147,456) = 1,024 tokens, page 1,024 x 1,152 = 1,179,648 B (MLA: one
    # latent head on every rank)
    result = kvmem.estimate(KIMI, engine="vllm", tokens=1024, tp=2)
    assert result.per_layer[0] == result.per_layer[3] == 1_179_648
    assert result.state_bytes == 20 * 1_179_648


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
    with pytest.raises(ValueError, match=r"engine 'vllm' \(vLLM 0.33.0\) does not size model_type 'minimax': "
                                         r"vLLM 0.33.0 has no MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM"):
        kvmem.estimate("minimax-m1", engine="vllm", tokens=1024)
