"""Fit page: host RAM as a budget (ui/offload.py host_inputs, host_panel; kvmem.host)."""

import kvmem
from tests.ui.apptest import run


def test_a_vllm_offload_tier_above_the_host_ram_does_not_fit():
    page = run("ui/fit.py")
    page.number_input(key="host_ram_gib").set_value(16)
    page.number_input(key="host_kv_offloading_size").set_value(37.5)
    page.run()
    assert not page.exception
    expected = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=8192, batch=1, kv_dtype="bf16",
                         kv_offloading_size=37.5, host_memory_bytes=16 << 30)
    assert not expected.fits
    assert any(e.value == expected.why_not for e in page.error)
    assert any("Host RAM per node: 37.50 GiB of 16.00 GiB" in h.value for h in page.subheader)
    (table,) = [d.value for d in page.dataframe if "term" in d.value.columns]
    assert list(table["tokens held"]) == [f"{expected.host['terms'][0]['tokens']:,}"]


def test_no_host_setting_adds_no_host_section():
    page = run("ui/fit.py")
    assert not page.exception
    assert not any("Host RAM per node" in h.value for h in page.subheader)
