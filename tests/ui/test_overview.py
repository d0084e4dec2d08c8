"""Overview page (AppTest): models x GPUs from kvmem.sweep; a refused cell shows its reason, never a number."""

import pytest

import kvmem
from tests.ui.apptest import load, run


@pytest.fixture(scope="module")
def page():
    return run("ui/overview.py")


def matrix(at, index=0):
    frame = at.table[index].value
    return {row["Model"]: row for row in frame.to_dict("records")}


def test_every_preset_by_every_gpu_with_fit_numbers_and_refusals(page):
    assert not page.exception
    rows = matrix(page)
    assert len(rows) == len(kvmem.list_models()) and len(page.table[0].value.columns) == 1 + len(kvmem.list_gpus())
    # the sidebar's default: llama-3.1-8b, 8k tokens, batch 1, vLLM, KV auto (bf16): 52 sequences on an H100
    assert rows["llama-3.1-8b"]["h100-sxm-80gb"] == "52" and rows["llama-3.1-8b"]["rtx-4090-24gb"] == "4"
    assert rows["gemma-3n-e2b"]["h100-sxm-80gb"] == "refused: has no parameter count"
    assert rows["llama-2-7b"]["h100-sxm-80gb"] == "refused: past the model's 4,096 positions"
    cells = len(kvmem.list_models()) * len(kvmem.list_gpus())      # 57 x 32 when this was written
    assert any(c.value.startswith(f"{cells:,} cells, ") for c in page.caption)


def test_concurrency_and_a_second_engine():
    at = load("ui/overview.py")
    at.query_params["ov_models"] = ["llama-3.1-8b", "qwen3-8b"]
    at.query_params["ov_gpus"] = ["h100-sxm-80gb", "rtx-4090-24gb"]
    at.run()
    at.multiselect(key="ov_engines").set_value(["sglang"])      # beside the sidebar's vllm
    at.radio(key="ov_show").set_value("max concurrency")
    at.run()
    assert not at.exception
    assert [s.value for s in at.subheader] == ["vllm: max concurrency at 8,192 tokens, batch 1",
                                               "sglang: max concurrency at 8,192 tokens, batch 1"]
    vllm, sglang = matrix(at, 0), matrix(at, 1)
    assert vllm["llama-3.1-8b"]["h100-sxm-80gb"] == "52.13x"    # vLLM's "Maximum concurrency"
    fit = kvmem.fit("llama-3.1-8b", gpu="rtx-4090-24gb", context=8192, batch=1, engine="sglang")
    assert sglang["llama-3.1-8b"]["rtx-4090-24gb"] == f"{fit.engine_numbers.max_concurrency:,.2f}x"


def test_the_app_lists_the_page():
    at = load()
    at.run()
    at.switch_page("ui/overview.py")
    at.run()
    assert not at.exception and at.title[0].value == "Overview: models × GPUs"
