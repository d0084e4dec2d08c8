"""Small helpers every page uses: errors as messages, CSV downloads."""

import streamlit as st


def guard(fn, *args, **kwargs):
    """Call the library; show a ValueError as a message and stop the page (never a traceback)."""
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()


def download(df, filename: str, *, key: str, label: str = "Download CSV"):
    st.download_button(label, df.to_csv(index=False).encode("utf-8"), file_name=filename, mime="text/csv", key=key)
