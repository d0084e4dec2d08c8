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
