"""ui/common.py: how table cells are written, and the tables pages draw with them."""

import math

import numpy as np
import pytest

from tests.ui.apptest import run
from ui.common import cell, column_format, percent


@pytest.mark.parametrize("value, text", [
    (1_234_567, "1,234,567"), (np.int64(89), "89"), (131072.0, "131,072"), (250.7, "251"), (7.5, "7.5"),
    (np.float64(3.14159), "3.14"), (0.0123, "0.0123"), (0.001, "0.001"), (2.98e-08, "2.98e-08"),
    (True, "yes"), (np.bool_(False), "no"), (None, "—"), (math.nan, "—"), (np.float32("nan"), "—"), ("q4_0", "q4_0"),
])
def test_cells_are_written_to_be_read(value, text):
    assert cell(value) == text


@pytest.mark.parametrize("values, texts", [
    ([1.0, 1.12, 0.536], ["1.00", "1.12", "0.54"]),          # one number of decimals down a column
    ([4.0, 0.281, math.nan], ["4.00", "0.28", "—"]),
    ([250.7, 12.0], ["251", "12"]), ([0.5, 0.0123], ["0.500", "0.012"]), ([2.98e-08, 0.0], ["2.98e-08", "0.00e+00"]),
    ([131072.0, 65536.0], ["131,072", "65,536"]),              # whole numbers stay whole
    ([152.5, 2.3828125, 0.95], ["152.50", "2.38", "0.95"]),    # issue 23 item 4: a large row keeps small ones legible
    (["q4_0", 1.5], ["q4_0", "1.5"]), ([True, False], ["yes", "no"]),
])
def test_a_column_of_numbers_lines_up(values, texts):
    write = column_format(values)
    assert [write(v) for v in values] == texts


def test_fractions_are_percentages():
    assert percent(0.2857) == "28.6%" and percent(1.0) == "100.0%" and percent(math.nan) == "—"


def test_a_page_table_keeps_its_values_and_shows_them_formatted():
    at = run("ui/strategies.py")
    table = at.table[0]
    assert table.value["Saved"].dtype.kind == "f"  # the data keep their values
    shown = table.proto.arrow_data.styler.display_values
    assert b"50.0%" in shown and b"yes" in shown  # KV fp8 saves half; the baseline is lossless
