"""Overview page (AppTest): models x GPUs from kvmem.sweep; a refused cell shows its reason, never a number."""

import pytest

import kvmem
from tests.ui.apptest import load, run


@pytest.fixture(scope="module")
def page():
    return run("ui/overview.py")        # the whole matrix in one view (tests/conftest.py: KVMEM_VIEW_SECONDS)


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


def test_every_engine_at_once_is_sized_a_view_at_a_time(monkeypatch):
    """Issue 32 M7: one link with all 8 engines held the server 15-42 s (every preset x every GPU x 8); a view
    sizes new rows for at most KVMEM_VIEW_SECONDS (0: the sidebar's model, then a cell a press)."""
    monkeypatch.setenv("KVMEM_VIEW_SECONDS", "0")
    at = load("ui/overview.py")
    at.query_params["ov_engines"] = ["sglang", "trtllm"]
    at.query_params["ov_models"] = ["llama-3.1-8b", "qwen3-8b"]
    at.query_params["ov_gpus"] = ["h100-sxm-80gb", "rtx-4090-24gb"]
    at.run()
    assert not at.exception
    assert [s.value.split(":")[0] for s in at.subheader] == ["vllm"]      # the sidebar's model under its engine
    assert list(matrix(at)) == ["llama-3.1-8b"] and any("(1 of 2 models sized)" in c.value for c in at.caption)
    assert at.info[0].value.startswith("Not sized yet: 1 of 2 models under vllm; 2 of 2 models under sglang; "
                                       "2 of 2 models under trtllm. One view sizes new cells for at most 0 s "
                                       "(KVMEM_VIEW_SECONDS), so that one page never holds the server for long: size "
                                       "the next, or choose fewer models or GPUs.")
    seen = []                                   # 0 s: then one cell a press (2 GPUs: 2 presses a row)
    while at.info:
        at.button(key="ov_next").click().run()
        seen.append(([s.value.split(":")[0] for s in at.subheader], len(at.table)))
        if len(seen) == 1:                      # a row under way is said, not shown
            assert at.info[0].value.startswith("Not sized yet: 1 of 2 models under vllm (qwen3-8b on 1 of 2 GPUs "
                                               "so far); 2 of 2 models under sglang;")
    one, two, three = (["vllm"], 1), (["vllm", "sglang"], 2), (["vllm", "sglang", "trtllm"], 3)
    assert seen == [one, one, one, two, two, two, two, three, three, three]    # a matrix once a row is whole
    assert not at.info and all(list(matrix(at, i)) == ["llama-3.1-8b", "qwen3-8b"] for i in range(3))
    fit = kvmem.fit("qwen3-8b", gpu="h100-sxm-80gb", context=8192, batch=1, engine="trtllm")
    assert matrix(at, 2)["qwen3-8b"]["h100-sxm-80gb"] == f"{fit.max_batch:,}"


def test_llama_cpp_sizes_a_view_at_a_time_not_every_preset_at_once(monkeypatch):
    """Under llama.cpp every cell is a placement over GPU and host: every preset x every GPU took 217 s of CPU
    (bench/README.md), one view of the page held the server that long. The first view sizes the sidebar's model."""
    monkeypatch.setenv("KVMEM_VIEW_SECONDS", "0")
    at = load("ui/overview.py")
    at.query_params["engine"] = "llama.cpp"
    at.run()
    assert not at.exception
    rows, models = matrix(at), len(kvmem.list_models())
    assert list(rows) == ["llama-3.1-8b"]
    assert any(c.value.endswith("what that card's placement of one sequence (layers and experts over GPU and host) "
                                "holds: a bigger card, keeping more on its GPU, can show fewer.") for c in at.caption)
    assert at.info[0].value.startswith(f"Not sized yet: {models - 1:,} of {models:,} models under llama.cpp.")
    fit = kvmem.fit("llama-3.1-8b", gpu="rtx-3060-12gb", context=8192, batch=1, engine="llama.cpp")
    assert rows["llama-3.1-8b"]["rtx-3060-12gb"] == f"{fit.max_batch:,}"


def test_a_bad_view_budget_is_said_and_the_default_kept(monkeypatch):
    from ui.common import VIEW_SECONDS
    monkeypatch.setenv("KVMEM_VIEW_SECONDS", "soon")
    at = load("ui/overview.py")
    at.query_params["ov_models"] = ["llama-3.1-8b"]
    at.query_params["ov_gpus"] = ["h100-sxm-80gb"]
    at.run()
    assert not at.exception and at.warning[0].value == ("KVMEM_VIEW_SECONDS='soon' is not a number of seconds "
                                                        f"(0 or more): {VIEW_SECONDS:g} s per view.")
    assert list(matrix(at)) == ["llama-3.1-8b"]
