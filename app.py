"""kvmem in the browser: `make run` (or `streamlit run app.py`). Pages live in ui/."""

import streamlit as st

st.set_page_config(page_title="kvmem — KV-cache memory", page_icon="🧮", layout="wide")

pages = [
    st.Page("ui/calculator.py", title="Calculator", icon="🧮", default=True, url_path="calculator"),
]
st.navigation(pages).run()
