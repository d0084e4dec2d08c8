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
    # 15 KDA layers in 3 groups of 5, 5 MLA layers: 1,024 tokens = 2 MLA blocks + 2 state blocks per KDA group
    # (mamba_cache_mode "align", vLLM 0.33.0's default for a hybrid: prefix caching on, vllm/engine/arg_utils.py
    # #L3075-L3080; MambaSpec.max_memory_usage_bytes, v1/kv_cache_interface.py#L1135-L1141); 1 with
    # --no-enable-prefix-caching
    assert e.details.block_size == 512 and e.details.page_bytes == [589_824]
    assert [g["kind"] for g in e.details.groups] == ["mamba", "mamba", "mamba", "mla"]
    assert e.total_bytes == (2 + 3 * 2) * 5 * 589_824 == 23_592_960
    off = engine_estimate(model, engine="vllm", tokens=1024, enable_prefix_caching=False)
    assert off.details.block_size == 512 and off.total_bytes == (2 + 3) * 5 * 589_824 == 14_745_600


def test_bailing_hybrid_ssm_state_is_float32_whatever_the_option_says():
    model = kvmem.Model.from_hf_config(LING)
    e = engine_estimate(model, engine="vllm", tokens=1024, mamba_ssm_cache_dtype="bfloat16")
    assert e.total_bytes == 23_592_960
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


INKLING = {"model_type": "inkling_mm_model", "architectures": ["InklingForConditionalGeneration"],
           "torch_dtype": "bfloat16",
           "text_config": {"model_type": "inkling_text", "hidden_size": 1024, "num_hidden_layers": 6,
                           "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
                           "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4, "swa_head_dim": 64,
                           "sliding_window_size": 256, "local_layer_ids": [0, 1, 2, 4], "conv_kernel_size": 4}}


def _inkling(**text):
    return kvmem.Model.from_hf_config({**INKLING, "text_config": {**INKLING["text_config"], **text}})


def test_inkling_attention_and_conv_state_pages():
    e = engine_estimate(_inkling(), engine="vllm", tokens=1024)
    # attention, blocks of 16: sliding 16 x 4 x 64 x 2 x 2 B = 16,384, full 16 x 2 x 128 x 2 x 2 B = 16,384;
    # conv state (block = window = kernel 4, no V, bf16): sliding layers 2 x 64 + 2 x 1,024 / 4 = 640 -> 1,024
    # wide, 4 x 4 x 1,024 x 2 B = 32,768; full layers 2 x 128 + 2 x 512 = 1,280 -> 2,048, 4 x 2 x 2,048 x 2 B = 32,768.
    # Pages unified at 32,768 (attention blocks of 32); buckets 4 / 2 / 4 / 2 layers, groups of 2: 6 groups
    assert e.details.page_bytes == [32_768] and len(e.details.groups) == 6
    # 1,024 tokens: full 32 blocks, sliding 32 - (1,024 - 256) // 32 = 8, conv 1 (256 - 1,020 // 4)
    assert e.total_bytes == (2 * 2 * 8 + 2 * 32 + 3 * 2 * 1) * 32_768 == 3_342_336
    assert e.state_bytes == 3 * 2 * 32_768       # the conv states
    c = kvmem.capacity(_inkling(), engine="vllm", kv_memory=1 << 30, max_model_len=8192)
    assert c.blocks == (1 << 30) // (32_768 * 2) == 16_384


def test_inkling_local_layers_are_local_layer_ids_alone():
    # transformers' layer_types is not read by vLLM's InklingModelConfig: without local_layer_ids every layer is full
    e = engine_estimate(_inkling(local_layer_ids=None, layer_types=["hybrid_sliding"] * 6), engine="vllm", tokens=16)
    assert {g["kind"] for g in e.details.groups} == {"full", "sliding"}     # attention full, the conv states
    assert [g["kind"] for g in e.details.groups].count("full") == 1


@pytest.mark.parametrize("change, message", [
    (dict(architectures=["InklingForCausalLM"]), "padded_vocab_size"),
    (dict(torch_dtype="float16"), "supports bfloat16 only"),
])
def test_inkling_refusals_say_what_vllm_does(change, message):
    with pytest.raises(ValueError, match=message):
        engine_estimate(kvmem.Model.from_hf_config({**INKLING, **change}), engine="vllm", tokens=16)


def test_inkling_fields_whose_defaults_differ_are_needed():
    text = {k: v for k, v in INKLING["text_config"].items() if k != "num_key_value_heads"}
    model = kvmem.Model.from_hf_config({**INKLING, "text_config": text})
    with pytest.raises(ValueError, match="'num_key_value_heads' is not set, and vLLM 0.33.0's InklingModelConfig "
                                         "defaults it to 4 where transformers' InklingTextConfig says 8"):
        engine_estimate(model, engine="vllm", tokens=16)


def test_inkling_sliding_fields_omitted_are_the_full_layers():
    # configs.py: swa_num_key_value_heads / swa_head_dim default to num_key_value_heads / head_dim (Inkling-Small's
    # published text_config sets no swa_* field); sliding layers then 2 heads x 128 like the full ones
    text = {k: v for k, v in INKLING["text_config"].items() if not k.startswith("swa_")}
    e = engine_estimate(kvmem.Model.from_hf_config({**INKLING, "text_config": text}), engine="vllm", tokens=1024)
    # every layer 16 x 2 x 128 x 2 x 2 B = 16,384 attention, conv 4 x 2 x 2,048 x 2 B = 32,768: blocks of 32
    assert e.details.page_bytes == [32_768]
    assert e.total_bytes == (4 * 8 + 2 * 32 + 6 * 1) * 32_768


def test_inkling_tp_above_the_kv_heads_is_refused():
    # sconv_swa_attn.py InklingConvState asserts tp <= the layer's KV heads (2 on the full layers)
    with pytest.raises(ValueError, match="at most their 2 KV heads"):
        engine_estimate(_inkling(), engine="vllm", tokens=16, tp=4)
