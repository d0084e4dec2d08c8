"""Pure library calls cached across sessions (st.cache_data, keyed by their inputs).

Only calls whose result depends on nothing but their arguments are here, and only those that
cost enough to matter: a cell of the Fit page's grid is a kvmem.fit (up to ~2 s under llama.cpp), the
Learn page's MHA/GQA/MQA comparison runs a torch decoder three ways (0.15 s on one torch thread,
ui/preload.py).
Results come back as copies, so no session can change another's. A Model is keyed by
Model.fingerprint: every field that changes a number (its layers, facts and quantization_config,
raw config, checkpoint tensors), so two sessions' models that differ only there never share an
entry (a name and a hash that left the facts out once showed one user's AWQ grid to another).
"""

from __future__ import annotations

import streamlit as st

from kvmem.model import Model
from ui import preload

_KEYS = {Model: lambda model: model.fingerprint}


@st.cache_data(max_entries=1024, show_spinner=False, hash_funcs=_KEYS)
def fit_grid(model, **kwargs):
    from kvmem import tables

    return tables.fit_grid(model, **kwargs)


@st.cache_data(max_entries=32, show_spinner=False)
def single_head(steps: int, causal: bool):
    return preload.lab().compare_single_head(steps=steps, causal=causal)


@st.cache_data(max_entries=1, show_spinner=False)
def variants():
    return preload.lab().compare_variants()


@st.cache_data(max_entries=1024, show_spinner=False, hash_funcs=_KEYS)
def sweep(models, gpus, **kwargs):
    """kvmem.sweep (a row of the Overview page's matrix: a model on every GPU, under a hundredth of a second under
    vLLM, up to tens of seconds under llama.cpp; a row's cells, not a page's, so that every view reuses them)."""
    import kvmem

    return kvmem.sweep(models, gpus, **kwargs)
