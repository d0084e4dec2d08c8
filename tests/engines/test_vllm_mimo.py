"""kvmem's vllm mode on MiMo-V2-Flash, bytes derived by hand from vLLM 0.33.0.

vllm@v0.33.0 vllm/model_executor/models/mimo_v2.py MiMoV2DecoderLayer: a sliding layer
(hybrid_layer_pattern 1) is MiMoV2Attention(num_kv_heads=swa_num_key_value_heads,
head_dim=swa_head_dim, v_head_dim=swa_v_head_dim, sliding_window_size=sliding_window_size); a full
one takes num_key_value_heads, head_dim, v_head_dim. Attention.get_kv_cache_spec
(layers/attention/attention.py): SlidingWindowSpec / FullAttentionSpec with head_size_v, a page of
block x heads x (head_size + head_size_v) x 2 B (kv_cache_interface.py AttentionSpec);
kv_cache_planning.py unify_kv_cache_spec_page_size: smaller pages get larger blocks, a page that
does not divide the largest is padded to it. Checked against vLLM's planning:
tests/oracles/test_vllm_mimo_oracle.py.
"""

import pytest

import kvmem

MIMO = {"model_type": "mimo_v2_flash", "architectures": ["MiMoV2FlashForCausalLM"], "num_hidden_layers": 12,
        "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128,
        "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
        "sliding_window": 128, "sliding_window_size": 128, "hybrid_layer_pattern": [0, 1, 1, 1, 1, 1] * 2,
        "torch_dtype": "bfloat16", "max_position_embeddings": 262144}


def test_mimo_v2_flash_sliding_layers_own_shape_and_window():
    # full: 4 x (192 + 128) x 2 B = 2,560 B/token; sliding: 8 x (192 + 128) x 2 B = 5,120 B/token.
    # Pages unified at 16 x 5,120 = 81,920 B: full layers take blocks of 32.
    # 1,024 tokens: full cdiv(1,024, 32) = 32 blocks = 2,621,440 B; sliding (window 128, vLLM's own
    # sliding_window_size, not transformers' 129): 64 blocks allocated, (1,024 - 128) // 16 = 56 freed
    # -> 8 blocks = 655,360 B
    model = kvmem.Model.from_hf_config(MIMO)
    result = kvmem.estimate(model, engine="vllm", tokens=1024)
    assert result.per_layer == ((2_621_440,) + (655_360,) * 5) * 2


def test_mimo_v2_flash_v_width_defaults_to_the_k_width():
    # mimo_v2.py: v_head_dim=getattr(config, "swa_v_head_dim", None) -> head_dim: 8 x (192 + 192) x 2 B
    # = 6,144 B/token; the full page 16 x 2,560 = 40,960 B does not divide the sliding 16 x 6,144 =
    # 98,304 B, so it is padded to it (block 16 kept): full layers hold cdiv(1,024, 16) = 64 pages
    config = {k: v for k, v in MIMO.items() if k != "swa_v_head_dim"}
    result = kvmem.estimate(kvmem.Model.from_hf_config(config), engine="vllm", tokens=1024)
    assert result.per_layer[0] == 64 * 98_304
    assert result.per_layer[1] == 8 * 98_304                        # 64 - 56 freed blocks of 16
    assert any("padded to 98,304 B" in note for note in result.notes)


def test_mimo_v2_flash_without_the_swa_fields_is_refused():
    config = {k: v for k, v in MIMO.items() if k != "swa_head_dim"}
    with pytest.raises(ValueError, match="reads config field 'swa_head_dim'"):
        kvmem.estimate(kvmem.Model.from_hf_config(config), engine="vllm", tokens=1024)


def test_mimo_v2_flash_tp_must_divide_the_sliding_query_heads():
    model = kvmem.Model.from_hf_config({**MIMO, "swa_num_attention_heads": 48})
    with pytest.raises(ValueError, match=r"Total number of attention heads \(48, the sliding layers'"):
        kvmem.estimate(model, engine="vllm", tokens=1024, tp=32)


def test_padding_is_a_033_rule():
    config = {k: v for k, v in MIMO.items() if k != "swa_v_head_dim"}
    with pytest.raises(ValueError, match="cannot unify page sizes"):
        kvmem.estimate(kvmem.Model.from_hf_config(config), engine="vllm", tokens=1024, version="0.20.0")
