"""A batch typed outside the app's bounds is named, not kept silently (issue 33 finding 8): -3 or 5,000,000
gave a red outline on the box and the page went on with the old batch."""

import pytest

from tests.ui.apptest import load


@pytest.mark.parametrize("typed, message", [
    (-3, "Batch: batch must be a positive integer, got -3"),
    (5_000_000, "Batch: at most 1,000,000 sequences in the app, got 5,000,000 (kvmem fit --batch takes up to "
                "1,099,511,627,776)"),
])
def test_out_of_range_batch_is_said(typed, message):
    at = load("ui/calculator.py").run()
    at.number_input(key="batch").set_value(typed).run()
    assert not at.exception
    assert [e.value for e in at.error if e.value.startswith("Batch")] == [message]
    at.number_input(key="batch").set_value(4).run()
    assert not [e for e in at.error if e.value.startswith("Batch")]
