"""Learn page (AppTest): the lab's measured equivalence, bytes and speedup reach the page."""

import pytest

from kvmem import lab
from tests.ui.apptest import run


@pytest.fixture(scope="module")
def page():
    # one page for the module, driven in order: defaults, then measuring, then the mask turned off
    return run("ui/learn.py")


def test_equivalence_table_and_bytes(page):
    assert not page.exception
    diffs = page.table[0].value
    assert list(diffs["tokens in cache (len)"]) == [1, 2, 3, 4, 5]
    assert diffs["max |cached − uncached|"].max() < 1e-6
    assert any("240 bytes" in m.value.replace("**", "") for m in page.markdown)  # 2 x 4 B x 6 x 5 tokens
    variants = page.table[1].value.set_index("Attention")
    assert list(variants["bytes per token"]) == [v.bytes_per_token for v in lab.compare_variants()]
    assert (variants["cache bytes"] == variants["formula bytes"]).all()


def test_measure_speedup(page):
    page.button(key="lab_measure").click().run()
    timing = page.table[2].value
    assert list(timing["Tokens"]) == [16, 64, 256, 512]
    assert (timing["With cache (ms per token)"] > 0).all() and timing["Speedup"].iloc[-1] > 1


def test_without_causal_mask_earlier_rows_change(page):
    page.toggle(key="lab_causal").set_value(False).run()
    assert not page.exception
    drift = page.table[0].value["earlier rows changed by"]
    assert drift.max() > 1e-2
    # issue 23 item 18: each step's own change, not one global maximum on every row; step 1 has no earlier rows
    assert drift.isna().iloc[0] and drift.iloc[1:].nunique() == 4
    assert drift.iloc[1:].tolist() == lab.compare_single_head(steps=5, causal=False).past_drift_steps[1:]
