"""Fit reports the engine's own numbers, the real reserve beside the shortfall, no decode bound for a
workload that does not run, and one answer to "what would fit" (issues #21 item 4, #23 items 1, 7, 8)."""

import json
import subprocess
import sys

import pytest

import kvmem
from kvmem.sizing import part_names

GIB = 1 << 30


def _fit_or_error(**kw):
    return kvmem.fit(**kw)          # a workload that does not fit is a Fit (.fits False), never raised


def test_vllm_fit_carries_gpu_kv_cache_size_and_maximum_concurrency():
    # Issue #21: Llama-3.3-70B on 2 x H100, fp8 weights and KV, 32k: vLLM prints 435,936 tokens, 13.30x.
    # 27,246 blocks of 16 tokens; one request of 32,768 tokens takes 2,048 blocks: 27,246 / 2,048 = 13.3037x,
    # int(13.3037109375 x 32,768) = 435,936 (vllm/v1/core/kv_cache_utils.py get_kv_cache_capacity).
    # That run kept vLLM's default max_num_seqs, 1,024 on an H100 (fit's own default is the batch, as plan sets it)
    r = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", kv_dtype="fp8", weight_dtype="fp8",
                  max_num_seqs=1024)
    n = r.engine_numbers
    assert (n.engine, n.tokens, n.context) == ("vllm", 435_936, 32_768)
    assert n.max_concurrency == 27_246 / 2_048
    # the budget is what weights, the profile peak and overhead leave: 35,711,901,335 B = 33.26 GiB (estimated)
    assert n.lines == ("Available KV cache memory: 33.26 GiB",
                       "GPU KV cache size: 435,936 tokens, Maximum concurrency for 32,768 tokens per request: 13.30x")
    assert not n.exact and n.depends_on.startswith("the profile run's peak")
    assert r.to_dict()["engine_numbers"]["tokens"] == 435_936


def test_sglang_trtllm_and_llamacpp_numbers():
    s = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="sglang").engine_numbers
    assert s.tokens_label == "max_total_num_tokens" and s.tokens == 415_937
    assert s.lines[0].startswith("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 415937,")
    t = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="trtllm").engine_numbers
    # 460,200 // 32 = 14,381 blocks (TRT-LLM's pinned main floors) / 1,024 blocks a 32k sequence
    assert t.tokens == 460_200 and t.max_concurrency == pytest.approx(14_381 / 1024)
    # llama.cpp: -c 65,536 (2 x 32k) -np 2: 2 streams of 32,768 cells
    c = kvmem.fit("llama-3.1-8b", gpu="rtx-4090-24gb", context="32k", engine="llama.cpp", batch=2).engine_numbers
    assert (c.tokens, c.max_concurrency, c.exact) == (65_536, 2.0, True)
    assert "( 32768 cells,  32 layers,  2/2 seqs)" in c.lines[0]


def test_a_workload_that_does_not_fit_draws_the_real_reserve_and_the_shortfall_apart():
    # Issue #23 item 1: the reserve is 0.1 x 79.22 GiB whether it fits or not; the 1.35 GiB lacking is its own part
    # (activations at max_num_seqs 1, the batch: the forward at 8,192 tokens, 1,241,513,984 B, passes the sampler's
    # 1 x 128,256 x 28 B)
    r = _fit_or_error(model="llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k")
    b = r.breakdown
    assert not r.fits
    assert b["free"] == 8_506_182_730 == kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="8k"
                                                    ).breakdown["free"]
    assert b["shortfall"] == r.shortfall_bytes == 1_447_145_833
    assert b["activations"] == 1_241_513_984
    assert b["weights"] + b["kv_pool"] + b["activations"] + b["overhead"] + b["free"] == b["total"]
    assert part_names("vllm")["free"].startswith("reserve outside vLLM's budget")


def test_no_decode_bound_for_a_workload_that_does_not_fit():
    r = _fit_or_error(model="llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=4)
    assert not r.fits and r.decode_tokens_per_s is None and r.decode_tokens_per_s_aggregate is None
    assert kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k").decode_tokens_per_s > 0


def test_what_would_fit_names_vllms_raised_budget_once_for_everyone():
    # Issue #23 item 8: the app listed gpu_memory_utilization=0.95, kvmem fit did not: now the library does.
    r = _fit_or_error(model="llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k")
    assert "gpu_memory_utilization=0.95 (max batch 1)" in r.suggestions
    raised = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", gpu_memory_utilization=0.95)
    assert raised.fits and raised.max_batch == 1


def test_cli_fit_prints_the_engine_numbers_reserve_and_shortfall():
    out = subprocess.run([sys.executable, "-m", "kvmem", "fit", "llama-3.3-70b", "--gpu", "h100-sxm-80gb",
                          "--num-gpus", "2", "--context", "32k", "--json"], capture_output=True, text=True)
    data = json.loads(out.stdout)
    assert out.returncode == 1
    assert data["breakdown"]["free"] == 8_506_182_730 and data["breakdown"]["shortfall"] == 1_447_145_833
    assert data["decode_tokens_per_s"] is None
    assert "gpu_memory_utilization=0.95 (max batch 1)" in data["suggestions"]
    text = subprocess.run([sys.executable, "-m", "kvmem", "fit", "llama-3.3-70b", "--gpu", "h100-sxm-80gb",
                           "--num-gpus", "2", "--context", "32k", "--kv-dtype", "fp8", "--weight-dtype", "fp8",
                           "-o", "max_num_seqs=1024"], capture_output=True, text=True).stdout   # issue 21's run
    assert "vllm reports: GPU KV cache size (tokens) 435,936; concurrency 13.30x for 32,768 tokens per request" in text
    assert "decode bound:" in text
    short = subprocess.run([sys.executable, "-m", "kvmem", "fit", "llama-3.3-70b", "--gpu", "h100-sxm-80gb",
                            "--num-gpus", "2", "--context", "32k"], capture_output=True, text=True).stdout
    assert "reserve outside vLLM's budget (1 - gpu_memory_utilization) 7.92 GiB" in short.replace("−", "-")
    assert "short of vllm's KV budget 1.35 GiB" in short and "decode bound" not in short
