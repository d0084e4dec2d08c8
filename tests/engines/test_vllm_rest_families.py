"""vllm mode on the last families of issue 31 (kvmem/engines/vllm/models.py): Ling-3 (bailing_hybrid, vLLM's
BailingMoeV3ForCausalLM), and what vLLM 0.33.0 does with Inkling-2 and HY-V4-VL. The bailing_hybrid layouts
are also judged by vLLM's own state shapes and block alignment (tests/oracles/test_vllm_states_oracle.py)."""

import pytest

import kvmem
from kvmem.engines import engine_estimate

LING = {"model_type": "bailing_hybrid", "architectures": ["BailingMoeV3ForCausalLM"], "num_hidden_layers": 20,
        "layer_group_size": 6, "num_attention_heads": 32, "head_dim": 64, "qk_rope_head_dim": 64, "kv_lora_rank": 512,
        "short_conv_kernel_size": 4, "hidden_size": 2048, "no_kda_lora": True, "torch_dtype": "bfloat16"}


def test_bailing_hybrid_kda_and_mla_layers_as_vllm_builds_them():
    model = kvmem.Model.from_hf_config(LING)
    # transformers' reading: MLA where (i + 1) % 6 == 0 -- layers 5, 11, 17; vLLM's _is_kda_layer adds 18 and 19
    # (after the last whole group of 6)
    assert [i for i, layer in enumerate(model.layers) if layer.kind == "mla"] == [5, 11, 17]
    e = engine_estimate(model, engine="vllm", tokens=1024)
    # KDA state: conv 3 x 32 x 64 x (4 - 1) x 2 B = 36,864 + recurrent 32 x 64 x 64 x 4 B (float32) = 524,288;
    # MLA 576 x 2 B = 1,152 B a token, block 128 x cdiv(561,152, 128 x 1,152) = 512, page 589,824 B.
    # 15 KDA layers in 3 groups of 5, 5 MLA layers: 1,024 tokens = 2 MLA blocks + 1 state block per KDA group
    assert e.details.block_size == 512 and e.details.page_bytes == [589_824]
    assert [g["kind"] for g in e.details.groups] == ["mamba", "mamba", "mamba", "mla"]
    assert e.total_bytes == (2 + 3) * 5 * 589_824 == 14_745_600


def test_bailing_hybrid_ssm_state_is_float32_whatever_the_option_says():
    model = kvmem.Model.from_hf_config(LING)
    e = engine_estimate(model, engine="vllm", tokens=1024, mamba_ssm_cache_dtype="bfloat16")
    assert e.total_bytes == 14_745_600
    assert any("float32" in note for note in e.notes)


@pytest.mark.parametrize("change, message", [
    ({"architectures": ["BailingHybridForCausalLM"]}, "goes to its Transformers backend, which raises for the KDA"),
    ({"no_kda_lora": False}, "expects no_kda_lora=True"),
    ({"head_dim": 128}, "config field 'head_dim' is 128: .* sets head_dim to qk_rope_head_dim \\(64\\)"),
    ({"linear_head_dim": 128}, "config field 'linear_head_dim' is 128"),
    ({"num_hidden_layers": 5}, "leaves this bailing_hybrid config no KDA layer"),
])
def test_bailing_hybrid_refusals_say_what_vllm_does(change, message):
    model = kvmem.Model.from_hf_config({**LING, **change})
    with pytest.raises(ValueError, match=message):
        engine_estimate(model, engine="vllm", tokens=16)


def test_bailing_hybrid_draft_is_refused():
    with pytest.raises(ValueError, match="bailing_hybrid_mtp"):
        engine_estimate(kvmem.Model.from_hf_config({**LING, "num_nextn_predict_layers": 1}), engine="vllm", tokens=16,
                        draft="mtp")
