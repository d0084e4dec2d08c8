"""What would fit (kvmem.sizing.suggest): every lever is re-checked by fit's own search and is one
kvmem.plan writes a command for (issue 33, findings 2 and 3)."""

import pytest

import kvmem
from kvmem.launch import plan


def _fit(model, **kwargs):
    return kvmem.fit(model, **kwargs)


WORKLOADS = [
    ("llama-3.1-70b", dict(gpu="h100-sxm-80gb", context=8192)),
    ("llama-3.1-8b", dict(gpu="h100-sxm-80gb", context="128k", batch=64, engine="vllm")),
    ("llama-3.1-8b", dict(gpu="h100-sxm-80gb", context="128k", batch=64, engine="sglang")),
    ("llama-3.1-8b", dict(gpu="h100-sxm-80gb", context="128k", batch=64, engine="trtllm")),
    ("qwen3-32b", dict(gpu="rtx-4090-24gb", num_gpus=2, context="32k", weight_dtype="fp8", kv_dtype="bf16",
                       max_num_seqs=256)),
]


@pytest.mark.parametrize("model, kwargs", WORKLOADS)
def test_each_suggestion_fits_again_and_plans(model, kwargs):
    result = _fit(model, **kwargs)
    assert not result.fits and result.suggestions
    suggested = [lever for lever in result.levers if lever.plan_refused is None]
    assert [lever.text for lever in suggested] == list(result.suggestions)
    for lever in suggested:
        changed = {**kwargs, **lever.change}
        again = _fit(model, **changed)
        assert again.fits, lever.text
        assert again.max_batch == lever.max_batch, lever.text          # the same search's answer
        plan(model, **changed)                                         # a command, not PlanRefused


def test_awq_is_not_suggested_for_a_bf16_checkpoint():
    # Llama-3.1-70B bf16 on one H100 at 8k: AWQ weights would fit, but vLLM reads AWQ from an AWQ checkpoint
    # only (kvmem plan: "give that checkpoint instead"); it was suggested before
    result = _fit("llama-3.1-70b", gpu="h100-sxm-80gb", context=8192)
    assert result.suggestions == ("2 GPUs per replica (tp=2)",)
    assert all("awq" not in text for text in result.suggestions)


def test_a_given_max_num_seqs_is_a_lever():
    # Qwen3-32B fp8 on 2 x RTX 4090, bf16 KV, 32k, max_num_seqs=256: the sampler's profile peak at 256
    # sequences leaves 169 MiB too little; at max_num_seqs=1 one sequence fits (the repro)
    result = _fit("qwen3-32b", gpu="rtx-4090-24gb", num_gpus=2, context="32k", weight_dtype="fp8",
                  kv_dtype="bf16", max_num_seqs=256)
    assert not result.fits
    assert "max_num_seqs as kvmem plan sets it, not 256" in result.suggestions
    assert _fit("qwen3-32b", gpu="rtx-4090-24gb", num_gpus=2, context="32k", weight_dtype="fp8",
                kv_dtype="bf16", max_num_seqs=1).fits


def test_a_lever_plan_refuses_is_named_not_suggested():
    # TensorRT-LLM: one trtllm-serve per replica; 22 replicas fit but plan writes no command for them
    result = _fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="128k", batch=64, engine="trtllm")
    refused = [lever for lever in result.levers if lever.plan_refused]
    assert [lever.text for lever in refused] == ["22 GPUs as 22 replicas of tp=1 x pp=1 (3 sequences each)"]
    assert refused[0].plan_refused.startswith("trtllm: 22 replicas need 22 servers")
    assert not any("replicas" in text for text in result.suggestions)
    assert result.to_dict()["levers"][0]["plan_refused"] == refused[0].plan_refused


def test_llamacpp_extra_gpus_are_layer_splits_never_replicas():
    # kvmem.fit(engine="llama.cpp", num_gpus=22) splits layers over 22 GPUs (pp=22): "22 replicas of pp=1"
    # cannot be asked of fit or plan, so no lever says it
    from dataclasses import replace

    from kvmem.sizing.setup import make_setup
    from kvmem.sizing.suggest import _checked
    s, _ = make_setup("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=1, tp=None, pp=1, context=8192, batch=64,
                      weight_dtype="auto", kv_dtype="auto", engine="llama.cpp", gpu_memory_utilization=0.9,
                      options={})
    assert _checked(replace(s, num_gpus=22)) is None
    assert _checked(replace(s, num_gpus=2, pp=2)) is not None
