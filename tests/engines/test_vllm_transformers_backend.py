"""Families vLLM 0.33.0 has no model file for, whose transformers class its Transformers backend takes and then
cannot run (kvmem/engines/vllm/__init__.py REFUSALS): Inkling-2, Inkling-2-Loop, HY-V4-VL. The reasons are
judged by building each model through vLLM's own backend and running one forward:
tests/oracles/test_vllm_transformers_backend_oracle.py."""

import pytest

import kvmem
from kvmem.errors import EngineRefusal
from kvmem.reach import REFUSED, family_reach

# the config classes' defaults (transformers 5.24 configuration_inkling2.py / configuration_hy_v4_vl.py), in the
# wrapper form the published checkpoints use
_INKLING2_TEXT = {"hidden_size": 4608, "num_hidden_layers": 48, "num_attention_heads": 48, "num_key_value_heads": 8,
                  "head_dim": 128, "swa_num_attention_heads": 48, "swa_num_key_value_heads": 8, "swa_head_dim": 128,
                  "sliding_window_size": 1024, "conv_kernel_size": 4, "vocab_size": 201024,
                  "moe_intermediate_size": 2304, "n_routed_experts": 384, "num_experts_per_tok": 8}
_HY_V4_VL_TEXT = {"hidden_size": 6144, "num_hidden_layers": 78, "num_attention_heads": 64, "q_lora_rank": 2048,
                  "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
                  "index_head_dim": 128, "index_n_heads": 32, "vocab_size": 120832, "intermediate_size": 18432,
                  "moe_intermediate_size": 2048, "n_routed_experts": 256, "num_experts_per_tok": 8,
                  "num_key_value_heads": 64, "index_topk": 2048,
                  # the class's derived default, written out: its own indexer on layer 0 and where (i - 1) % 4 == 0
                  "indexer_types": ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(78)]}
CASES = {
    "inkling2_text": ({"model_type": "inkling2", "architectures": ["Inkling2ForConditionalGeneration"],
                       "text_config": dict(_INKLING2_TEXT, model_type="inkling2_text")},
                      # 48 layers x 8 KV heads x 128 x 2 (K, V) x 2 B: the first token, every layer holds it
                      48 * 8 * 128 * 2 * 2,
                      "AttributeError: 'Inkling2BlockAttentionResidual' object has no attribute 'attn'"),
    "inkling2_loop_text": ({"model_type": "inkling2_loop", "architectures": ["Inkling2LoopForConditionalGeneration"],
                            "text_config": dict(_INKLING2_TEXT, model_type="inkling2_loop_text", hidden_size=2304,
                                                num_hidden_layers=24, num_attention_heads=24, swa_num_attention_heads=24,
                                                loop_layer_index_start=6, loop_layer_index_end=18, loop_num_passes=3)},
                           # 24 layers, then passes 2 and 3 over layers 6-17 in copies: 48 x 8 x 128 x 2 x 2 B
                           48 * 8 * 128 * 2 * 2,
                           "AttributeError: 'Inkling2LoopBlockAttentionResidual' object has no attribute 'attn'"),
    "hy_v4_vl_text": ({"model_type": "hy_v4_vl", "architectures": ["HYV4VLForConditionalGeneration"],
                       "text_config": dict(_HY_V4_VL_TEXT, model_type="hy_v4_vl_text")},
                      # 78 x (512 + 64) latent + rope key, plus a 128-wide indexer key on the 21 layers that run
                      # their own indexer (0, and i where (i - 1) % 4 == 0), x 2 B: 89,856 + 5,376
                      78 * (512 + 64) * 2 + 21 * 128 * 2,
                      "TypeError: 'NoneType' object is not subscriptable"),
}


def _model(cfg: dict) -> kvmem.Model:
    return kvmem.Model.from_hf_config({"torch_dtype": "bfloat16", **cfg})


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_read_and_sized_elsewhere_but_refused_in_vllm_with_the_failing_forward(model_type):
    cfg, first_token_bytes, error = CASES[model_type]
    model = _model(cfg)
    assert model.model_type == model_type
    assert kvmem.estimate(model, tokens=1).kv_bytes == first_token_bytes
    with pytest.raises(EngineRefusal) as refused:
        kvmem.estimate(model, engine="vllm", tokens=1024)
    assert (refused.value.engine, refused.value.release) == ("vllm", "vLLM 0.33.0")
    reason = refused.value.reason
    assert reason.startswith("vLLM 0.33.0 has no model file for " + cfg["architectures"][0]), reason
    assert "Transformers backend" in reason and reason.endswith(error), reason


def test_family_reach_shows_them_refused_with_that_reason():
    from kvmem.engines.vllm import REFUSALS
    table = family_reach()
    for model_type in CASES:
        assert table[model_type]["vllm"] == (REFUSED, REFUSALS[model_type])
