"""Small helpers every page uses: errors as messages, CSV downloads."""

import csv
import io

import streamlit as st


def guard(fn, *args, **kwargs):
    """Call the library; show a ValueError as a message and stop the page (never a traceback)."""
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()


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
