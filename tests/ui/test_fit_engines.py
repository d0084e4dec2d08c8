"""The Fit page's "Which engine?" table: kvmem compare's rows for the sidebar's workload (issue 33 item 5)."""

from kvmem import tables
from kvmem.engine_choice import engine_rows
from tests.ui.apptest import load


def test_which_engine_table_is_engine_rows():
    at = load("ui/fit.py")
    at.query_params.update({"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "tokens": "32k"})
    at.run()
    assert not at.exception and len(at.table) == 1           # the heatmap's table only: the toggle is off
    at.toggle(key="fit_engines").set_value(True).run()
    assert not at.exception
    frame = at.table[0].value
    rows = engine_rows("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=1, context=32768, batch=1,
                              kv_dtype="auto", weight_dtype="auto")
    assert list(frame["Engine"]) == [r.engine for r in rows]
    vllm = {r.engine: r for r in rows}["vllm"]
    shown = frame.set_index("Engine").loc["vllm"]
    assert shown["Max batch"] == vllm.max_batch and vllm.command.startswith("vllm serve")
    assert shown["command"] == vllm.command


def test_more_memory_holding_less_is_explained():
    # Llama-3.3-70B bf16 on 2 GPUs at 2,048 tokens under vLLM: the H100 80 GB (85,061,827,297 B usable) holds 11
    # sequences, the A100 80 GB (85,094,039,552 B) 14 -- 0.04% more memory, 3 more sequences: vLLM batches
    # 8,192 tokens on an H100 but 2,048 on an A100 (get_batch_defaults), whose activation peak is smaller.
    # Still true with max_num_seqs following the batch; the page says so (it was said only in the CLI's notes)
    grid = tables.fit_grid("llama-3.3-70b", gpus=["h100-sxm-80gb", "a100-sxm-80gb"], contexts=[2048], num_gpus=2,
                           batch=None, engine="vllm", kv_dtype="auto", weight_dtype="auto")
    assert tables.fit_grid_inversions(grid) == [(2048, "h100-sxm-80gb", "a100-sxm-80gb", 11, 14)]
    at = load("ui/fit.py")
    at.query_params.update({"model": "llama-3.3-70b", "gpu": "h100-sxm-80gb", "num_gpus": "2", "tokens": "2k",
                            "fit_gpus": ["h100-sxm-80gb", "a100-sxm-80gb"]})
    at.run()
    assert not at.exception
    said = [i.value for i in at.info if "holds fewer sequences" in i.value]
    assert len(said) == 1 and said[0].startswith("h100-sxm-80gb has about as much memory as a100-sxm-80gb but holds "
                                                 "fewer sequences at 2,048 tokens (11 vs 14): vllm's own settings")
    assert "8192 tokens" in said[0] and "2048 tokens" in said[0]
