"""The Fit page's "Which engine?" table: kvmem compare's rows for the sidebar's workload (issue 33 item 5)."""

from kvmem import tables
from tests.ui.apptest import load


def test_which_engine_table_is_engine_rows():
    at = load("ui/fit.py")
    at.query_params.update({"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "tokens": "32k"})
    at.run()
    assert not at.exception and len(at.table) == 1           # the heatmap's table only: the toggle is off
    at.toggle(key="fit_engines").set_value(True).run()
    assert not at.exception
    frame = at.table[0].value
    rows = tables.engine_rows("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=1, context=32768, batch=1,
                              kv_dtype="auto", weight_dtype="auto")
    assert list(frame["Engine"]) == [r.engine for r in rows]
    vllm = {r.engine: r for r in rows}["vllm"]
    shown = frame.set_index("Engine").loc["vllm"]
    assert shown["Max batch"] == vllm.max_batch and vllm.command.startswith("vllm serve")
    assert shown["command"] == vllm.command
