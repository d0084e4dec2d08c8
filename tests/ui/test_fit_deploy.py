"""Fit page: the engine's numbers, the formats in the headline and chart, the real reserve and the
shortfall, and the Deploy panel's command in the shared URL (issues #21 items 1 and 4, #23 items 1, 7, 15)."""

import json

import kvmem
from tests.ui.apptest import load

SEVENTY_B = {"model": "llama-3.3-70b", "gpu": "h100-sxm-80gb", "num_gpus": "2", "tp": "2", "tokens": "32k",
             "kv_dtype": "fp8", "weight_dtype": "fp8"}


def _page(params: dict):
    at = load("ui/fit.py")
    at.query_params.update(params)
    return at.run()


def test_engine_numbers_formats_and_the_deploy_command():
    at = _page({**SEVENTY_B, "deploy_target": "largest batch"})
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["GPU KV cache size (tokens)"] == "435,936"
    assert metrics["Concurrency at 32,768 tokens"] == "13.30x"
    assert at.subheader[0].value.replace("\\", "") == "llama-3.3-70b on 2 × h100-sxm-80gb (KV fp8, weights fp8): fits"
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert "KV fp8, weights fp8" in title
    expected = kvmem.plan("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, tp=2, context="32k", batch=1,
                          kv_dtype="fp8", weight_dtype="fp8", engine="vllm", target="max_batch")
    codes = [c.value for c in at.code]
    assert expected.command in codes and "--max-num-seqs 13" in expected.command
    assert at.radio(key="deploy_target").value == "largest batch"


def test_not_fitting_has_no_command_no_decode_bound_and_draws_the_shortfall_apart():
    at = _page({"model": "llama-3.3-70b", "gpu": "h100-sxm-80gb", "num_gpus": "2", "tokens": "32k", "kv_dtype": "bf16"})
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Decode bound"] == "—"
    assert any(i.value.startswith("No command: no command: llama-3.3-70b does not fit") for i in at.info)
    traces = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    by_name = {t["name"]: t["x"][0] for t in traces}
    assert round(by_name["reserve outside vLLM's budget (1 − gpu_memory_utilization)"], 2) == 7.92
    assert round(by_name["short of vllm's KV budget"], 2) == 3.62
