"""kvmem in the browser: `make run` (or `streamlit run app.py`). Pages live in ui/."""

import numpy  # noqa: F401  (see below)
import streamlit as st

import kvmem.plots  # noqa: F401  (plotly: loaded before the first freeze below)
from ui import collector, export, inputs, preload, urlparams

# numpy is imported before any page draws (0.1 s, once): torch and pandas import it, and while
# a module is being imported it sits half-initialised in sys.modules, where plotly looks for
# numpy as it builds a figure. torch imported in one thread while another drew a chart broke
# the chart ("partially initialized module 'numpy' has no attribute 'ndarray'"; ui/preload.py).
collector.freeze_new_imports()  # the collector skips imported modules: 45-60 ms of every rerun (ui/collector.py)

st.set_page_config(page_title="kvmem — KV-cache memory", page_icon="🧮", layout="wide")

pages = [
    st.Page("ui/calculator.py", title="Calculator", icon=":material/calculate:", default=True),
    st.Page("ui/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("ui/fit.py", title="Fit hardware", icon=":material/memory:", url_path="fit"),
    st.Page("ui/overview.py", title="Overview", icon=":material/grid_view:", url_path="overview"),
    st.Page("ui/strategies.py", title="Strategies", icon=":material/compress:", url_path="strategies"),
    st.Page("ui/validate.py", title="Validate", icon=":material/verified:", url_path="validate"),
    st.Page("ui/learn.py", title="Learn", icon=":material/school:", url_path="learn"),
]
page = st.navigation(pages)
# The shared sidebar belongs to this script, not to a page: its values and URL parameters
# survive page switches, and Back/Forward restore them.
work = inputs.build_sidebar()
export.sidebar_buttons(work)  # the whole plan as JSON / Markdown, from any page (written on click)
refused = st.empty()  # the link's refusals, drawn after the page: it checks its own parameters as it draws
try:
    with preload.page_run():  # one page at a time until pandas is imported (ui/preload.py)
        page.run()
except Exception as exc:  # the page must never show a traceback; the rest of the app keeps working
    st.error(f"Something went wrong on this page: {type(exc).__name__}: {exc}")
finally:  # also when the page stops itself (st.stop)
    urlparams.show_refusals(refused)
preload.start()  # once the first page is drawn: pandas, torch and kvmem.lab, in the background
