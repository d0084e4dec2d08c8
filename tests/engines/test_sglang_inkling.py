"""Inkling under SGLang 0.5.23 (kvmem.engines.sglang.inkling): two pools on local_layer_ids, a bfloat16 conv state a
request on every layer, Inkling's own ratio defaults; the numbers are SGLang's own on the CPU
(tests/oracles/test_sglang_inkling_oracle.py judges the same cases)."""

import pytest

import kvmem
from kvmem.engines.sglang import inkling

GIB = 1 << 30

# transformers 5.24 InklingTextConfig's defaults written out: 66 layers, 5 of every 6 sliding (55), 11 full
FLAGSHIP = dict(hidden_size=6144, num_hidden_layers=66, num_attention_heads=64, num_key_value_heads=8, head_dim=128,
                swa_num_attention_heads=64, swa_num_key_value_heads=16, swa_head_dim=128, sliding_window_size=512,
                local_layer_ids=[i for i in range(66) if (i + 1) % 6], sconv_kernel_size=4,
                max_position_embeddings=131072)


def wrap(**text) -> dict:
    return dict(model_type="inkling_mm_model", architectures=["InklingForConditionalGeneration"],
                torch_dtype="bfloat16", text_config=dict(model_type="inkling_text", vocab_size=512, **text))


def model(**changes):
    return kvmem.Model.from_hf_config(wrap(**{**FLAGSHIP, **changes}))


def test_the_flagship_rows_and_conv_state():
    e = kvmem.estimate(model(), engine="sglang", tokens=1000, batch=2)
    # full layers: 8 KV heads x (128 + 128) x 2 B = 4,096 B a token; 11 layers x (2 x 1,000 + 1 padding) rows
    # sliding layers: 16 x 256 x 2 B = 8,192 B; window sliding_window_size - 1 = 511: 55 x (2 x 511 + 1) rows
    assert e.kv_bytes == 11 * 2001 * 4096 + 55 * 1023 * 8192 == 551_079_936
    # conv: (4 - 1) x (2 x 8 x 128 + 2 x 16 x 128 + 2 x 6,144) x 2 B = 110,592 B a layer, x 66 layers, x 2 requests
    assert e.state_bytes == 2 * 66 * 3 * (2048 + 4096 + 12288) * 2 == 14_598_144


def test_the_flagship_capacity_on_20_gib_is_sglangs():
    c = kvmem.capacity(model(), engine="sglang", kv_memory=20 * GIB, max_model_len=32768)
    d = c.details
    # conv pool first: int((20 GiB x 0.1 / 1.1 - 7,299,072) // 7,299,072) = 266 slots (+1 padding slot);
    # the rest // (11 x 4,096 + 0.1 x 55 x 8,192) = 216,685 full tokens, SWA int(216,685 x 0.1) = 21,668;
    # requests: 266 slots // (3 + 2 extra-buffer slots) = 53
    assert (d.max_mamba_cache_size, c.tokens, d.swa_layer_tokens, d.max_running_requests) == (266, 216685, 21668, 53)
    assert d.mamba_bytes_per_request == 7_299_072
    assert any("swa_full_tokens_ratio 0.1" in note for note in c.notes)


def test_a_given_ratio_is_sglangs_to_use():
    c = kvmem.capacity(model(), engine="sglang", kv_memory=20 * GIB, swa_full_tokens_ratio=0.5,
                       mamba_full_memory_ratio=0.5)
    assert c.details.swa_layer_tokens == int(c.tokens * 0.5)
    # int((20 GiB x 0.5 / 1.5 - 7,299,072) // 7,299,072): 7,158,278,826.7 B hold 980.7 states, one fewer for the pad
    assert c.details.max_mamba_cache_size == 979


def test_tp_splits_the_heads_and_the_kv_conv_widths():
    one, two = (inkling.inkling_layout(model(), tp, kvmem.dtypes.dtype("bf16")) for tp in (1, 2))
    assert one["k_row"] == {"full": 2048, "swa": 4096} and two["k_row"] == {"full": 1024, "swa": 2048}
    # 3 x (2 x 4 x 128 + 2 x 8 x 128 + 2 x 6,144) x 2 B: the output convolutions stay whole
    assert two["states"][0] == (3 * (1024 + 2048 + 12288) * 2, 0)


@pytest.mark.parametrize("changes, message", [
    (dict(local_layer_ids=[]), "at least one SWA layer"),
    (dict(local_layer_ids=None), "at least one SWA layer"),
    (dict(sconv_kernel_size=None, conv_kernel_size=3), "reads only sconv_kernel_size"),
    (dict(layer_types=["hybrid"] * 66), "reads local_layer_ids alone"),
    (dict(hidden_size=None), "'hidden_size' is not set, and SGLang 0.5.23's InklingModelConfig makes it 1536"),
    (dict(num_attention_heads=48, num_key_value_heads=3, swa_num_attention_heads=48, swa_num_key_value_heads=3), None),
])
def test_refusals_say_sglangs_reason(changes, message):
    text = {k: v for k, v in {**FLAGSHIP, **changes}.items() if v is not None}
    if message is None:   # 3 KV heads, tp 2: neither divides the other (models/inkling_common/attn.py)
        with pytest.raises(ValueError, match="divides"):
            kvmem.estimate(kvmem.Model.from_hf_config(wrap(**text)), engine="sglang", tokens=10, tp=2)
        return
    with pytest.raises(ValueError, match=message):
        kvmem.estimate(kvmem.Model.from_hf_config(wrap(**text)), engine="sglang", tokens=10)


def test_options_inkling_asserts_against():
    for name in ("disable_radix_cache", "disable_hybrid_swa_memory"):
        with pytest.raises(ValueError, match=f"asserts.*{name}"):
            kvmem.estimate(model(), engine="sglang", tokens=10, **{name: True})


def test_a_text_only_config_is_refused_by_sglangs_registry():
    text = dict(FLAGSHIP, model_type="inkling_text", architectures=["InklingForCausalLM"], vocab_size=512)
    with pytest.raises(ValueError, match="no model file for InklingForCausalLM"):
        kvmem.estimate(kvmem.Model.from_hf_config(text), engine="sglang", tokens=10)


def test_a_budget_whose_slots_serve_no_request_is_refused():
    # 5 state slots a request: 2 GiB x 0.01 / 1.01 = 21.3 MB hold int((21.3 MB - 7.3 MB) // 7.3 MB) = 1 slot, and
    # 1 // 5 = 0 requests: SGLang's RuntimeError (resolve_max_num_reqs)
    c = kvmem.capacity(model(), engine="sglang", kv_memory=2 * GIB, mamba_full_memory_ratio=0.01)
    assert c.refusal is not None and "too small to serve any requests" in c.refusal.reason
    assert c.details.max_mamba_cache_size == 1


def test_the_default_mem_fraction_static_reserves_inklings_prefill_graph():
    # H100 (81,559 MiB): 512 + 1.5 x 8,192 + 2 x 256 + 128 = 13,440 MiB, + 58 prefill capture sizes x 8 MiB = 13,904:
    # round((81,559 - 13,904) / 81,559, 3) = 0.830 (a plain model: 0.835)
    from kvmem.engines.sglang.budget import prefill_graph_mib, prefill_graph_sizes
    assert len(prefill_graph_sizes(8192)) == 58 and prefill_graph_mib(["InklingForConditionalGeneration"], 81559 << 20) \
        == 464
    r = kvmem.fit(model(), gpu="h100-sxm-80gb", engine="sglang", context="32k", batch=4, weights_bytes=40 * GIB)
    assert any("mem_fraction_static for this GPU and InklingForConditionalGeneration: 0.830" in n for n in r.notes)
    plan = kvmem.plan(model(), gpu="h100-sxm-80gb", engine="sglang", context="32k", batch=4, weights_bytes=40 * GIB)
    assert [f.value for f in plan.flags if f.flag == "--mem-fraction-static"] == ["0.83"]


def test_a_draft_beside_inkling_is_refused_naming_sglangs_per_depth_pools():
    for spec in (dict(speculative_algorithm="NEXTN"),
                 dict(speculative_algorithm="EAGLE", speculative_draft_model_path="llama-3.1-8b")):
        with pytest.raises(ValueError, match="one draft worker per MTP depth"):
            kvmem.capacity(model(), engine="sglang", kv_memory=20 * GIB, **spec)
