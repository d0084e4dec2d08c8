"""Small helpers every page uses: errors as messages, plain text, CSV downloads."""

import csv
import html
import io
import re

import streamlit as st


def guard(fn, *args, **kwargs):
    """Call the library; show a ValueError (or an overflow) as a message and stop the page."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, OverflowError) as exc:
        st.error(str(exc))
        st.stop()


_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def plain(text) -> str:
    """``text`` (a model name from a user's config) escaped for st.markdown: every ASCII punctuation
    mark backslash-escaped (CommonMark), so no emphasis, link, image, LaTeX ($) or colour
    directive (:red[...]) can come from it; line breaks become spaces."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(str(text).split()))


def chart_text(text) -> str:
    """``text`` escaped for a plotly title or legend, which render a subset of HTML (<a href>, <b>, <span style>)."""
    return html.escape(" ".join(str(text).split()), quote=False)


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
