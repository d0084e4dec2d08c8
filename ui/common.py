"""Small helpers every page uses: errors as messages, plain text, CSV downloads, a view's time for new work."""

import csv
import html
import io
import math
import numbers
import os
import re
import time

import streamlit as st

from kvmem import plots, tables


def guard(fn, *args, **kwargs):
    """Call the library; show a ValueError (or an overflow) as a message and stop the page."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, OverflowError) as exc:
        st.error(str(exc))
        st.stop()


VIEW_SECONDS = 6.0      # default of KVMEM_VIEW_SECONDS


def view_seconds() -> float:
    """KVMEM_VIEW_SECONDS: how long one view of a page sizes new cells of a matrix or grid before it offers the
    rest on a press (ViewClock), so that no page holds the server's one interpreter for long; VIEW_SECONDS when
    unset, said and kept when it is not a number of seconds."""
    text = os.environ.get("KVMEM_VIEW_SECONDS", "").strip()
    try:
        seconds = float(text) if text else VIEW_SECONDS
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        st.warning(f"KVMEM_VIEW_SECONDS={text!r} is not a number of seconds (0 or more): {VIEW_SECONDS:g} s per "
                   "view.")
        return VIEW_SECONDS
    return seconds


class ViewClock:
    """One view's time for new cells (the Overview's matrices, Fit's GPU grid): ``more()`` while view_seconds()
    have not passed since it was made, and until the view has sized a cell (each press makes progress)."""

    def __init__(self):
        self.seconds = view_seconds()
        self.deadline, self.sized = time.monotonic() + self.seconds, 0

    def more(self) -> bool:
        return not self.sized or time.monotonic() < self.deadline

    def why(self) -> str:
        """What the page says where cells are left."""
        return (f"One view sizes new cells for at most {self.seconds:g} s (KVMEM_VIEW_SECONDS), so that one page "
                "never holds the server for long")


def engine_refusal(result) -> None:
    """Say, above the numbers, when the engine itself would refuse this workload (the result's
    ``refusal``, e.g. vLLM past max_position_embeddings) and what lets it start."""
    refusal = getattr(result, "refusal", None)
    if refusal:
        why, allow = refusal.reason, refusal.allow_with
        st.warning(f"The engine would refuse this: {why}" + (f" (it starts with {allow})" if allow else "")
                   + ". The numbers below are what it would take if it ran.", icon=":material/block:")


_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def plain(text) -> str:
    """``text`` (a model name from a user's config) escaped for st.markdown: every ASCII punctuation
    mark backslash-escaped (CommonMark), so no emphasis, link, image, LaTeX ($) or colour
    directive (:red[...]) can come from it; line breaks become spaces."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(str(text).split()))


def chart_text(text) -> str:
    """``text`` escaped for a plotly title or legend, which render a subset of HTML (<a href>, <b>, <span style>)."""
    return html.escape(" ".join(str(text).split()), quote=False)


# Column headings in people's words; the data (and the CSV download) keep the field names.
HEADINGS = {
    "gpu": "GPU", "context": "Context (tokens)", "fits": "Fits", "max_batch": "Max batch",
    "max_context": "Max context (tokens)", "min_gpus": "Fewest GPUs",
    "decode_tokens_per_s": "Decode tokens/s per sequence", "decode_tokens_per_s_aggregate": "Decode tokens/s, whole batch",
    "kv_memory_gib": "KV memory (GiB)", "kv_pool": "KV pool", "strategy": "Strategy", "family": "Family",
    "gib": "GiB", "bytes": "Bytes", "saving_bytes": "Saved (bytes)", "saving_fraction": "Saved",
    "lossless": "Lossless", "needs_retraining": "Needs retraining", "cost": "Cited quality cost",
    "variant": "Attention", "label": "Series", "model": "Model", "engine": "Engine", "kv_dtype": "KV dtype",
    "tokens": "Tokens", "batch": "Batch", "kv_bytes": "KV (bytes)", "state_bytes": "State (bytes)",
    "total_bytes": "Total (bytes)", "bytes_per_token": "Bytes per token", "total_gib": "Total (GiB)",
    "distribution": "Request lengths", "allocation": "Allocation", "block_size": "Block (tokens)",
    "admitted": "Requests admitted", "waste_fraction": "Reserved but unused", "mean_length": "Mean length (tokens)",
    "ms_per_token_cached": "With cache (ms per token)", "ms_per_token_uncached": "Without cache (ms per token)",
    "speedup": "Speedup", "kv_heads": "KV heads",
    "device": "Device", "predicted_bytes": "Predicted (bytes)", "tensor_bytes": "Tensors held (bytes)",
    "allocated_bytes": "Allocator (bytes)", "peak_bytes": "Peak (bytes)", "predicted_peak_bytes": "Predicted peak (bytes)",
    "reserved_bytes": "Reserved (bytes)", "difference_bytes": "Difference (bytes)", "matches": "Matches",
}
_PERCENT = {"waste_fraction"}
_SAVING = {"saving_fraction"}  # "50.0%", or "71× larger" for a variant bigger than the baseline


def chart(figure, *, key: str, where=None, **kwargs) -> None:
    """Draw a plotly figure with kvmem's template for the viewer's light or dark theme
    (``plots.template``) and ``theme=None``: Streamlit's own plotly theme is re-applied in the
    browser on every rerun and cost most of the rerun latency over the floor (bench/README.md).
    ``where``: a column or container (default: the page)."""
    figure.layout.template = plots.template(dark=st.context.theme.type == "dark")
    (where or st).plotly_chart(figure, key=key, theme=None, **kwargs)


def table(frame, columns=None) -> None:
    """A static table (st.table) with people's headings (HEADINGS) and numbers written to be read.

    Static, not st.dataframe: these tables are a few dozen rows, they show whole cells (the cited
    quality cost wraps instead of being cut off), and the page needs no data-grid code: a new
    session's Strategies page was complete ~0.6 s sooner here (bench/README.md). The data keep
    their values and the CSV download its field names; only the display is formatted
    (``column_format``, ``percent``).
    """
    shown = frame if columns is None else frame[list(columns)]
    headings = {name: HEADINGS.get(name, str(name).replace("_", " ")) for name in shown.columns}
    formats = {headings[name]: (percent if name in _PERCENT else tables.saving_text if name in _SAVING
                                else column_format(shown[name])) for name in shown.columns}
    styled = shown.rename(columns=headings).style.format(formats)
    st.table(styled, hide_index=True)


def percent(value) -> str:
    """A fraction as a percentage with one decimal ("28.6%"); "—" when missing."""
    return "—" if _missing(value) else f"{value:.1%}"


def column_format(values):
    """How to write one column's cells: ``cell``, except that a column of numbers that are not all
    whole gets one number of decimals for every row, so that its digits line up: enough for two
    significant digits of its smallest non-zero value (0 from 10 up, 1 from 1, 2 from 0.1, 3
    below; e-notation below 0.001). A large row never costs a small one its digits: DeepSeek-V3
    as MHA (hundreds of GiB) beside MQA's 0.95 GiB keeps the 0.95."""
    present = [v for v in values if not _missing(v)]
    if not present or not all(_real(v) for v in present) or all(float(v).is_integer() for v in present):
        return cell
    smallest = min((abs(float(v)) for v in present if v), default=0.0)
    if smallest and smallest < 1e-3:
        pattern = "{:.2e}"
    else:
        decimals = 0 if smallest >= 10 else 1 if smallest >= 1 else 2 if smallest >= 0.1 else 3
        pattern = f"{{:,.{decimals}f}}"
    return lambda value: "—" if _missing(value) else pattern.format(float(value))


def cell(value) -> str:
    """One table cell as text: whole numbers with thousands separators, other numbers to three
    significant digits (e-notation below 0.001), yes/no for booleans, "—" when missing."""
    if _missing(value):
        return "—"
    if _boolean(value):
        return "yes" if value else "no"
    if _real(value):
        number = float(value)
        if number.is_integer() and abs(number) < 1e15:
            return f"{int(number):,}"
        return f"{number:,.3g}" if abs(number) >= 1e-3 else f"{number:.2e}"
    return str(value)


def _boolean(value) -> bool:
    return isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b"


def _real(value) -> bool:
    return isinstance(value, numbers.Real) and not _boolean(value)


def _missing(value) -> bool:
    return value is None or (isinstance(value, numbers.Real) and math.isnan(value))


def gqa_groups(model, offered=(8, 4, 2)) -> tuple:
    """GQA variants worth showing: not the KV-head counts the model already has."""
    own = {layer.kv_heads for layer in model.layers if layer.caches_tokens}
    return tuple(g for g in offered if g not in own)


def csv_bytes(table) -> bytes:
    """CSV of a DataFrame, or of a list of row dicts (no pandas needed)."""
    if isinstance(table, list):
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(table[0]) if table else [], lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
        return out.getvalue().encode("utf-8")
    return table.to_csv(index=False).encode("utf-8")


def download(table, filename: str, *, key: str, label: str = "Download CSV"):
    """A CSV download button for a table (DataFrame or list of row dicts)."""
    st.download_button(label, csv_bytes(table), file_name=filename, mime="text/csv", key=key)
