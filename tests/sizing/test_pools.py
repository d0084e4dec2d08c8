"""A pool-based engine's verdict: the workload fits only where every pool it makes serves it
(SizingRules.pools_refuse), not where the pools' bytes add up to the request's (issue 33 item 1)."""


import kvmem
from kvmem.engines.sglang.admission import pools_refuse

GPT_OSS = dict(gpu="h100-sxm-80gb", engine="sglang")


def test_gpt_oss_120b_at_128k_does_not_fit_sglangs_full_pool():
    # SGLang's hybrid-SWA split of the ~4.96 GiB budget (5,329,522,837 B) leaves the full-attention layers
    # int(5,329,522,837 // 66,355.2) = 80,318 tokens (its own pool_configurator, run in
    # tests/oracles/test_hybrid_verdicts_oracle.py; concurrency 0.61x), fewer than one 131,072-token request, though
    # both pools' bytes exceed the request's 4.50 GiB
    result = kvmem.fit("gpt-oss-120b", context="128k", **GPT_OSS)
    assert ("full-attention pool holds 80,318 tokens (max_total_num_tokens), fewer than the 131,072 that one "
            "request of 131,072 tokens takes") in result.why_not
    assert (result.fits, result.max_batch, result.max_context) == (False, 0, 80_318)
    assert result.capacity.details.full_layer_tokens == 80_318
    assert result.breakdown.kv_pool_bytes >= result.kv_bytes_per_sequence    # the bytes alone would have said yes


def test_the_longest_context_sglang_serves_is_its_full_pool():
    fit = kvmem.fit("gpt-oss-120b", context=80_318, **GPT_OSS)
    assert (fit.fits, fit.max_batch) == (True, 1)
    assert not kvmem.fit("gpt-oss-120b", context=80_319, **GPT_OSS).fits
    plan = kvmem.fit("gpt-oss-120b", context="32k", **GPT_OSS)
    # 80,318 pool tokens hold two whole 32,768-token requests (pages of 1), not three
    assert plan.max_batch == 2 and plan.engine_numbers.max_concurrency >= 2


def test_pools_refuse_names_each_pool_and_the_request_cap():
    model = kvmem.get_model("gpt-oss-120b")
    opts = dict(kvmem.engines.engine_spec("sglang").options)
    budget = 4 << 30
    assert pools_refuse(model, kv_memory=budget, tokens=4096, batch=1, kv_dtype="auto", tp=1, pp=1, **opts) is None
    why = pools_refuse(model, kv_memory=budget, tokens=4096, batch=100, kv_dtype="auto", tp=1, pp=1, **opts)
    assert why.startswith("SGLang's full-attention pool holds ") and "that 100 requests of 4,096 tokens take" in why
    opts["max_running_requests"] = 3
    why = pools_refuse(model, kv_memory=budget, tokens=4096, batch=4, kv_dtype="auto", tp=1, pp=1, **opts)
    assert why == "SGLang admits 3 requests at once (max_running_requests), fewer than 4"


def test_an_engine_without_pools_is_decided_by_bytes():
    fit = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="trtllm")
    assert kvmem.engines.engine_spec("trtllm").sizing.pools_refuse is None and fit.fits


def test_vllm_admits_the_floor_of_its_maximum_concurrency():
    # gemma-3-27b at 8,920 tokens on one A100-80GB: vLLM's own planning on kvmem's 21,396,780,748 B budget
    # prints 4.17x (tests/oracles/test_hybrid_verdicts_oracle.py); each request reserves 8,920 tokens in its
    # sliding groups too (window 1,024 + 8,192 in flight), so 4 run at once, though the bytes held 17
    fit = kvmem.fit("gemma-3-27b", gpu="a100-80gb", context=8920, engine="vllm")
    assert (fit.max_batch, f"{fit.capacity.max_concurrency:.2f}") == (4, "4.17")
    why = kvmem.fit("gemma-3-27b", gpu="a100-80gb", context=8920, engine="vllm", batch=5).why_not
    assert "not 5: vLLM admits 4 requests of 8,920 tokens at once (Maximum concurrency 4.17x)" in why
