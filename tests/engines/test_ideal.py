"""The ideal count: exact for real shapes, and the properties any correct count must have."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvmem
from kvmem import Layer, Model, estimate


def dense(kv_heads=8, heads=32, layers=4, head_dim=128, kind="full", window=0):
    layer = Layer(kind, kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=head_dim, window=window)
    return Model(name="toy", layers=(layer,) * layers, hidden_size=heads * head_dim, num_attention_heads=heads)


def test_matches_seed_formula_for_mha():
    model = dense(kv_heads=32, heads=32, layers=32)  # LLaMA-2-7B shape, the seed's example
    assert estimate(model, tokens=500, batch=32, kv_dtype="fp16").kv_bytes == kvmem.formula(
        bytes_per_element=2, batch=32, layers=32, kv_heads=32, head_dim=128, tokens=500) == 8_388_608_000


def test_k_and_v_split_and_per_layer():
    result = estimate(dense(), tokens=10, batch=2, kv_dtype="bf16")
    # per layer: 2 seqs x 10 tokens x 8 heads x 128 x 2 B = 40,960 for K, the same for V
    assert result.k_bytes == result.v_bytes == 4 * 40_960
    assert result.per_layer == (81_920,) * 4
    assert result.peak_bytes == result.kv_bytes
    assert result.to_dict()["kv_bytes"] == 327_680


def test_different_k_and_v_head_dims():
    layer = Layer("full", kv_heads=2, head_dim_k=192, head_dim_v=128)
    model = Model(name="kv-split", layers=(layer,), hidden_size=1024, num_attention_heads=8)
    result = estimate(model, tokens=1, kv_dtype="bf16")
    assert (result.k_bytes, result.v_bytes) == (2 * 192 * 2, 2 * 128 * 2)


def test_tensor_parallel_splits_and_replicates_heads():
    model = dense(kv_heads=8)
    one = estimate(model, tokens=100).kv_bytes
    assert estimate(model, tokens=100, tp=4).kv_bytes == one // 4
    assert estimate(model, tokens=100, tp=16).kv_bytes == one // 8  # one replicated head per rank
    assert estimate(model, tokens=100, tp=16).kv_bytes_all_devices == 2 * one
    with pytest.raises(ValueError, match="tp=3 must divide the 8 KV heads"):
        estimate(model, tokens=100, tp=3)


def test_pipeline_parallel_reports_the_largest_stage():
    model = dense(layers=5)
    result = estimate(model, tokens=10, pp=2)
    # 5 layers over 2 stages: 3 + 2 (the remainder goes to the stages before the last)
    assert result.per_layer[3:] == (0, 0) and result.kv_bytes == 3 * result.per_layer[0]


@settings(max_examples=60, deadline=None)
@given(tokens=st.integers(1, 10**6), batch=st.integers(1, 512), k=st.integers(2, 5))
def test_linear_in_tokens_and_batch(tokens, batch, k):
    model = dense()
    base = estimate(model, tokens=tokens, batch=batch).kv_bytes
    assert estimate(model, tokens=tokens * k, batch=batch).kv_bytes == k * base
    assert estimate(model, tokens=tokens, batch=batch * k).kv_bytes == k * base


@settings(max_examples=60, deadline=None)
@given(tokens=st.integers(1, 10**6), window=st.integers(1, 8192))
def test_sliding_layers_bounded_by_window(tokens, window):
    sliding = dense(kind="sliding", window=window)
    full = dense()
    assert estimate(sliding, tokens=tokens).kv_bytes == estimate(full, tokens=min(tokens, window)).kv_bytes
    assert estimate(sliding, tokens=tokens).kv_bytes <= estimate(full, tokens=window).kv_bytes


@settings(max_examples=60, deadline=None)
@given(groups=st.sampled_from([1, 2, 4, 8, 16, 32]), tokens=st.integers(1, 10**5))
def test_gqa_never_above_mha(groups, tokens):
    assert estimate(dense(kv_heads=groups), tokens=tokens).kv_bytes <= estimate(dense(kv_heads=32), tokens=tokens).kv_bytes


ORDERED = ["fp32", "bf16", "q8_0", "fp8", "q5_1", "q5_0", "q4_1", "q4_0", "nvfp4", "mxfp4", "int4", "int2"]


@settings(max_examples=60, deadline=None)
@given(i=st.integers(0, len(ORDERED) - 2), tokens=st.integers(1, 10**5), head_dim=st.sampled_from([64, 128, 256]))
def test_narrower_format_never_larger(i, tokens, head_dim):
    model = dense(head_dim=head_dim)
    wide, narrow = ORDERED[i], ORDERED[i + 1]
    assert kvmem.dtype(narrow).bits <= kvmem.dtype(wide).bits
    assert estimate(model, tokens=tokens, kv_dtype=narrow).kv_bytes <= estimate(model, tokens=tokens, kv_dtype=wide).kv_bytes


def test_huge_workloads_stay_exact_ints():
    result = estimate(dense(layers=128, kv_heads=128), tokens=10**9, batch=10**4)
    assert result.kv_bytes == 2 * 2 * 128 * 128 * 128 * 10**9 * 10**4
    assert isinstance(result.kv_bytes, int)


@pytest.mark.parametrize("bad, message", [
    (dict(tokens=0), "tokens must be a positive integer, got 0"),
    (dict(tokens="1.5"), "not a whole number"),
    (dict(tokens="abc"), "tokens: cannot read 'abc'"),
    (dict(tokens=10, batch=0), "batch must be a positive integer, got 0"),
    (dict(tokens=10, batch=2.5), "batch must be a positive integer, got 2.5"),
    (dict(tokens=10, batch="4"), "batch must be a positive integer, got '4'"),
    (dict(tokens=10, tp=0), "tp must be a positive integer"),
    (dict(tokens=10, engine="nope"), "unknown engine 'nope'; engines: ideal"),
    (dict(tokens=10, kv_dtype="fp12"), "unknown dtype 'fp12'"),
    (dict(tokens=10, block_size=16), "engine 'ideal' has no option 'block_size'"),
])
def test_bad_input(bad, message):
    with pytest.raises(ValueError, match=message):
        estimate(dense(), **bad)


def test_the_ideal_capacity_refuses_compressed_rows():
    from kvmem.layer import Compressor
    layer = Layer("compressed", kv_heads=1, head_dim_k=512, window=128, compressor=Compressor(128, 512))
    model = Model("v4-like", (layer,), hidden_size=4096, num_attention_heads=64)
    with pytest.raises(ValueError, match="a compressed layer's rows"):
        kvmem.capacity(model, engine="ideal", kv_memory="1GiB")


GPT_NEO_125M = {"model_type": "gpt_neo", "architectures": ["GPTNeoForCausalLM"], "hidden_size": 768, "num_heads": 12,
                "num_layers": 12, "attention_types": [[["global", "local"], 6]], "window_size": 256,
                "vocab_size": 50257, "max_position_embeddings": 2048, "torch_dtype": "float32"}


def test_gpt_neo_local_layers_keep_their_window():
    from kvmem.engines import engine_estimate
    model = Model.from_hf_config(GPT_NEO_125M)
    ideal = engine_estimate(model, engine="ideal", tokens=1024)
    # global: 1024 x 768 x 2 (K,V) x 4 B = 6,291,456; local: 256 x 768 x 2 x 4 = 1,572,864; six of each
    assert ideal.per_layer[:2] == (6_291_456, 1_572_864) and ideal.total_bytes == 47_185_920
    # transformers' cache keeps every token in every layer: 12 x 6,291,456
    assert engine_estimate(model, engine="hf-dynamic", tokens=1024).total_bytes == 75_497_472
    # under the window both count the same: 100 x 768 x 2 x 4 x 12 = 7,372,800
    assert engine_estimate(model, engine="ideal", tokens=100).total_bytes == 7_372_800


def test_gpt_neo_attention_types_must_cover_every_layer():
    from kvmem.engines import engine_estimate
    model = Model.from_hf_config({**GPT_NEO_125M, "attention_types": [[["global", "local"], 5]]})
    with pytest.raises(ValueError, match="expands to 10 layer kinds .* each of its 12 layers"):
        engine_estimate(model, engine="ideal", tokens=8)
