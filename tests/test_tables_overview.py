"""tables.sweep_matrix with reasons once per row, and sweep_status (the Overview's colours; issue 33 finding 8)."""

import pytest

import kvmem
from kvmem import tables
from tests.fixtures import ABRIDGED


def test_refusals_once_per_row_and_statuses():
    cells = kvmem.sweep(["llama-3.1-8b", ABRIDGED, "llama-2-7b"], ["h100-sxm-80gb", "rtx-4090-24gb"],
                        contexts=["8k"])
    matrix = tables.sweep_matrix(cells, reasons="row").set_index("model")
    assert list(matrix.columns) == ["h100-sxm-80gb", "rtx-4090-24gb", "why refused"]
    assert list(matrix.loc["gemma-3n-e2b-abridged"]) == ["refused", "refused", "has no parameter count"]
    assert matrix.loc["llama-2-7b", "why refused"] == "past the model's 4,096 positions"
    assert matrix.loc["llama-3.1-8b", "why refused"] == ""
    status = tables.sweep_status(cells).set_index("model")
    assert list(status.loc["llama-3.1-8b"]) == ["fits", "fits"] and list(status.loc["gemma-3n-e2b-abridged"]) == ["refused"] * 2
    # the default keeps each reason in its cell (kvmem sweep's CSV and the tests of sweep_matrix)
    assert tables.sweep_matrix(cells).set_index("model").loc["gemma-3n-e2b-abridged", "h100-sxm-80gb"] == (
        "refused: has no parameter count")
    with pytest.raises(ValueError, match="reasons must be 'cell' or 'row', got 'column'"):
        tables.sweep_matrix(cells, reasons="column")
