"""Strategies page (AppTest): tables and metrics come from kvmem.strategies / kvmem.estimate;
one tab's results at a time, every tab's inputs always in the session and the URL."""

import pytest

import kvmem
from tests.ui.apptest import load, run

SHARING = "Prefix sharing and offloading"


@pytest.fixture
def page():
    return run("ui/strategies.py")


def tab(view: str, query=None):
    """The page with tab ``view`` open, as a link with ``?strategy_view=...`` opens it."""
    at = load("ui/strategies.py")
    at.query_params.update({"strategy_view": view, **(query or {})})
    return at.run()


def test_only_the_open_tab_is_computed_and_drawn(page):
    assert len(page.get("plotly_chart")) == 1 and len(page.table) == 1  # Side by side
    assert not page.metric
    eviction = tab("Eviction")
    charts = eviction.get("plotly_chart")
    assert len(charts) == 1 and "KV cache vs tokens generated" in charts[0].proto.spec and not eviction.table
    sharing = tab(SHARING)
    assert not sharing.get("plotly_chart") and [m.label for m in sharing.metric][0] == "KV on the device"


def test_every_tab_keeps_its_inputs_while_another_is_open():
    # (switching tabs in the browser: tests/e2e/test_state.py)
    at = tab("Eviction", {"prefix": "4096", "max_model_len": "16k"})
    assert not at.exception and "KV cache vs tokens generated" in at.get("plotly_chart")[0].proto.spec
    assert at.number_input(key="prefix").value == 4096 and at.text_input(key="max_model_len").value == "16k"
    assert at.query_params["prefix"] == "4096" and at.query_params["max_model_len"] == "16k"


def test_a_tab_name_the_page_does_not_have_is_refused():
    at = load("ui/strategies.py")
    at.query_params.update({"strategy_view": "Paging"})
    at.run()
    at.run()
    message = " ".join(w.value for w in at.warning)
    assert "`strategy_view=Paging` refused: not one of the choices (Side by side, Eviction" in message
    assert len(at.get("plotly_chart")) == 1  # the first tab instead


def test_strategy_table_equals_library(page):
    assert not page.exception
    rows = kvmem.compare_strategies("llama-3.1-8b", tokens=8192, engine="vllm", kv_dtype="bf16", budget=1024,
                                    residual_length=128, gpu="h100-sxm-80gb")
    shown = page.table[0].value
    assert list(shown["Strategy"]) == [r["strategy"] for r in rows]


def test_offload_and_prefix():
    page = tab(SHARING)
    page.number_input(key="batch").set_value(8)
    page.number_input(key="prefix").set_value(4096)
    page.slider(key="offload").set_value(0.5)
    page.run()
    expected = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens=8192, batch=8, kv_dtype="bf16",
                              shared_prefix=4096, offload=0.5)
    values = {m.label: m.value for m in page.metric}
    assert values["KV on the device"] == kvmem.format_bytes(expected.kv_bytes)
    assert values["KV in host memory"] == kvmem.format_bytes(expected.offload.host_kv_bytes)


def test_bad_budget_strings_are_messages():
    page = tab("Paged vs contiguous")
    page.text_input(key="kv_memory").set_value("lots").run()
    assert not page.exception and "KV memory budget" in page.error[0].value


def test_gpu_without_a_host_link_figure_is_a_dash_not_an_error():
    page = tab(SHARING)
    page.selectbox(key="gpu").set_value("rtx-3090-24gb")
    page.slider(key="offload").set_value(0.5)
    page.run()
    assert not page.exception
    assert {m.label: m.value for m in page.metric}["Host transfer per decode step (PCIe)"] == "—"


def test_strategies_page_explains_itself():
    at = tab("Paged vs contiguous")
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "sample of 500 request lengths" in captions and "**sharegpt**" in captions and "**fixed**" in captions
    assert "Not used on this tab: tokens, batch, engine, engine options" in captions
    # Llama-3.1-8B already has 8 KV heads: no "GQA-8" variant that would need retraining for nothing
    variants = tab("Architecture variants").table[-1].value
    assert "GQA-8" not in set(variants["Attention"]) and "GQA-4" in set(variants["Attention"])
    # no prefix sharing and no offloading: no "↓ -0 B" delta
    device = next(m for m in tab(SHARING).metric if m.label == "KV on the device")
    assert device.delta in (None, "")


def test_hf_quantized_residual_option_reaches_strategies_once():
    # issue 13 item 4: residual length 32 in the hf-quantized options gave "multiple values for residual_length"
    from tests.ui.apptest import load

    at = load("ui/strategies.py")
    at.query_params.update({"engine": "hf-quantized", "opt_hf_quantized_residual_length": "32"})
    at.run()
    assert not at.exception and not [e for e in at.error if "multiple values" in e.value]
    assert any("32 tokens, from the hf-quantized options" in c.value for c in at.caption)


def test_tables_show_words_not_field_names():
    from tests.ui.apptest import run as run_page

    at = run_page("ui/strategies.py")
    headings = list(at.table[0].value.columns)
    assert "Cited quality cost" in headings and "Needs retraining" in headings and "saving_fraction" not in headings


def test_cited_costs_quote_only_the_right_comparison(page):
    # issue 23 item 3: at the default 1,024-token budget, StreamingLLM's "5158.07 -> 5.4" (against window
    # attention past the training window) and H2O's 4,096-token result are not its cost; SnapKV's 1,024 one is
    costs = dict(zip(page.table[0].value["Strategy"], page.table[0].value["Cited quality cost"], strict=True))
    streaming = costs["StreamingLLM: 4 sink + 1020 recent tokens"]
    assert "5158" not in streaming and "not with the full cache" in streaming
    h2o = next(text for name, text in costs.items() if name.startswith("H2O"))
    assert "40.445" not in h2o and "cited measurements are at 4,096 tokens" in h2o
    snapkv = next(text for name, text in costs.items() if name.startswith("SnapKV"))
    assert "42.5637 -> 41.455" in snapkv and "42.3775" not in snapkv


def test_eviction_lines_that_coincide_are_one_and_the_axis_says_what_the_title_does():
    # issue 33 finding 8: StreamingLLM 4 + 1020 and H2O 1024 keep 1,024 tokens per layer, the same bytes: the
    # StreamingLLM line hid under H2O's; the title said "tokens generated", the axis "tokens per sequence"
    import json
    at = tab("Eviction")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [trace["name"] for trace in spec["data"]] == ["keep everything", "StreamingLLM 4 + 1020 = H2O 1024"]
    assert spec["layout"]["title"]["text"] == "KV cache vs tokens generated"
    assert spec["layout"]["xaxis"]["title"]["text"] == "tokens generated per sequence (log)"
