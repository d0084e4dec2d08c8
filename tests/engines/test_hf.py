"""hf-dynamic, hf-static, hf-quantized: the bytes transformers 5.24's cache objects hold.

Every number here is also what tests/test_measure.py finds in the real cache objects
(kvmem validate); the arithmetic is written out beside each assertion. Sources are the
installed transformers 5.24.0 cache_utils.py and modeling files named in kvmem/engines/hf/.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvmem
from kvmem import Layer, Model, RecurrentState, estimate
from kvmem.engines import hf


def est(model, engine="hf-dynamic", tokens=1, batch=1, **options):
    return estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype="bf16", **options)


# ---------------------------------------------------------------------------------------------
# hf-dynamic

def test_llama_31_8b_one_token_is_the_textbook_count():
    # 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token
    result = est("llama-3.1-8b")
    assert result.kv_bytes == 131_072 == est("llama-3.1-8b", engine="ideal").kv_bytes
    assert result.k_bytes == result.v_bytes == 65_536
    assert result.peak_bytes == result.kv_bytes  # one prefill: the cats are the cache itself


def test_cat_growth_peak_is_the_old_v_of_the_last_layer_on_top_of_the_cache():
    # 8-token prefill then 2 decode tokens. DynamicLayer.update does keys = cat(keys, new) (old K
    # freed at once), then values = cat(values, new): at the last layer of the last step the
    # whole cache (10 tokens x 131,072 B = 1,310,720) plus that layer's old V (9 tokens x 8 heads
    # x 128 x 2 B = 18,432) are alive.
    result = est("llama-3.1-8b", tokens=10, prompt_tokens=8)
    assert result.kv_bytes == 1_310_720
    assert result.peak_bytes == 1_310_720 + 18_432


def test_falcon_40b_caches_kv_broadcast_to_all_query_heads():
    # modeling_falcon.py: with new_decoder_architecture the K/V are broadcast to the 128 query
    # heads before cache.update: 60 layers x 128 x 64 x 2 x 2 B = 1,966,080 B per token,
    # 16x the 8-KV-head count 60 x 8 x 64 x 2 x 2 = 122,880 that an ideal count gives.
    result = est("falcon-40b")
    assert result.kv_bytes == 1_966_080 == 16 * est("falcon-40b", engine="ideal").kv_bytes
    assert any("128 query heads" in note for note in result.notes)
    assert est("falcon-7b").kv_bytes == 32 * 1 * 64 * 2 * 2  # multi-query: one head, no broadcast


def test_mla_caches_latent_in_k_and_rope_key_in_v():
    # modeling_deepseek_v2.py: cache.update(latent [B,1,S,512], rope key [B,1,S,64]); 27 layers
    result = est("deepseek-v2-lite", tokens=10)
    assert result.k_bytes == 27 * 10 * 512 * 2 == 276_480
    assert result.v_bytes == 27 * 10 * 64 * 2 == 34_560
    # DeepSeek-V3.2 adds the indexer key (index_head_dim 128) per token, counted with K
    v32 = est("deepseek-v3.2")
    assert (v32.k_bytes, v32.v_bytes) == (61 * (512 + 128) * 2, 61 * 64 * 2)


def test_sliding_view_pins_the_whole_prefill_buffer():
    # gemma-3-1b: 26 layers (22 sliding, window 512; 4 full), 1 KV head x 256: 1,024 B per layer-token.
    # After a 600-token prefill each sliding layer keeps full[:, :, -511:], a view that pins all
    # 600 tokens: 26 x 600 x 1,024 = 15,974,400, not the windowed 22 x 512 + 4 x 600 tokens.
    prefill = est("gemma-3-1b", tokens=600)
    assert prefill.kv_bytes == 26 * 600 * 1024 == 15_974_400
    assert est("gemma-3-1b", engine="ideal", tokens=600).kv_bytes == (22 * 512 + 4 * 600) * 1024
    assert any("pins the whole 600-token prefill" in note for note in prefill.notes)
    # One decode step later the sliding buffer is cat(511 kept, 1 new) = 512 tokens = the window.
    decoded = est("gemma-3-1b", tokens=600, prompt_tokens=599)
    assert decoded.kv_bytes == (22 * 512 + 4 * 600) * 1024 == 13_991_936
    # The peak is at that step's first layer (sliding): the 599-token cache of all 26 layers
    # plus layer 0's new 512-token K and V, allocated before its old buffers are freed.
    assert decoded.peak_bytes == 26 * 599 * 1024 + 512 * 1024 == 16_472_064


def test_below_the_window_a_sliding_layer_holds_every_token():
    # mistral-7b-v0.1: window 4096 on all 32 layers, 8 KV heads x 128: 4,096 B per layer-token
    assert est("mistral-7b-v0.1", tokens=100, prompt_tokens=90).kv_bytes == 32 * 100 * 4096


def test_chunked_layers_use_the_sliding_class_with_the_chunk_as_window():
    # llama-4-scout: 36 chunked (8192) + 12 full layers, 8 KV heads x 128 = 4,096 B per layer-token
    result = est("llama-4-scout-17b-16e", tokens=10_000, prompt_tokens=9_999)
    assert result.kv_bytes == (36 * 8192 + 12 * 10_000) * 4096


def test_linear_layers_hold_conv_state_of_the_whole_kernel_and_fp32_recurrent_state():
    # qwen3-next: 36 gated-DeltaNet layers; conv [B, 2*16*128 + 32*128 = 8192, kernel 4] in bf16
    # = 65,536 B; recurrent [B, 32, 128, 128] fp32 = 2,097,152 B; per layer 2,162,688.
    result = est("qwen3-next-80b-a3b", tokens=64, batch=2)
    assert result.state_bytes == 2 * 36 * (8192 * 4 * 2 + 32 * 128 * 128 * 4) == 155_713_536
    # 12 attention layers, 2 KV heads x 256: 12 x 64 x 2 x 256 x 2 x 2 B x batch 2
    assert result.kv_bytes == 12 * 64 * 2 * 256 * 2 * 2 * 2 == 3_145_728
    # a 3-token prefill is left-padded to the kernel (F.pad, 64 KiB) before it is copied in, but
    # that happens before the layer's 2 MiB recurrent state exists: the peak stays the final total
    short = est("qwen3-next-80b-a3b", tokens=3)
    assert short.peak_bytes == short.total_bytes


def test_a_short_prefill_pads_the_conv_input_to_the_kernel():
    # one linear layer: conv [1, 100, 4] bf16 = 800 B, recurrent 10 fp32 = 40 B. A 2-token prefill:
    # zeros for the conv state (+800), F.pad of the input to 4 columns (+800, freed after the
    # copy), then the recurrent state (+40): peak 1,600 B, steady 840 B.
    layer = Layer("linear", state=RecurrentState(conv_channels=100, conv_kernel=4, ssm_elements=10))
    model = Model(name="one-linear", layers=(layer,), hidden_size=8, num_attention_heads=1)
    short = est(model, tokens=2)
    assert (short.state_bytes, short.peak_bytes) == (840, 1600)
    assert est(model, tokens=4).peak_bytes == 840  # a prefill as long as the kernel is not padded


def test_kv_shared_and_mlp_only_layers_hold_nothing():
    # gemma-3n-e2b: the last 10 of 30 layers reuse earlier caches (DummyLayer)
    result = est("gemma-3n-e2b", tokens=10)
    assert result.per_layer[20:] == (0,) * 10 and all(result.per_layer[:20])
    nemotron = est("nemotron-h-8b", tokens=10)
    assert sum(1 for b in nemotron.per_layer if b == 0) == 24  # the "-" MLP blocks


# ---------------------------------------------------------------------------------------------
# hf-static

def test_static_preallocates_max_cache_len_and_counts_int64_positions():
    # 100 slots x 131,072 B; the prefill writes with index_copy_ at arange(10) + cumulative_length:
    # two int64 vectors of 10 alive at once at the last layer = 160 B above the full cache.
    result = est("llama-3.1-8b", engine="hf-static", tokens=10, max_cache_len=100)
    assert result.kv_bytes == 13_107_200
    assert result.peak_bytes == 13_107_200 + 2 * 8 * 10
    assert est("llama-3.1-8b", engine="hf-static", tokens=10).kv_bytes == 1_310_720  # default: tokens


def test_static_sliding_layers_hold_the_window_and_roll_once_full():
    # gemma-3-1b, max_cache_len 1000: sliding layers min(512, 1000), full layers 1000 tokens
    result = est("gemma-3-1b", engine="hf-static", tokens=1000, max_cache_len=1000, prompt_tokens=998)
    assert result.kv_bytes == (22 * 512 + 4 * 1000) * 1024 == 15_630_336
    # full sliding layers roll: K.roll(-1) and V.roll(-1) copies (2 x 512 x 512 B) + index tensor([-1])
    assert result.peak_bytes == result.kv_bytes + 512 * 1024 + 8


def test_static_refuses_more_tokens_than_max_cache_len():
    with pytest.raises(ValueError, match=r"max_cache_len \(64\) must be at least tokens \(65\)"):
        est("llama-3.1-8b", engine="hf-static", tokens=65, max_cache_len=64)


# ---------------------------------------------------------------------------------------------
# hf-quantized

def test_hqq_default_int4_group_64_bytes():
    # llama-3.1-8b, 1000-token prefill, all quantised: per layer K has 8 x 1000 x 128 = 1,024,000
    # elements -> 512,000 B packed (2 per byte) + 16,000 groups x (scale + zero) x 2 B bf16 = 576,000;
    # V the same; 32 layers -> 36,864,000 B (the bf16 cache is 131,072,000).
    result = est("llama-3.1-8b", engine="hf-quantized", tokens=1000, backend="hqq")
    assert result.kv_bytes == 32 * 2 * (512_000 + 16_000 * 4) == 36_864_000
    assert result.details.residual_tokens == 0


def test_residual_holds_new_tokens_until_residual_length_then_all_is_requantised():
    # 100 decode tokens after a 1000-token prefill stay in the bf16 residual (128 by default):
    # 100 x 8 x 128 x 2 B = 204,800 per K per layer on top of the quantised 1000 tokens.
    residual = est("llama-3.1-8b", engine="hf-quantized", tokens=1100, prompt_tokens=1000, backend="hqq")
    assert residual.kv_bytes == 36_864_000 + 32 * 2 * 204_800
    # the 128th decode token makes residual + 1 >= 128: all 1128 tokens re-quantised, residual empty
    flushed = est("llama-3.1-8b", engine="hf-quantized", tokens=1128, prompt_tokens=1000, backend="hqq")
    assert flushed.details.quantized_tokens == 1128 and flushed.details.residual_tokens == 0
    assert flushed.kv_bytes == 32 * 2 * (8 * 1128 * 128 // 2 + 8 * 1128 * 128 // 64 * 4)


def test_quanto_and_hqq_pack_differently():
    # gpt2, 8 tokens: K per layer = 12 x 8 x 64 = 6,144 elements, 96 groups of 64.
    # quanto int2: ceil(96 groups / 4 per byte) x 64 = 1,536 B + 96 x 2 x 2 B = 1,920 B
    # hqq int3: ceil(64 / 10) = 7 int32 rows x 96 groups x 4 B = 2,688 B + 384 = 3,072 B
    quanto = est("gpt2", engine="hf-quantized", tokens=8, backend="quanto", nbits=2)
    hqq3 = est("gpt2", engine="hf-quantized", tokens=8, backend="hqq", nbits=3)
    assert quanto.kv_bytes == 12 * 2 * 1_920
    assert hqq3.kv_bytes == 12 * 2 * 3_072
    assert hf.quantized_bytes("hqq", 6_144, nbits=1, q_group_size=64, element_bytes=2) == 768 + 384


def test_fp8_backend_appends_with_one_fp32_scale_per_tensor():
    # llama-3.2-1b: 16 layers x 8 heads x 64 = 8,192 elements per token per K; 1 B each + 4 B scale
    result = est("llama-3.2-1b", engine="hf-quantized", tokens=40, prompt_tokens=36, backend="fp8")
    assert result.kv_bytes == 16 * 2 * (40 * 8 * 64 + 4) == 655_488


@pytest.mark.parametrize("model, options, message", [
    ("gemma-3-1b", {}, "`QuantizedCache` is only supported for models with only full attention layers. "
                       "We found the following invalid layer types: {'sliding_attention'}"),
    ("qwen3-next-80b-a3b", {}, "invalid layer types: {'linear_attention'}"),
    ("deepseek-v3.2", {}, "invalid layer types: {'indexed_attention'}"),
    ("llama-3.1-8b", {"backend": "quanto", "nbits": 3},
     "`nbits` for `quanto` backend has to be one of [2, 4] but got 3"),
    ("llama-3.1-8b", {"backend": "hqq", "nbits": 5}, "`nbits` for `hqq` backend has to be one of [1, 2, 3, 4, 8]"),
    ("llama-3.1-8b", {"backend": "fp8", "nbits": 4}, "The `fp8` backend quantizes per-tensor and does not "
                                                     "support ['nbits']"),
    ("gpt2", {"backend": "quanto", "q_group_size": 100}, "Group size (100) must be a divisor of (768)"),
    ("gpt2", {"backend": "hqq", "q_group_size": 63}, "q_group_size (63) must be a multiple of 2"),
    ("gpt2", {"backend": "hqq", "q_group_size": 1000}, "group_size should be divisble"),
    ("gpt2", {"backend": "mlx"}, "backend must be 'quanto', 'hqq' or 'fp8', got 'mlx'"),
])
def test_quantized_refuses_what_transformers_refuses(model, options, message):
    with pytest.raises(ValueError) as info:
        est(model, engine="hf-quantized", tokens=1, **options)
    assert message in str(info.value)


def test_hqq_groups_the_whole_tensor_quanto_each_batch_row():
    # one layer, 1 KV head x 16, 3 tokens: 48 elements per sequence. hqq reshapes the whole
    # [batch, 1, 3, 16] tensor into groups of 32 (needs batch x 48 % 32 == 0); quanto groups each
    # batch row (axis 0) on its own (needs 48 % 32 == 0, whatever the batch).
    cfg = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 48, "num_attention_heads": 3,
           "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 64, "vocab_size": 100}
    two = est(cfg, engine="hf-quantized", tokens=3, batch=2, backend="hqq", q_group_size=32)
    assert two.kv_bytes == 2 * (96 // 2 + 3 * 2 * 2)  # K and V: 48 B packed + 3 groups x (scale + zero) x 2 B
    with pytest.raises(ValueError, match=r"hqq cannot split \[1, 1, 3, 16\] into groups of 32"):
        est(cfg, engine="hf-quantized", tokens=3, batch=1, backend="hqq", q_group_size=32)
    with pytest.raises(ValueError, match=r"Group size \(32\) must be a divisor of \(48\)"):
        est(cfg, engine="hf-quantized", tokens=3, batch=2, backend="quanto", q_group_size=32)


# ---------------------------------------------------------------------------------------------
# Inputs shared by the three modes

@pytest.mark.parametrize("engine", ["hf-dynamic", "hf-static", "hf-quantized"])
def test_single_device_only(engine):
    with pytest.raises(ValueError, match=r"tp must be 1 for .*, got 2: transformers builds the cache"):
        estimate("llama-3.1-8b", engine=engine, tokens=8, tp=2)
    with pytest.raises(ValueError, match=r"pp must be 1 for .*, got 4"):
        estimate("llama-3.1-8b", engine=engine, tokens=8, pp=4)


def test_kv_dtype_is_the_compute_dtype():
    assert estimate("llama-3.1-8b", engine="hf-dynamic", tokens=1, kv_dtype="fp32").kv_bytes == 262_144
    assert estimate("llama-3.1-8b", engine="hf-dynamic", tokens=1).kv_dtype == "bf16"  # auto = model dtype
    with pytest.raises(ValueError, match="kv_dtype for hf-dynamic is the model's compute dtype .* got "
                                         "'fp8_e4m3'; for a quantised cache use engine='hf-quantized'"):
        estimate("llama-3.1-8b", engine="hf-dynamic", tokens=1, kv_dtype="fp8")


def test_options_are_checked():
    with pytest.raises(ValueError, match="prompt_tokens must be at most tokens \\(8\\), got 9"):
        est("llama-3.1-8b", tokens=8, prompt_tokens=9)
    with pytest.raises(ValueError, match="engine 'hf-dynamic' has no option 'max_cache_len'"):
        est("llama-3.1-8b", tokens=8, max_cache_len=9)
    with pytest.raises(ValueError, match="engine 'hf-static' has no capacity rule"):
        kvmem.capacity("llama-3.1-8b", engine="hf-static", kv_memory="1GiB")
    assert {"hf-dynamic", "hf-static", "hf-quantized"} <= set(kvmem.list_engines())


# ---------------------------------------------------------------------------------------------
# The allocation replay: internal consistency and the peak shortcut

def _toy_model(kinds, window, conv_kernel=4):
    layers = []
    for kind in kinds:
        if kind == "linear":
            layers.append(Layer("linear", state=RecurrentState(6, conv_kernel, 10, 2)))
        elif kind == "none":
            layers.append(Layer("none"))
        else:
            layers.append(Layer(kind, kv_heads=2, head_dim_k=4, head_dim_v=3,
                                window=window if kind == "sliding" else 0))
    return Model(name="toy", layers=tuple(layers), hidden_size=16, num_attention_heads=4)


def _brute_force(work):
    """Walk every step from the first: (running total after each step, highest total seen)."""
    running = best = 0
    totals = []
    for j in range(work.steps + 1):
        for i in range(len(work.slots)):
            for delta in work.events(i, j):
                running += delta
                best = max(best, running)
        totals.append(running)
    return totals, best


layer_kinds = st.lists(st.sampled_from(["full", "sliding", "linear", "none"]), min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(kinds=layer_kinds, window=st.integers(1, 7), prompt=st.integers(1, 9), extra=st.integers(0, 12),
       batch=st.integers(1, 3))
def test_dynamic_and_static_replays_agree_with_held_bytes_and_brute_force(kinds, window, prompt, extra, batch):
    found = hf.slots(_toy_model(kinds, window))
    tokens = prompt + extra
    cases = [hf.DynamicGrowth(found, batch=batch, prompt=prompt, tokens=tokens, e=2),
             hf.StaticGrowth(found, max_cache_len=tokens + 2, batch=batch, prompt=prompt, tokens=tokens, e=2)]
    for work in cases:
        totals, best = _brute_force(work)
        assert totals == [sum(work.held(i, j) for i in range(len(found))) for j in range(work.steps + 1)]
        assert work.peak() == best


@settings(max_examples=60, deadline=None)
@given(backend=st.sampled_from(["hqq", "quanto", "fp8"]), prompt=st.integers(1, 9), extra=st.integers(0, 14),
       residual=st.integers(0, 5), layers=st.integers(1, 3))
def test_quantized_replay_agrees_with_held_bytes_and_brute_force(backend, prompt, extra, residual, layers):
    found = hf.slots(_toy_model(["full"] * layers, 0))
    nbits = 8 if backend == "fp8" else 4
    work = hf.QuantizedGrowth(found, backend=backend, nbits=nbits, q_group_size=1, residual_length=residual,
                              batch=2, prompt=prompt, tokens=prompt + extra, e=2)
    totals, best = _brute_force(work)
    assert totals == [sum(work.held(i, j) for i in range(layers)) for j in range(work.steps + 1)]
    assert work.peak() == best


@pytest.mark.parametrize("engine", ["hf-dynamic", "hf-static", "hf-quantized"])
def test_falcon_40b_strategies_with_every_hf_engine(engine):
    # issue 13: the MLA/shared what-if variants of falcon-40b have no per-head layer; the Falcon
    # note's next() raised StopIteration ("Something went wrong" on Compare and Strategies)
    rows = kvmem.compare_strategies("falcon-40b", engine=engine, tokens=1024)
    assert rows[0]["strategy"].startswith(f"baseline ({engine}")
