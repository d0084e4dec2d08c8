"""Compare page (AppTest): the rows shown equal kvmem.estimate for each model/dtype/engine."""

import pytest

import kvmem
from tests.ui.apptest import run


@pytest.fixture
def page():
    return run("ui/compare.py")


def test_default_rows_are_library_numbers(page):
    assert not page.exception
    frame = page.table[0].value
    for _, row in frame.iterrows():
        expected = kvmem.estimate(row["Model"], engine=row["Engine"], tokens=8192, kv_dtype=row["KV dtype"])
        assert row["KV (bytes)"] == expected.kv_bytes
    assert set(frame["Model"]) == {"llama-3.1-8b", "qwen3-8b", "gemma-3-27b", "deepseek-v3"}


def test_dtypes_multiply_rows(page):
    page.multiselect(key="cmp_engines").set_value(["ideal"])
    page.multiselect(key="cmp_dtypes").set_value(["bf16", "fp8", "q4_0"]).run()
    frame = page.table[0].value
    assert len(frame) == 4 * 3
    llama = frame[frame["Model"] == "llama-3.1-8b"].set_index("KV dtype")["Bytes per token"]
    assert llama["bf16"] == 131072 and llama["fp8_e4m3"] == 65536 and llama["q4_0"] == 32 * 8 * 2 * (128 // 32) * 18


def test_a_format_an_engine_refuses_is_a_warning_not_an_error(page):
    page.multiselect(key="cmp_engines").set_value(["vllm"])
    page.multiselect(key="cmp_dtypes").set_value(["bf16", "q4_0"]).run()
    assert not page.exception
    assert not page.warning  # grouped in one expandable list, not stacked warnings
    skipped = [e for e in page.expander if "skipped" in e.label]
    assert len(skipped) == 1 and skipped[0].label.startswith("4 combination(s) skipped")
    assert any("q4\\_0" in m.value for m in skipped[0].markdown)  # shown as plain text
    assert set(page.table[0].value["KV dtype"]) == {"bf16"}


def test_many_series_stay_distinguishable(page):
    # 4 models x 3 formats x 2 engines = 24 series: one model's lines at a time, one spelling of fp8
    import json

    page.multiselect(key="cmp_engines").set_value(["ideal", "sglang"])
    page.multiselect(key="cmp_dtypes").set_value(["bf16", "fp8", "int8"]).run()
    assert not page.exception
    lines = json.loads(page.get("plotly_chart")[1].proto.spec)["data"]
    names = [t["name"] for t in lines]
    assert len(names) <= 10 and all(n.startswith("llama-3.1-8b") for n in names)
    styles = {(i % 10, t["line"]["dash"]) for i, t in enumerate(lines)}
    assert len(styles) == len(lines)
    assert not any(" · fp8 · " in n for n in names)  # the format in force: fp8_e4m3
    page.selectbox(key="cmp_lines_model").set_value("qwen3-8b").run()
    names = [t["name"] for t in json.loads(page.get("plotly_chart")[1].proto.spec)["data"]]
    assert names and all(n.startswith("qwen3-8b") for n in names)


def test_nothing_selected_is_a_hint(page):
    page.multiselect(key="cmp_engines").set_value([]).run()
    assert not page.exception and page.info
