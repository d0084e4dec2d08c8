"""The KV-cache lab: the seed notebook's experiments, rerun and checked.

Seed: shared/seed/000_9eb41768818c26b3.txt ("KV Caching", SELENE notebooks), cells In [4]-[13]
(the toy head) and "Memory Tradeoff" (the formula).
"""

import pytest
import torch

import kvmem
from kvmem import lab

# The seed's printed outputs (In [7] / In [12]) and attention weights (In [8] / In [13]),
# d_model=12, d_head=6, 5 tokens, torch.manual_seed(42); three decimals as printed there.
SEED_OUTPUTS = [
    [-0.006, -0.687, -0.147, 0.639, -0.314, 0.148],
    [0.143, -0.649, -0.060, 0.609, -0.175, 0.235],
    [0.176, -0.679, -0.092, 0.472, -0.117, 0.161],
    [0.155, -0.694, -0.073, 0.517, -0.109, 0.147],
    [0.092, -0.645, -0.073, 0.519, -0.082, 0.195],
]
SEED_WEIGHT_ROWS = [
    [1.000],
    [0.499, 0.501],
    [0.328, 0.309, 0.362],
    [0.227, 0.241, 0.271, 0.262],
    [0.191, 0.218, 0.199, 0.217, 0.175],
]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # The lab's tensors are tiny; on a busy 2-core machine torch's thread pool only adds
    # waiting (it made these tests ~50x slower under load). Restored afterwards.
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def seed_run():
    return lab.compare_single_head()


def test_reproduces_the_seed_numbers(seed_run):
    for step in range(5):
        assert seed_run.outputs_cached[step] == pytest.approx(SEED_OUTPUTS[step], abs=5e-4)
        assert seed_run.outputs_uncached[step][-1] == pytest.approx(SEED_OUTPUTS[step], abs=5e-4)
        assert seed_run.weights_cached[step] == pytest.approx(SEED_WEIGHT_ROWS[step], abs=5e-4)
    # the last uncached step holds the seed's whole 5 x 5 lower-triangular matrix
    full = seed_run.weights_uncached[-1]
    for i, row in enumerate(SEED_WEIGHT_ROWS):
        assert full[i] == pytest.approx(row + [0.0] * (4 - i), abs=5e-4)


def test_single_head_cached_equals_uncached(seed_run):
    assert len(seed_run.max_abs_diff) == 5
    assert max(seed_run.max_abs_diff) == seed_run.max_abs_diff_overall < 1e-6
    assert seed_run.past_drift < 1e-6  # causal mask: earlier output rows never change
    with_prompt = lab.compare_single_head(prompt_tokens=3)
    assert with_prompt.max_abs_diff_overall < 1e-6
    assert with_prompt.cache_tokens == [3, 3, 3, 4, 5]  # the prompt fills the cache in one pass


def test_attention_matrices_grow(seed_run):
    for step in range(1, 6):
        square = seed_run.weights_uncached[step - 1]
        assert len(square) == step and all(len(row) == step for row in square)
        assert len(seed_run.weights_cached[step - 1]) == step
        assert len(seed_run.outputs_uncached[step - 1]) == step  # t rows without the cache
        assert len(seed_run.outputs_cached[step - 1]) == 6       # one d_head row with it
        assert sum(seed_run.weights_cached[step - 1]) == pytest.approx(1.0, abs=1e-6)
        assert all(square[i][j] == 0.0 for i in range(step) for j in range(i + 1, step))


def test_without_the_causal_mask_past_rows_go_stale():
    run = lab.compare_single_head(causal=False)
    # the newest token attends to every token with or without the mask, so its row agrees ...
    assert run.max_abs_diff_overall < 1e-6
    # ... but the earlier rows change at every step: what a cache kept would no longer be right
    assert run.past_drift > 1e-2
    assert run.outputs_uncached[1][0] != pytest.approx(run.outputs_uncached[0][0], abs=1e-2)


def test_seeding_leaves_the_global_generator_alone():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    lab.compare_single_head()
    assert torch.equal(torch.rand(3), expected)


def test_len_counts_tokens_not_head_dim(seed_run):
    # The seed's KVCache.__len__ returns keys.size(1) = d_head (6) for its (tokens, 6) keys.
    assert seed_run.cache_tokens == [1, 2, 3, 4, 5]
    cache = lab.KVCache()
    assert len(cache) == 0
    cache.append(torch.zeros(3, 16), torch.zeros(3, 16))
    assert len(cache) == 3
    cache.append(torch.zeros(2, 16), torch.zeros(2, 16))
    assert len(cache) == 5 and tuple(cache.keys.shape) == (5, 16)
    cache.truncate(4)
    assert len(cache) == 4
    cache.reset()
    assert len(cache) == 0
    batched = lab.KVCache()
    batched.append(torch.zeros(2, 4, 7, 32), torch.zeros(2, 4, 7, 32))  # (batch, kv_heads, tokens, head_dim)
    assert len(batched) == 7


def test_cache_rejects_mismatched_keys_and_values():
    with pytest.raises(ValueError, match=r"keys and values must agree on all but the last axis, "
                                         r"got \(3, 16\) and \(2, 16\)"):
        lab.KVCache().append(torch.zeros(3, 16), torch.zeros(2, 16))
    with pytest.raises(ValueError, match="tokens must be between 0 and 0, got 1"):
        lab.KVCache().truncate(1)


def test_single_head_bytes_equal_formula_and_estimate(seed_run):
    # 2 (K, V) x 4 B (fp32) x 1 seq x 1 layer x 1 head x 6 dims x 5 tokens = 240 B
    memory = seed_run.memory
    assert (memory.tensor_bytes, memory.formula_bytes, memory.estimate_bytes) == (240, 240, 240)
    assert memory.matches and memory.to_dict()["matches"] is True


@pytest.fixture(scope="module")
def variants():
    return {r.variant: r for r in lab.compare_variants()}  # d_model 64, 2 layers, 8 heads, 24 tokens


def test_decoder_variants_cached_equals_uncached(variants):
    assert [(r.variant, r.kv_heads) for r in variants.values()] == [("MHA", 8), ("GQA", 2), ("MQA", 1)]
    for result in variants.values():
        assert len(result.max_abs_diff) == result.steps == 24
        assert result.max_abs_diff_overall < 1e-6
        assert result.max_abs_logit > 0.1  # the logits are not vanishing, so the bound means something
        assert result.cache_tokens == 24


def test_decoder_variant_bytes_equal_formula_and_estimate(variants):
    # head_dim = 64 / 8 = 8; per token: 2 x 4 B x 2 layers x kv_heads x 8
    expected_per_token = {"MHA": 1024, "GQA": 256, "MQA": 128}
    for name, result in variants.items():
        memory = result.memory
        assert result.bytes_per_token == expected_per_token[name]
        assert memory.tensor_bytes == memory.formula_bytes == memory.estimate_bytes
        assert memory.tensor_bytes == expected_per_token[name] * 24
        assert memory.formula_bytes == kvmem.formula(bytes_per_element=4, batch=1, layers=2,
                                                     kv_heads=result.kv_heads, head_dim=8, tokens=24)
    mha = variants["MHA"].memory.tensor_bytes
    assert mha // variants["GQA"].memory.tensor_bytes == 8 // 2
    assert mha // variants["MQA"].memory.tensor_bytes == 8


def test_deeper_batched_decoder_stays_equivalent():
    results = lab.compare_variants(n_layers=4, batch=2, steps=16, prompt_tokens=5, seed=3)
    for result in results:
        assert result.max_abs_diff_overall < 1e-6
        # 2 seqs x 16 tokens x 2 (K, V) x 4 B x 4 layers x kv_heads x 8
        assert result.memory.tensor_bytes == 2 * 16 * 2 * 4 * 4 * result.kv_heads * 8
        assert result.memory.matches


@pytest.mark.parametrize("kv_heads", [8, 2, 1])
def test_bf16_cache_bytes(kv_heads):
    config = lab.DecoderConfig(d_model=64, n_layers=3, n_heads=8, kv_heads=kv_heads, max_tokens=16)
    model = lab.Decoder(config).to(torch.bfloat16)
    cache = model.new_cache()
    with torch.inference_mode():
        model(torch.zeros(2, 9, dtype=torch.long), cache)
        model(torch.zeros(2, 1, dtype=torch.long), cache)
    memory = lab.memory_check(model, cache, batch=2)
    # 2 (K, V) x 2 B x 2 seqs x 3 layers x kv_heads x 8 x 10 tokens = 1,920 B per KV head
    assert memory.bytes_per_element == 2 and len(cache) == 10
    assert memory.tensor_bytes == memory.formula_bytes == memory.estimate_bytes == 1920 * kv_heads


def test_time_per_token_shows_the_speedup():
    torch.set_num_threads(2)
    rows = lab.time_per_token(lengths=(8, 256), repeats=5, warmup=1)  # measures on 1 thread
    assert torch.get_num_threads() == 2  # and gives the setting back
    torch.set_num_threads(1)
    assert [row["tokens"] for row in rows] == [8, 256]
    for row in rows:
        assert set(row) == {"tokens", "ms_per_token_cached", "ms_per_token_uncached", "speedup"}
        assert row["ms_per_token_cached"] > 0 and row["ms_per_token_uncached"] > 0
        assert row["speedup"] == pytest.approx(row["ms_per_token_uncached"] / row["ms_per_token_cached"])
    short, long = rows
    # at 256 tokens the uncached step reruns 256 tokens through every layer; the cached one runs 1
    assert long["speedup"] > 1
    assert (long["ms_per_token_cached"] / short["ms_per_token_cached"]
            < long["ms_per_token_uncached"] / short["ms_per_token_uncached"])


def test_errors_name_the_field():
    with pytest.raises(ValueError, match=r"kv_heads must divide n_heads \(8\), got 3"):
        lab.DecoderConfig(n_heads=8, kv_heads=3)
    with pytest.raises(ValueError, match=r"d_model must be a multiple of n_heads \(6\), got 64"):
        lab.DecoderConfig(d_model=64, n_heads=6, kv_heads=6)
    with pytest.raises(ValueError, match=r"prompt_tokens must be at most steps \(5\), got 6"):
        lab.compare_single_head(prompt_tokens=6)
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        lab.compare_single_head(steps=0)
    model = lab.Decoder(lab.DecoderConfig(d_model=64, n_heads=8, kv_heads=8, max_tokens=4))
    with pytest.raises(ValueError, match=r"tokens must be at most max_tokens \(4\), got 5"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="cache must hold at least one token"):
        lab.memory_check(model, model.new_cache())
    with pytest.raises(ValueError, match=r"lengths must be at most max_tokens \(4\), got 8"):
        lab.time_per_token(lengths=(8,), config=model.config)


def test_past_drift_is_per_step():
    # issue 23 item 18: step 1 has no earlier rows; each later step's change is its own
    from kvmem.lab import compare_single_head

    causal = compare_single_head(steps=4)
    assert causal.past_drift_steps[0] is None and max(causal.past_drift_steps[1:]) < 1e-6
    loose = compare_single_head(steps=4, causal=False)
    assert loose.past_drift == max(loose.past_drift_steps[1:]) and len(set(loose.past_drift_steps[1:])) == 3
