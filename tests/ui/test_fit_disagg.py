"""Fit page, Deploy panel: the disaggregated prefill/decode toggle with URL state (issue 36 item 4): the library's
per-role GPUs, one command per role, per-GPU memory per role drawn."""

import kvmem
from kvmem.disagg import disaggregate
from tests.ui.apptest import load


def test_disaggregation_from_a_link():
    at = load("ui/fit.py")
    at.query_params.update({"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "num_gpus": "4", "tokens": "5k",
                            "engine": "sglang", "deploy_disagg": "true", "disagg_output": "1024",
                            "disagg_rate": "10.0", "disagg_prefill_gpus": "4", "disagg_decode_gpus": "4"})
    at.run(timeout=120)
    assert not at.exception
    assert at.toggle(key="deploy_disagg").value is True
    expected = disaggregate("llama-3.1-70b", gpu="h100-sxm-80gb", engine="sglang", prompt_tokens=5120 - 1024,
                            output_tokens=1024, request_rate=10.0, prefill_gpus=4, decode_gpus=4,
                            weight_dtype="auto", kv_dtype=kvmem.defaults.KV_DTYPE)
    captions = [c.value for c in at.caption]
    assert any(c.startswith(f"{expected.gpus} GPUs: {expected.prefill.instances} × 4 prefill, "
                            f"{expected.decode.instances} × 4 decode") for c in captions), captions
    codes = [c.value for c in at.code]
    assert any(code.endswith("--disaggregation-mode decode") for code in codes)
    assert any(code.endswith("--disaggregation-mode prefill") for code in codes)
    assert len(at.get("vega_lite_chart")) == 1        # one GPU's memory per role, drawn
