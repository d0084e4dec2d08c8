"""Validate: build the real caches with torch on this machine and compare them with kvmem's prediction."""

import importlib

import pandas as pd
import streamlit as st

import kvmem
from kvmem import plots
from ui import common, inputs

measure = importlib.import_module("kvmem.measurement")
validation = importlib.import_module("kvmem.validation")

st.title("Validate against real caches")
st.caption("kvmem.measure drives the real transformers cache objects (and the seed's toy cache) with K/V "
           "tensors of the model's real per-layer shapes — no weights — and counts what they hold: unique "
           "tensor storages, allocator/profiler bytes and the transient peak.")

work = inputs.sidebar()
model = work.model
c1, c2, c3 = st.columns(3)
engine = c1.selectbox("Cache", list(measure.ENGINES), key="val_engine", bind="query-params",
                      help="hf-dynamic / hf-static / hf-quantized: transformers 5.x caches; toy: the seed's cache.")
token_text = c2.text_input("Tokens (comma-separated)", "16, 64, 256", key="val_tokens", bind="query-params",
                           help="Each value is one measurement; keep them small on a CPU.")
device = c3.selectbox("Device", ["auto", "cpu", "cuda"], key="val_device", bind="query-params",
                      help="auto = CUDA when a GPU is present, else CPU.")
try:
    token_list = [kvmem.parse_tokens(part) for part in token_text.split(",") if part.strip()]
except ValueError as exc:
    st.error(str(exc))
    st.stop()
if not token_list:
    st.info("Give at least one token count.")
    st.stop()

kv_dtype = "bf16" if work.kv_dtype == "auto" else work.kv_dtype
if st.button("Measure", key="val_run", type="primary", help="Runs kvmem.measure for each token count."):
    bar = st.progress(0.0, text="measuring…")
    rows = []
    for i, tokens in enumerate(token_list):
        result = common.guard(measure.measure, model, engine=engine, tokens=tokens, batch=work.batch,
                              kv_dtype=kv_dtype, device=device,
                              on_wait=lambda message, i=i: bar.progress(i / len(token_list), text=message))
        rows.append(result.to_dict())
        bar.progress((i + 1) / len(token_list), text=f"{i + 1}/{len(token_list)}: {tokens:,} tokens")
    st.session_state["val_rows"] = rows
if "val_rows" in st.session_state:
    rows = st.session_state["val_rows"]
    frame = pd.DataFrame([{k: r[k] for k in ("model", "engine", "tokens", "batch", "kv_dtype", "device",
                                            "predicted_bytes", "tensor_bytes", "allocated_bytes", "peak_bytes",
                                            "predicted_peak_bytes", "reserved_bytes", "difference_bytes",
                                            "matches")} for r in rows])
    matched = int(frame["matches"].sum())
    (st.success if matched == len(frame) else st.error)(f"{matched} of {len(frame)} match: predicted bytes equal "
                                                       "the storages the cache holds.")
    st.plotly_chart(plots.predicted_vs_measured(frame, title=f"{rows[0]['model']} · {rows[0]['engine']}"),
                    key="val_chart")
    st.dataframe(frame, hide_index=True)
    common.download(frame, "validation.csv", key="dl_validation")
    cuda = [r["cuda"] for r in rows if r["cuda"]]
    if cuda:
        st.subheader("CUDA allocator")
        st.dataframe(pd.DataFrame(cuda), hide_index=True)
    st.caption(validation.ALLOCATOR_NOTE)
