"""One contract for a workload that does not fit (issue 33 finding 8): kvmem.fit raised FitError when not one
sequence fitted but returned .fits False when fewer than the batch did. Now both are a Fit with .fits False
and .why_not; fit raises only for inputs it cannot size (docs/api.md: .fits (bool))."""

import pytest

import kvmem


def test_not_one_sequence_is_a_fit_not_an_exception():
    # Llama-3.1-70B bf16 (131.45 GiB) on one H100 at 8k: not one sequence
    result = kvmem.fit("llama-3.1-70b", gpu="h100-sxm-80gb", context=8192)
    assert (result.fits, result.max_batch) == (False, 0)
    assert result.why_not.startswith("llama-3.1-70b does not fit on 1 x h100-sxm-80gb (vllm, tp=1, pp=1, weights "
                                     "bf16, KV bf16): one sequence of 8,192 tokens needs")
    assert result.to_dict()["why_not"] == result.why_not


def test_fewer_than_the_batch_says_why_too():
    # the README's: Llama-3.3-70B fp8 on 2 x H100 at 32k, batch 16: 14 fit
    result = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=16, kv_dtype="fp8",
                       weight_dtype="fp8")
    assert (result.fits, result.max_batch) == (False, 14)
    assert result.why_not.startswith("llama-3.3-70b holds 14 sequences of 32,768 tokens on 2 x h100-sxm-80gb "
                                     f"(vllm), not 16: short by {kvmem.format_bytes(result.shortfall_bytes)}")
    assert "What would fit: " in result.why_not and "batch <= 14 at 32,768 tokens" in result.why_not


def test_a_fitting_workload_has_no_why_not_and_bad_inputs_still_raise():
    assert kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=8192).why_not is None
    with pytest.raises(ValueError, match="tp=3 must divide the model's 32 attention heads"):
        kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=3, context=8192)
