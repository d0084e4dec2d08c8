"""Strategies page (AppTest): tables and metrics come from kvmem.strategies / kvmem.estimate."""

import pytest

import kvmem
from tests.ui.apptest import run


@pytest.fixture
def page():
    return run("ui/strategies.py")


def test_strategy_table_equals_library(page):
    assert not page.exception
    rows = kvmem.compare_strategies("llama-3.1-8b", tokens=8192, engine="vllm", kv_dtype="bf16", budget=1024,
                                    residual_length=128, gpu="h100-sxm-80gb")
    shown = page.dataframe[0].value
    assert list(shown["strategy"]) == [r["strategy"] for r in rows]


def test_offload_and_prefix(page):
    page.number_input(key="batch").set_value(8)
    page.number_input(key="prefix").set_value(4096)
    page.slider(key="offload").set_value(0.5)
    page.run()
    expected = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens=8192, batch=8, kv_dtype="bf16",
                              shared_prefix=4096, offload=0.5)
    values = {m.label: m.value for m in page.metric}
    assert values["KV on the device"] == kvmem.format_bytes(expected.kv_bytes)
    assert values["KV in host memory"] == kvmem.format_bytes(expected.details["host_kv_bytes"])


def test_bad_budget_strings_are_messages(page):
    page.text_input(key="kv_memory").set_value("lots").run()
    assert not page.exception and "KV memory budget" in page.error[0].value


def test_gpu_without_a_host_link_figure_is_a_dash_not_an_error(page):
    page.selectbox(key="gpu").set_value("rtx-3090-24gb")
    page.slider(key="offload").set_value(0.5)
    page.run()
    assert not page.exception
    assert {m.label: m.value for m in page.metric}["Host transfer per decode step (PCIe)"] == "—"


def test_strategies_page_explains_itself():
    from tests.ui.apptest import run as run_page

    at = run_page("ui/strategies.py")
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "sample of 500 request lengths" in captions and "**sharegpt**" in captions and "**fixed**" in captions
    # Llama-3.1-8B already has 8 KV heads: no "GQA-8" variant that would need retraining for nothing
    variants = at.dataframe[-1].value
    assert "GQA-8" not in set(variants["variant"]) and "GQA-4" in set(variants["variant"])
    # no prefix sharing and no offloading: no "↓ -0 B" delta
    device = next(m for m in at.metric if m.label == "KV on the device")
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
    config = at.dataframe[0].proto.columns  # column_config as JSON
    assert "Cited quality cost" in config and "Needs retraining" in config
