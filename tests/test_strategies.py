"""What-if strategies (kvmem/strategies/): eviction, shared prefix, offload, quantisation,
paged vs contiguous allocation, architecture variants and the side-by-side table.

Most arithmetic uses Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B
= 131,072 B per token.
"""

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvmem
from kvmem import Eviction, Layer, Model, estimate
from kvmem.engines import ENGINES
from kvmem.engines import ideal as ideal_engine
from kvmem.strategies import (
    QuantRow,
    allocation_sweep,
    apply_strategies,
    architecture_variants,
    offload_transfer_seconds,
    quality_results,
    quantization_options,
    quantized_estimate,
    request_lengths,
    simulate_admission,
)
from kvmem.units import cdiv

LLAMA = kvmem.get_model("llama-3.1-8b")
PER_TOKEN = 32 * 8 * 128 * 2 * 2  # 131,072 B


def toy(kind="full", window=0, layers=2, kv_heads=2, head_dim=8, heads=4):
    layer = Layer(kind, kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=head_dim, window=window)
    return Model(name="toy", layers=(layer,) * layers, hidden_size=heads * head_dim, num_attention_heads=heads)


# --------------------------------------------------------------------------- Eviction

def test_eviction_policies_and_defaults():
    assert PER_TOKEN == 131_072
    s = Eviction("streaming", sink=4, window=1020)
    assert (s.policy, s.cap, s.held_tokens(8192), s.held_tokens(500)) == ("streaming", 1024, 1024, 500)
    h = Eviction("H2O", budget=1024)
    assert (h.policy, h.recent, h.cap) == ("h2o", 512, 1024)  # recent defaults to half the budget
    k = Eviction("snapkv", budget=1024, new_tokens=100)
    # the prompt (8192 - 100) is compressed to 1024; the 100 decoded tokens are all kept
    assert (k.observation_window, k.held_tokens(8192), k.held_tokens(600)) == (32, 1124, 600)
    assert Eviction("streamingllm", window=10).sink == 4 and Eviction("sink", window=10).policy == "streaming"
    assert s.to_dict() == {"policy": "streaming", "sink": 4, "window": 1020}


@pytest.mark.parametrize("kwargs, message", [
    (dict(policy="lru", budget=8), "unknown eviction policy 'lru'; policies: streaming, h2o, snapkv"),
    (dict(policy="h2o", budget=0), "budget must be a positive integer, got 0"),
    (dict(policy="h2o"), r"Eviction\('h2o'\) needs budget="),
    (dict(policy="h2o", budget=8, recent=9), "recent must not exceed budget, got recent=9 > budget=8"),
    (dict(policy="streaming", sink=0, window=0), "sink \\+ window must be at least 1 token, got 0 \\+ 0"),
    (dict(policy="streaming", sink=4), r"needs window="),
    (dict(policy="streaming", window=-1), "window must be a non-negative integer, got -1"),
    (dict(policy="streaming", window=8, budget=4), r"Eviction\('streaming'\) takes sink, window, not budget"),
    (dict(policy="snapkv", budget=16, observation_window=32), "observation_window must not exceed budget, got 32 > 16"),
])
def test_eviction_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Eviction(**kwargs)


def test_snapkv_new_tokens_cannot_exceed_tokens():
    with pytest.raises(ValueError, match="new_tokens=50 exceeds tokens=10"):
        Eviction("snapkv", budget=8, new_tokens=50).held_tokens(10)


def test_streaming_caps_every_layer():
    result = estimate(LLAMA, tokens=8192, batch=2, eviction=Eviction("streaming", sink=4, window=1020))
    assert result.kv_bytes == 2 * 1024 * PER_TOKEN == 268_435_456
    assert result.tokens == 8192 and result.eviction.held_tokens == 1024
    assert estimate(LLAMA, tokens=8192, batch=2).kv_bytes == 8 * result.kv_bytes


def test_window_at_least_tokens_holds_everything():
    # a window wider than the context is allowed: all tokens fit, nothing is evicted
    result = estimate(LLAMA, tokens=500, eviction=Eviction("streaming", sink=4, window=1020))
    assert result.kv_bytes == 500 * PER_TOKEN
    assert "nothing evicted" in result.notes[-1]


def test_snapkv_and_h2o_bytes():
    assert estimate(LLAMA, tokens=8192, eviction=Eviction("snapkv", budget=1024, new_tokens=100)).kv_bytes == 1124 * PER_TOKEN
    assert estimate(LLAMA, tokens=8192, eviction=Eviction("h2o", budget=2048, recent=256)).kv_bytes == 2048 * PER_TOKEN


@settings(max_examples=50, deadline=None)
@given(tokens=st.integers(1, 10**6), sink=st.integers(0, 16), window=st.integers(1, 4096))
def test_streaming_memory_is_bounded(tokens, sink, window):
    result = estimate(LLAMA, tokens=tokens, eviction=Eviction("streaming", sink=sink, window=window))
    assert result.kv_bytes == min(tokens, sink + window) * PER_TOKEN <= (sink + window) * PER_TOKEN


def test_sliding_layers_keep_min_of_window_and_budget():
    gemma = kvmem.get_model("gemma-3-1b")  # 4 full + 22 sliding (window 512), 1 KV head x 256, bf16
    per_layer_token = 1 * 256 * 2 * 2  # 1,024 B
    assert gemma.kinds == {"full": 4, "sliding": 22}
    wide = estimate(gemma, tokens=4096, eviction=Eviction("h2o", budget=1024))
    assert wide.kv_bytes == (4 * 1024 + 22 * 512) * per_layer_token == 15_728_640
    narrow = estimate(gemma, tokens=4096, eviction=Eviction("h2o", budget=256))
    assert narrow.kv_bytes == 26 * 256 * per_layer_token


def test_linear_state_unchanged_and_mla_capped():
    qwen = kvmem.get_model("qwen3-next-80b-a3b")
    plain = estimate(qwen, tokens=65536)
    evicted = estimate(qwen, tokens=65536, eviction=Eviction("h2o", budget=4096))
    assert evicted.state_bytes == plain.state_bytes > 0
    assert evicted.kv_bytes * 16 == plain.kv_bytes  # 12 full layers, 4096 of 65536 tokens
    lite = kvmem.get_model("deepseek-v2-lite")  # 27 MLA layers x (512 + 64) x 2 B = 31,104 B/token
    assert estimate(lite, tokens=4096, eviction=Eviction("streaming", window=1020)).kv_bytes == 1024 * 31_104


# --------------------------------------------------------------------------- shared prefix

def test_shared_prefix_stored_once():
    # 8 sequences of 1000 tokens sharing 600: 600 once + 8 x 400 private = 3,800 token-rows
    result = estimate(LLAMA, tokens=1000, batch=8, shared_prefix=600)
    assert result.kv_bytes == (600 + 8 * 400) * PER_TOKEN == 498_073_600
    assert result.shared_prefix.saved_bytes == 7 * 600 * PER_TOKEN
    assert sum(result.per_layer) == result.total_bytes
    assert estimate(LLAMA, tokens=1000, batch=8, shared_prefix="0.5k").kv_bytes == (512 + 8 * 488) * PER_TOKEN


@pytest.mark.parametrize("tokens, rows", [
    (80, 8 * 30 + 50),     # all inside the window of 100: the prefix of 50 is shared
    (120, 8 * 70 + 30),    # window covers tokens 20..119: 30 of the 50 prefix tokens remain
    (300, 8 * 100),        # the prefix left every window: nothing is shared
])
def test_shared_prefix_in_sliding_layers(tokens, rows):
    model = toy("sliding", window=100)  # 2 layers x 2 heads x 8 x 2 (K, V) x 2 B = 128 B per token
    assert estimate(model, tokens=tokens, batch=8, shared_prefix=50).kv_bytes == rows * 128


def _paged_rerun(model, block):
    """A stand-in paged engine (vLLM's page rule on the ideal rows): whole blocks per sequence."""
    def run(tokens, batch):
        return ideal_engine.estimate(model, tokens=cdiv(tokens, block) * block, batch=batch, kv_dtype="auto",
                                     tp=1, pp=1)
    return run


def test_paged_engines_share_whole_blocks_only():
    run = _paged_rerun(LLAMA, 16)
    base = run(1000, 8)
    shared = apply_strategies(base, model=LLAMA, rerun=run, engine="vllm", options={"block_size": 16},
                              shared_prefix=600)
    # 1000 tokens = 63 blocks; 600 tokens hold 37 whole blocks (592 tokens), the 38th is private
    assert shared.shared_prefix.shared_tokens == 592
    assert shared.kv_bytes == (37 + 8 * (63 - 37)) * 16 * PER_TOKEN
    tiny = apply_strategies(base, model=LLAMA, rerun=run, engine="sglang", options={"page_size": 64},
                            shared_prefix=50)
    assert tiny.kv_bytes == base.kv_bytes and "no whole 64-token block in 50 tokens" in tiny.notes[-1]
    with pytest.raises(ValueError, match="cannot tell the trtllm tokens_per_block"):
        apply_strategies(base, model=LLAMA, rerun=run, engine="trtllm", options={}, shared_prefix=600)


@pytest.mark.parametrize("engine, options, shared_tokens", [
    ("vllm", {"block_size": 16}, 592),          # 37 whole blocks of 16 in 600 tokens
    ("trtllm", {"tokens_per_block": 32}, 576),  # 18 whole blocks of 32
    ("sglang", {"page_size": 1}, 600),          # token-granular radix cache
    ("sglang", {"page_size": 64}, 576),         # 9 whole pages of 64
])
def test_shared_prefix_with_the_paged_engines(engine, options, shared_tokens):
    if engine not in ENGINES:
        pytest.skip(f"kvmem/engines/{engine}.py is not in this tree")
    base = estimate(LLAMA, engine=engine, tokens=1000, batch=8, **options)
    shared = estimate(LLAMA, engine=engine, tokens=1000, batch=8, shared_prefix=600, **options)
    # 7 of the 8 sequences stop holding their own copy of the shared whole blocks
    assert shared.shared_prefix.shared_tokens == shared_tokens
    assert base.kv_bytes - shared.kv_bytes == 7 * shared_tokens * PER_TOKEN
    evicted = estimate(LLAMA, engine=engine, tokens=8192, batch=2, eviction=Eviction("h2o", budget=1024), **options)
    assert evicted.kv_bytes == estimate(LLAMA, engine=engine, tokens=1024, batch=2, **options).kv_bytes


def test_transformers_prefix_sharing_is_flagged_as_a_what_if():
    result = estimate(LLAMA, engine="hf-dynamic", tokens=1000, batch=8, shared_prefix=600)
    assert result.kv_bytes == (600 + 8 * 400) * PER_TOKEN
    assert "transformers caches keep one row per sequence and share nothing" in " ".join(result.notes)
    evicted = estimate(LLAMA, engine="hf-dynamic", tokens=8192, batch=2, eviction=Eviction("streaming", window=1020))
    assert evicted.kv_bytes == 2 * 1024 * PER_TOKEN


def test_llama_cpp_streams_share_only_when_unified():
    separate = estimate(LLAMA, engine="llama.cpp", tokens=1000, batch=8, shared_prefix=600)
    assert separate.kv_bytes == estimate(LLAMA, engine="llama.cpp", tokens=1000, batch=8).kv_bytes
    assert "one cache stream per sequence unless kv_unified=True" in separate.notes[-1]
    unified = estimate(LLAMA, engine="llama.cpp", tokens=1000, batch=8, kv_unified=True, shared_prefix=600)
    assert unified.kv_bytes < separate.kv_bytes


@pytest.mark.parametrize("kwargs, message", [
    (dict(shared_prefix=1000), "shared_prefix=1000 must be smaller than tokens=1000"),
    (dict(shared_prefix=5000), "shared_prefix=5000 must be smaller than tokens=1000"),
    (dict(shared_prefix=-3), "shared_prefix must be a non-negative token count, got -3"),
    (dict(shared_prefix=100, eviction=Eviction("h2o", budget=64)), "shared_prefix cannot be combined with eviction"),
    (dict(eviction="h2o"), "eviction must be a kvmem.Eviction"),
])
def test_shared_prefix_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        estimate(LLAMA, tokens=1000, batch=4, **kwargs)


def test_batch_of_one_shares_nothing():
    result = estimate(LLAMA, tokens=1000, shared_prefix=600)
    assert result.kv_bytes == 1000 * PER_TOKEN and "batch=1 has no other sequence" in result.notes[-1]


# --------------------------------------------------------------------------- offload

def test_offload_moves_a_fraction_to_host():
    result = estimate(LLAMA, tokens=1000, batch=8, offload=0.25)
    # 8,000 token-rows x 131,072 B = 1,048,576,000 B; a quarter lives in host memory
    assert result.offload.host_kv_bytes == 262_144_000
    assert result.kv_bytes == 786_432_000 and sum(result.per_layer) == result.total_bytes
    assert estimate(LLAMA, tokens=1000, offload=1.0).kv_bytes == 0
    third = estimate(LLAMA, tokens=999, offload=0.3)
    assert third.offload.host_kv_bytes == 2 * (999 * PER_TOKEN // 2 * 3 // 10)  # floor per K and V


def test_offload_keeps_recurrent_state_on_device():
    qwen = kvmem.get_model("qwen3-next-80b-a3b")
    plain, half = estimate(qwen, tokens=8192), estimate(qwen, tokens=8192, offload=0.5)
    assert half.state_bytes == plain.state_bytes and half.kv_bytes == plain.kv_bytes // 2


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), True, "half"])
def test_offload_fraction_out_of_range(value):
    with pytest.raises(ValueError, match="offload must be a fraction between 0 and 1"):
        estimate(LLAMA, tokens=100, offload=value)


def test_offload_transfer_time_from_the_gpu_catalog():
    host = estimate(LLAMA, tokens=1000, batch=8, offload=0.25)
    # H100 SXM: PCIe Gen5 x16 64 GB/s per direction; NVLink 900 GB/s aggregate -> 450 GB/s one way
    assert offload_transfer_seconds(host, gpu="h100-sxm-80gb") == 262_144_000 / 64e9
    assert offload_transfer_seconds(262_144_000, gpu="h100-sxm-80gb", link="nvlink") == 262_144_000 / 450e9
    assert offload_transfer_seconds(1_000, gpu=1e9) == 1e-6
    with pytest.raises(ValueError, match="gpu 'l4-24gb' has no pcie bandwidth in the catalog"):
        offload_transfer_seconds(1, gpu="l4-24gb")
    with pytest.raises(ValueError, match="link must be 'pcie' or 'nvlink'"):
        offload_transfer_seconds(1, gpu="h100-sxm-80gb", link="ethernet")


# --------------------------------------------------------------------------- quantisation

def test_group_quantised_bytes_with_scales_and_residual():
    int4 = kvmem.dtype("int4", group_size=64, scale_dtype="fp32", zero_point=True)
    # a row of 128: 64 B packed + 2 groups x (4 B scale + 4 B zero) = 80 B; x 8 heads x 2 x 32 layers
    assert quantized_estimate(LLAMA, tokens=1000, k_dtype=int4).kv_bytes == 1000 * 40_960
    residual = quantized_estimate(LLAMA, tokens=1000, k_dtype=int4, residual_length=128)
    assert residual.kv_bytes == 872 * 40_960 + 128 * PER_TOKEN == 52_494_336
    # K and V apart: q8_0 rows 4 x 34 = 136 B, q4_0 rows 4 x 18 = 72 B
    mixed = quantized_estimate(LLAMA, tokens=10, k_dtype="q8_0", v_dtype="q4_0")
    assert (mixed.k_bytes, mixed.v_bytes) == (10 * 32 * 8 * 136, 10 * 32 * 8 * 72)


def test_quantization_options_cover_every_format():
    rows = quantization_options(LLAMA, tokens=1000)
    names = {r.k_dtype for r in rows}
    for name in ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "int2", "nvfp4", "mxfp4",
                 "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl", "int4-g32-fp16-zp", "int2-g32-fp16-zp",
                 "int4-g64-fp32-zp"):
        assert name in names
    by = {r.k_dtype: r for r in rows}
    assert by["bf16"].saving_bytes == 0 and by["fp32"].saving_bytes == -1000 * PER_TOKEN
    assert by["fp8_e4m3"].saving_fraction == 0.5 and "0.9168 -> 0.9181" in by["fp8_e4m3"].cost
    assert by["nvfp4"].kv_bytes == 1000 * 32 * 8 * 2 * 72  # 64 B + 8 scales per row of 128
    odd = quantization_options(toy(head_dim=80), tokens=4)
    q8 = next(r for r in odd if r.k_dtype == "q8_0")
    assert q8.kv_bytes is None and "not a whole number of blocks" in q8.cost
    # frozen records whose plain data keeps the keys of the dicts they were: a refused format has no bits or
    # residual_length
    assert type(q8) is QuantRow and list(q8.to_dict()) == ["k_dtype", "v_dtype", "bytes", "saving_bytes", "saving_fraction",
                                                 "cost"]
    assert by["bf16"].kv_bytes == by["bf16"].to_dict()["bytes"] == 1000 * PER_TOKEN
    assert list(by["bf16"].to_dict())[:5] == ["k_dtype", "v_dtype", "bits_k", "bits_v", "residual_length"]


# --------------------------------------------------------------------------- architecture variants

def test_architecture_variants_of_an_mha_model():
    rows = {r.variant: r for r in architecture_variants(kvmem.get_model("llama-2-7b"), tokens=1000)}
    # Llama-2-7B: 32 layers x 32 heads x 128 x 2 (K, V) x 2 B = 524,288 B/token
    assert rows["as is"].total_bytes == rows["MHA"].total_bytes == 1000 * 524_288
    assert rows["GQA-8"].total_bytes == 1000 * 131_072
    assert rows["MQA"].total_bytes == 1000 * 16_384
    assert rows["MLA (latent 512 + rope 64)"].total_bytes == 1000 * 32 * 576 * 2
    assert rows["cross-layer KV sharing every 2"].total_bytes == 1000 * 262_144
    assert all(r.needs_retraining for name, r in rows.items() if name != "as is")
    assert "needs up-training" in rows["MQA"].cost


def test_mla_model_as_per_head_attention():
    rows = {r.variant: r for r in architecture_variants(kvmem.get_model("deepseek-v2-lite"), tokens=100)}
    # 27 layers x 16 heads x (128 nope + 64 rope + 128 v) x 2 B = 276,480 B/token as MHA
    assert rows["MHA"].total_bytes == 100 * 27 * 16 * 320 * 2
    assert rows["as is"].total_bytes == 100 * 27 * 576 * 2
    with pytest.raises(ValueError, match="GQA groups must divide the 16 query heads, got 3"):
        architecture_variants(kvmem.get_model("deepseek-v2-lite"), tokens=100, gqa_groups=(3,))


# --------------------------------------------------------------------------- paged vs contiguous

def test_preallocation_waste_arithmetic():
    w = kvmem.preallocation_waste(LLAMA, lengths=[100, 1000, 17], max_model_len=2048, block_size=16)
    assert w["used_bytes"] == 1117 * PER_TOKEN
    assert w["contiguous"]["reserved_bytes"] == 3 * 2048 * PER_TOKEN
    assert w["paged"]["reserved_bytes"] == (112 + 1008 + 32) * PER_TOKEN
    assert w["paged"]["internal_fragmentation_tokens"] == 12 + 8 + 15
    assert w["contiguous"]["waste_fraction"] == (6144 - 1117) / 6144
    with pytest.raises(ValueError, match="a request of 4096 tokens exceeds max_model_len=2048"):
        kvmem.preallocation_waste(LLAMA, lengths=[4096], max_model_len=2048)


def test_admission_under_each_allocation():
    budget = 5000 * PER_TOKEN
    a = simulate_admission(LLAMA, lengths=[1000] * 10, kv_memory=budget, max_model_len=2048, block_size=16)
    # contiguous reserves 2048 each (2 fit), paged 1008 (4 fit: 4,032 <= 5,000), exact 1000 (5 fit)
    assert a.admitted == {"contiguous": 2, "paged": 4, "exact": 5}
    w = kvmem.preallocation_waste(LLAMA, lengths=[1000] * 10, max_model_len=2048, kv_memory=budget)
    assert w.admitted == a.admitted


def test_sliding_layers_round_their_window_to_blocks():
    model = toy("sliding", window=100)  # 128 B per token over both layers
    w = kvmem.preallocation_waste(model, lengths=[500], max_model_len=1000, block_size=64)
    assert (w["used_bytes"], w["paged"]["reserved_bytes"], w["contiguous"]["reserved_bytes"]) == (
        100 * 128, 128 * 128, 100 * 128)


def test_a_hybrid_models_layers_are_each_held_as_their_kind_says():
    # gemma-3-27b: 52 sliding layers (window 1024) and 10 full ones, 16 KV heads x 128, bf16:
    # 2 x 16 x 128 x 2 B = 8,192 B per token per layer. Requests of 100 and 5,000 tokens, blocks of 16.
    model = kvmem.get_model("gemma-3-27b")
    w = kvmem.preallocation_waste(model, lengths=[100, 5000], max_model_len=8192, block_size=16, kv_dtype="bf16")
    used = 62 * 100 + 10 * 5000 + 52 * 1024          # the sliding layers keep their last 1,024 tokens
    paged = 62 * 112 + 10 * 5008 + 52 * 1024         # 100 -> 7 blocks, 5,000 -> 313 blocks, 1,024 -> 64
    contiguous = 2 * (10 * 8192 + 52 * 1024)         # max_model_len per request, the window on sliding layers
    assert (w["used_bytes"], w["paged"]["reserved_bytes"], w["contiguous"]["reserved_bytes"]) == (
        used * 8192, paged * 8192, contiguous * 8192) == (896_598_016, 903_348_224, 2_214_592_512)


def test_request_length_distributions_are_seeded():
    assert request_lengths("sharegpt", 50, seed=7) == request_lengths("sharegpt", 50, seed=7)
    assert request_lengths("fixed", 3, length="1k") == [1024] * 3
    uniform = request_lengths("uniform", 2000, seed=1, low=10, high=20)
    assert min(uniform) == 10 and max(uniform) == 20
    # vLLM paper Figure 11: ShareGPT prompt mean 161.31 + output mean 337.99 = 499.3 tokens
    sharegpt = request_lengths("sharegpt", 20000, seed=0)
    assert abs(statistics.fmean(sharegpt) - 499.3) / 499.3 < 0.03
    assert max(sharegpt) > 6 * 499.3  # a long tail
    alpaca = request_lengths("alpaca", 20000, seed=0)
    assert abs(statistics.fmean(alpaca) - (19.31 + 58.45)) / 77.76 < 0.03
    capped = request_lengths("sharegpt", 2000, seed=0, max_model_len=512)
    assert max(capped) == 512
    log = request_lengths("lognormal", 20001, seed=3, mean=800, median=300)
    assert abs(statistics.median(log) - 300) / 300 < 0.05


@pytest.mark.parametrize("args, message", [
    (("zipf", 3), "unknown distribution 'zipf'; distributions: fixed, uniform, sharegpt, alpaca, lognormal"),
    (("uniform", 3), "distribution 'uniform' needs low= and high="),
    (("lognormal", 3), "needs mean > median > 0"),
])
def test_request_length_errors(args, message):
    with pytest.raises(ValueError, match=message):
        request_lengths(*args)


def test_allocation_sweep_waste_falls_with_block_size():
    rows = allocation_sweep(LLAMA, max_model_len=4096, kv_memory=64 * 4096 * PER_TOKEN, n=200,
                            block_sizes=(16, 128), distributions=("sharegpt",))
    contiguous, b16, b128 = rows
    assert contiguous.admitted == 64 and contiguous.block_size is None
    assert b16.waste_bytes < b128.waste_bytes < contiguous.waste_bytes
    assert contiguous.waste_fraction > 0.8  # ~500-token requests in 4,096-token reservations
    assert b16.admitted == 200  # 200 short requests fit in 64 x 4,096 tokens when paged


# --------------------------------------------------------------------------- side by side

def test_compare_strategies_rows():
    rows = kvmem.compare_strategies(LLAMA, tokens=32768, batch=4, shared_prefix=2000, offload=0.5,
                                    gpu="h100-sxm-80gb", max_model_len=131072)
    by = {r["strategy"]: r for r in rows}
    base = 4 * 32768 * PER_TOKEN
    assert rows[0]["strategy"] == "baseline (ideal, bf16)" and rows[0]["bytes"] == base
    assert by["KV fp8_e4m3"]["saving_fraction"] == 0.5
    assert by["StreamingLLM: 4 sink + 1020 recent tokens"]["bytes"] == 4 * 1024 * PER_TOKEN
    # issue 23 item 3: StreamingLLM's 5158.07 -> 5.4 is against window attention without sinks past the
    # training window, not the cost of evicting; H2O is measured at 4,096 tokens only: no number at 1,024
    streaming = by["StreamingLLM: 4 sink + 1020 recent tokens"]
    assert "5158" not in streaming["cost"] and streaming["quality"] == []
    assert "not with the full cache: https://arxiv.org/abs/2309.17453" in streaming["cost"]
    h2o = by["H2O: 1024 tokens (512 heavy hitters + 512 recent)"]
    assert "40.445" not in h2o["cost"] and "cited measurements are at 4,096 tokens" in h2o["cost"]
    snapkv = next(r for r in rows if r["strategy"].startswith("SnapKV"))
    assert "42.5637 -> 41.455" in snapkv["cost"] and "42.3775" not in snapkv["cost"]
    kivi2 = next(r for r in rows if r["strategy"].startswith("KIVI-2"))
    assert "38.72 -> 38.3 (-0.42)" in kivi2["cost"] and "kivi-2-longchat-longbench" in kivi2["quality"]
    shared = by["shared prefix of 2000 tokens"]
    assert shared["saving_bytes"] == 3 * 2000 * PER_TOKEN and shared["lossless"]
    offload = by["offload 0.5 of the KV to host memory"]
    assert offload["bytes"] == base // 2 and "134 ms per step over pcie" in offload["cost"]
    assert by["contiguous pre-allocation to max_model_len=131072"]["saving_fraction"] == -3.0
    assert "GQA-8" not in by  # Llama-3.1-8B already has 8 KV heads
    assert by["MQA"]["needs_retraining"] and by["MQA"]["bytes"] == base // 8
    for r in rows:
        assert set(r) >= {"strategy", "family", "bytes", "saving_bytes", "saving_fraction", "cost"}


def test_compare_strategies_through_a_serving_engine():
    rows = kvmem.compare_strategies(LLAMA, tokens=8192, batch=2, engine="vllm", block_size=16)
    by = {r["strategy"]: r for r in rows}
    assert rows[0]["bytes"] == estimate(LLAMA, engine="vllm", tokens=8192, batch=2, block_size=16).total_bytes
    streaming = by["StreamingLLM: 4 sink + 1020 recent tokens"]
    assert streaming["bytes"] == 2 * 1024 * PER_TOKEN  # 64 whole blocks of 16 per sequence
    kivi = next(r for r in rows if r["strategy"].startswith("KIVI-4"))
    assert kivi["bytes"] is None and "has no KIVI-style cache; compare with engine='ideal'" in kivi["cost"]
    for r in rows:
        assert (r["bytes"] is None) == r["cost"].startswith("not available in engine 'vllm'")


def test_h2o_cost_quoted_at_its_measured_budget():
    rows = kvmem.compare_strategies(LLAMA, tokens=32768, budget=4096, variants=False)
    h2o = next(r for r in rows if r["strategy"].startswith("H2O"))
    assert "42.5637 -> 40.445 (-2.1187)" in h2o["cost"] and h2o["quality"] == ["h2o-4096-mistral-longbench"]


def test_variant_costs_are_each_their_own_and_cited():
    # issue 23 item 3: one uncited sentence was repeated on every row
    rows = {r.variant: r.cost for r in architecture_variants("gemma-3-27b", tokens=100, gqa_groups=(8,))}
    assert rows["as is"] == "none (the model as trained)"
    assert "arXiv:2305.13245" in rows["GQA-8"] and "arXiv:2405.04434" in rows["MLA (latent 512 + rope 64)"]
    assert "arXiv:2405.12981" in rows["cross-layer KV sharing every 2"]
    assert len({cost for name, cost in rows.items() if name != "as is"}) == len(rows) - 1


def test_no_window_and_no_hybrid_variants():
    # issue 23 item 27: what the window saves, directly. Gemma-3-27B at 32k: 62 layers x 16 heads x 128 x 2 (K,V)
    # x 2 B = 507,904 B/token x 32,768 = 16,642,998,272 B with every layer full, against 3,120,562,176 as is
    rows = {r.variant: r for r in architecture_variants("gemma-3-27b", tokens=32768, gqa_groups=())}
    assert rows["as is"].total_bytes == 3_120_562_176 and rows["no sliding window"].total_bytes == 16_642_998_272
    assert "no hybrid" not in rows
    # Qwen3-Next-80B: its 36 DeltaNet layers as its full-attention layers (2 KV heads x 256), no state:
    # 48 x 2 x 256 x 2 x 2 B = 98,304 B/token x 32,768 = 3,221,225,472 B
    rows = {r.variant: r for r in architecture_variants("qwen3-next-80b-a3b", tokens=32768, gqa_groups=())}
    assert rows["no hybrid"].total_bytes == 3_221_225_472 and "no sliding window" not in rows


def test_architecture_variant_refused_by_an_engine_is_reported():
    def refuse_mla(model, *, tokens, batch, kv_dtype, tp, pp):
        if model.count("mla"):
            raise ValueError("this engine has no MLA")
        return ideal_engine.estimate(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)

    ENGINES["no-mla-test"] = kvmem.engines.base.EngineSpec("no-mla-test", {}, refuse_mla)
    try:
        rows = {r.variant: r for r in architecture_variants(LLAMA, tokens=100, engine="no-mla-test")}
    finally:
        del ENGINES["no-mla-test"]
    mla = rows["MLA (latent 512 + rope 64)"]
    assert mla.total_bytes is None and mla.cost == "not available in engine 'no-mla-test': this engine has no MLA"
    assert rows["MQA"].total_bytes == 100 * PER_TOKEN // 8


# --------------------------------------------------------------------------- cited quality data

def test_quality_entries_are_cited_and_consistent():
    entries = quality_results()
    methods = " ".join(e["method"] for e in entries)
    for name in ("KIVI-2", "KIVI-4", "KVQuant", "FP8", "StreamingLLM", "H2O", "SnapKV"):
        assert name in methods
    for e in entries:
        assert e["source"].startswith("https://") and e["model"] and e["benchmark"] and e["paper"]
        if "scores" in e:  # SnapKV Table 1: the mean of the 16 printed per-task scores
            assert len(e["scores"]) == len(e["baseline_scores"]) == 16
            assert round(statistics.fmean(e["scores"]), 4) == e["value"]
            assert round(statistics.fmean(e["baseline_scores"]), 4) == e["baseline"]
        if e["delta"] is not None:
            assert math.isclose(e["value"] - e["baseline"], e["delta"], abs_tol=1e-4)


def test_eviction_note_says_what_is_lost():
    result = kvmem.estimate("llama-3.1-8b", tokens="32k", eviction=kvmem.Eviction("streaming", sink=4, window=1020))
    # 131,072 B per token x 1,024 kept tokens; the other 31,744 are gone
    assert result.kv_bytes == 1024 * 131_072
    assert "the other 31,744 tokens are discarded for good" in result.notes[-1]


def test_compare_strategies_passes_residual_length_to_hf_quantized():
    # issue 13: engine hf-quantized's own residual_length option and compare_strategies'
    # residual_length are one setting; the baseline follows it (10,231,808 B at 32 vs
    # 12,492,800 B at the default 128 for llama-3.2-1b, 1,100 tokens after a 1,000-token prompt)
    for residual, expected in ((32, 10_231_808), (128, 12_492_800)):
        rows = kvmem.compare_strategies("llama-3.2-1b", engine="hf-quantized", tokens=1100, prompt_tokens=1000,
                                  residual_length=residual)
        assert rows[0]["bytes"] == expected


def test_paging_refusals_name_the_field():
    # issue 13: TypeError and KeyError 'admitted' before
    with pytest.raises(ValueError, match="lengths must be a list of request lengths in tokens, got 5"):
        kvmem.preallocation_waste("llama-3.1-8b", lengths=5, max_model_len=100)
    with pytest.raises(ValueError, match="kv_memory: bytes must be a positive integer"):
        allocation_sweep("llama-3.1-8b", max_model_len=4096, kv_memory=None)


def test_offload_of_a_third_keeps_all_devices_at_least_one_device():
    # issue 13: Fraction(1, 3) floored the all-devices host share separately: one byte short
    from fractions import Fraction
    est = estimate("gemma-3-27b", tokens=1000, offload=Fraction(1, 3))
    assert est.kv_bytes_all_devices == est.kv_bytes == 338_602_668


def _deepseek_v4_like() -> Model:
    from kvmem.layer import Compressor
    window = Layer("compressed", kv_heads=1, head_dim_k=512, window=128)
    csa = Layer("compressed", kv_heads=1, head_dim_k=512, window=128, compressor=Compressor(4, 512, 128, overlap=True))
    return Model("v4-like", (window, csa), hidden_size=4096, num_attention_heads=64)


def test_what_ifs_that_count_held_tokens_refuse_compressed_layers():
    # their rows are one per compress_rate tokens beside the window: held tokens x bytes per token misses them
    model = _deepseek_v4_like()
    with pytest.raises(ValueError, match="eviction is not sized for compressed layers"):
        estimate(model, tokens=4096, eviction=Eviction("streaming", sink=4, window=1020))
    with pytest.raises(ValueError, match="per-request allocation is not sized for compressed layers"):
        kvmem.preallocation_waste(model, lengths=[100, 2000], max_model_len=4096)
    # a shared prefix shares the compressed rows but not each sequence's window and buffers
    with pytest.raises(ValueError, match="shared-prefix sizing is not sized for compressed layers"):
        estimate(model, tokens=4096, batch=4, shared_prefix=2048)
    rows = {r["strategy"].split(" (")[0].split(":")[0]: r for r in kvmem.compare_strategies(model, tokens=4096)}
    assert rows["KIVI-4"]["bytes"] is None and rows["KIVI-4"]["cost"].startswith("not available: a KIVI-style")
    assert rows["StreamingLLM"]["bytes"] is None
    # fp8 halves the rows (window 2 x 128 x 512 + CSA 1,024 x 640 elements), not the bf16 buffers and fp32 gate
    state = 4 * 640 * (2 + 4)
    assert rows["baseline"]["bytes"] == (2 * 128 * 512 + 1024 * 640) * 2 + state
    assert rows["KV fp8_e4m3"]["bytes"] == (2 * 128 * 512 + 1024 * 640) + state


def test_results_are_frozen_records_that_read_like_their_dicts():
    # issue 24 item 2: the dict results became frozen records; dict access, equality and to_dict() stay
    import dataclasses

    from kvmem.strategies import AllocationRow, AllocationWaste, StrategyRow, VariantRow

    rows = kvmem.compare_strategies(LLAMA, tokens=1000, variants=False)
    assert all(type(r) is StrategyRow for r in rows)
    assert rows[0].total_bytes == rows[0]["bytes"] == 1000 * PER_TOKEN and rows[0].to_dict() == dict(rows[0])
    assert list(rows[0]) == ["strategy", "family", "bytes", "saving_bytes", "saving_fraction", "cost", "lossless",
                             "needs_retraining", "settings", "quality"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows[0].cost = "free"
    variants = architecture_variants(LLAMA, tokens=10)
    assert type(variants[0]) is VariantRow and variants[0].to_dict()["model"] is variants[0].model
    w = kvmem.preallocation_waste(LLAMA, lengths=[100, 1000], max_model_len=2048, kv_memory=10**12)
    assert type(w) is AllocationWaste and w.paged.block_size == w["paged"]["block_size"] == 16
    assert w.to_dict()["admitted"] == {"contiguous": 2, "paged": 2, "exact": 2} == w.admitted
    assert "block_size" not in w.contiguous and w.to_dict()["contiguous"]["reserved_bytes"] == 2 * 2048 * PER_TOKEN
    sweep = allocation_sweep(LLAMA, max_model_len=2048, kv_memory="1GiB", n=10,
                             distributions=("fixed",), block_sizes=(16,))
    assert [type(r) for r in sweep] == [AllocationRow, AllocationRow] and sweep[0].block_size is None
