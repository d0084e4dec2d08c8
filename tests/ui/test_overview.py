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
    # Model, Group, one column per GPU, and the refusals' reasons once per row (issue 33 finding 8: a 58 x 32
    # wall of "refused: has no parameter count" repeated in every cell)
    assert len(rows) == len(kvmem.list_models()) and len(page.table[0].value.columns) == 3 + len(kvmem.list_gpus())
    # the sidebar's default: llama-3.1-8b, 8k tokens, batch 1, vLLM, KV auto (bf16): 52 sequences on an H100
    assert rows["llama-3.1-8b"]["h100-sxm-80gb"] == "54" and rows["llama-3.1-8b"]["rtx-4090-24gb"] == "5"
    # gemma-3n-e2b was refused ("has no parameter count") until its preset was completed (test_params_new.py)
    assert rows["gemma-3n-e2b"]["h100-sxm-80gb"] == "194" and rows["gemma-3n-e2b"]["why refused"] == ""
    assert rows["llama-2-7b"]["why refused"] == "past the model's 4,096 positions"
    assert rows["llama-3.1-8b"]["Group"] == "fits on some GPU" and rows["llama-2-7b"]["Group"] == "refused on every GPU"
    groups = list(page.table[0].value["Group"])
    assert page.table[0].value["Model"][0] == "llama-3.1-8b"           # the sidebar's model first, then grouped
    assert groups[1:] == sorted(groups[1:], key=["fits on some GPU", "fits on none", "refused on every GPU"].index)
    styles = page.table[0].proto.arrow_data.styler.styles
    assert "rgba(46, 160, 67, 0.22)" in styles and "font-style: italic" in styles     # fits green, refused grey
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
    assert vllm["llama-3.1-8b"]["h100-sxm-80gb"] == "54.71x"    # vLLM's "Maximum concurrency"
    fit = kvmem.fit("llama-3.1-8b", gpu="rtx-4090-24gb", context=8192, batch=1, engine="sglang")
    assert sglang["llama-3.1-8b"]["rtx-4090-24gb"] == f"{fit.engine_numbers.max_concurrency:,.2f}x"


def test_the_app_lists_the_page():
    at = load()
    at.run()
    at.switch_page("ui/overview.py")
    at.run()
    assert not at.exception and at.title[0].value == "Overview: models × GPUs"


def test_every_engine_at_once_is_sized_one_budget_per_view():
    """Issue 32 M7: one link with all 8 engines held the server 15-42 s (every preset x every GPU x 8);
    a view now sizes at most MAX_NEW_CELLS new cells, the rest one press at a time."""
    from ui.overview import MAX_NEW_CELLS
    at = load("ui/overview.py")
    at.query_params["ov_engines"] = ["sglang", "trtllm"]
    at.run()
    per_engine = len(kvmem.list_models()) * len(kvmem.list_gpus())          # 64 x 32 = 2,048 when written
    assert MAX_NEW_CELLS < 2 * per_engine                 # the sidebar's engine always; a second waits
    assert [s.value.split(":")[0] for s in at.subheader] == ["vllm"]
    assert at.info[0].value.startswith(f"Not sized yet: sglang, trtllm. The Overview sizes at most "
                                       f"{MAX_NEW_CELLS:,} new cells per view")
    at.button(key="ov_next").click().run()
    assert [s.value.split(":")[0] for s in at.subheader] == ["vllm", "sglang"]
    assert at.info[0].value.startswith("Not sized yet: trtllm.")
    at.button(key="ov_next").click().run()
    assert [s.value.split(":")[0] for s in at.subheader] == ["vllm", "sglang", "trtllm"] and not at.info
    fit = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=8192, batch=1, engine="trtllm")
    assert matrix(at, 2)["llama-3.1-8b"]["h100-sxm-80gb"] == f"{fit.max_batch:,}"
