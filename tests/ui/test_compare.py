"""Compare page (AppTest): the rows shown equal kvmem.estimate for each model/dtype/engine."""

import pytest

import kvmem
from tests.ui.apptest import load, run


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


def _variants(model: str) -> tuple:
    at = load("ui/compare.py")
    at.query_params.update({"model": model, "tokens": "32k", "engine": "ideal"})
    at.run()
    assert not at.exception
    table = at.table[-1]
    return table.value, table.proto.arrow_data.styler.display_values.decode("utf-8", errors="replace")


def test_variants_keep_small_rows_legible_and_say_larger():
    # issue 23 item 4: DeepSeek-V3 as MHA (152.5 GiB) beside GQA-2's 2.38 and MQA's 1.19 GiB showed "2" and "1";
    # item 17: MHA's "Saved -7011.1%" is 128 heads x (192 + 128) x 2 / 576 = 71x the latent
    frame, shown = _variants("deepseek-v3")
    gib = dict(zip(frame["Attention"], frame["GiB"], strict=True))
    assert gib["GQA-2"] == 2.3828125 and gib["MQA"] == 1.19140625
    assert "152.52.4" not in shown and "2.41.2" in shown  # GQA-2 then MQA, one decimal each (the smallest is 1.09)
    assert "71× larger" in shown and "-7011" not in shown


def test_a_windowed_model_shows_what_its_windows_save():
    # issue 23 item 27: Gemma-3-27B at 32k, every layer full: 62 x 16 x 128 x 2 x 2 B x 32,768 = 16,642,998,272 B
    frame, shown = _variants("gemma-3-27b")
    row = frame[frame["Attention"] == "no sliding window"]
    assert list(row["GiB"]) == [16_642_998_272 / 2**30] and "5.3× larger" in shown
