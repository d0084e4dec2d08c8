"""Export the whole plan from any page: the sidebar's workload as kvmem.report's JSON and Markdown.

Two download buttons under the sidebar (app.py draws them for every page). The report is written
when a button is clicked (Streamlit calls ``data`` then, in its own thread), not on every rerun:
a report is a fit and a plan, which no page should wait for. Nothing is computed here: the library
writes the document; an input it refuses becomes the file's text, saying why.
"""

from __future__ import annotations

import streamlit as st

import kvmem
from ui.engine_options import takes_utilization

FORMATS = {"json": ("Plan as JSON", "application/json"), "md": ("Plan as Markdown", "text/markdown")}
HELP = ("The whole plan for the sidebar's workload: inputs, kvmem.fit's results, what the engine prints, the "
        "launch command and the sources (kvmem.report). The JSON runs again with kvmem.rerun_report.")


def document(model, fit_kwargs: dict, fmt: str) -> str:
    """kvmem.report of the sidebar's workload (Workload.fit_kwargs: every input, engine options
    included) as ``fmt`` text."""
    try:
        result = kvmem.report(model, **fit_kwargs)
    except ValueError as exc:
        return f"kvmem could not write this plan: {exc}\n"
    return result.to_json() if fmt == "json" else result.to_markdown()


def sidebar_buttons(work) -> None:
    """The two download buttons, for the Workload the sidebar built (nothing when an input is invalid)."""
    if not hasattr(work, "fit_kwargs"):       # the message naming an invalid input (a str): no plan
        return
    kwargs = work.fit_kwargs()
    if takes_utilization(work.engine) and st.session_state.get("util") is not None:
        kwargs["gpu_memory_utilization"] = st.session_state["util"]   # the Fit page's own box (ui/fit.py)
    row = st.sidebar.container(horizontal=True)   # one block, two buttons: each element costs every rerun
    for fmt, (label, mime) in FORMATS.items():
        row.download_button(label, data=lambda fmt=fmt: document(work.model, kwargs, fmt),
                            file_name=f"kvmem-plan.{fmt}", mime=mime, key=f"export_{fmt}", on_click="ignore",
                            icon=":material/download:", help=HELP)
