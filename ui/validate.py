"""Validate: build the real caches with torch on this machine and compare them with kvmem's prediction."""

import importlib

import streamlit as st

from ui import common, inputs, urlparams

st.title("Validate against real caches")
st.caption("kvmem.measure drives the real transformers cache objects (and the seed's toy cache) with K/V "
           "tensors of the model's real per-layer shapes — no weights — and counts what they hold: unique "
           "tensor storages, allocator/profiler bytes and the transient peak.")
# imported after the title is on screen: the measuring module (torch waits until Measure is pressed)
measure = importlib.import_module("kvmem.measurement")
validation = importlib.import_module("kvmem.validation")

# The committed GPU run beside the live measurement below (which runs on this machine, a CPU here).
st.subheader("Recorded on a GPU (CUDA)")
if validation.CUDA_REPORT.is_file():
    cuda_text = validation.CUDA_REPORT.read_text()
    summary = next((line for line in cuda_text.splitlines() if line.startswith("**")), "")
    st.caption("docs/validation/cuda.md: the committed run of `bash tools/cuda_validate.sh` on a CUDA machine "
               "(torch.cuda's allocator counters against kvmem's prediction). " + summary.replace("**", ""))
    with st.expander("The CUDA report (machine, every case, every figure)", expanded=False):
        st.markdown(cuda_text)
else:
    st.info("No GPU run has been recorded yet (docs/validation/cuda.md does not exist): every measurement so far "
            "ran on a CPU. To record one, run `bash tools/cuda_validate.sh` on a CUDA machine and commit the "
            "cuda.md it writes under $OUT as docs/validation/cuda.md.")
st.subheader("Live on this machine")

work = inputs.sidebar()
model = work.model
c1, c2, c3 = st.columns(3)
engine = inputs.select(c1, "Cache", list(measure.ENGINES), key="val_engine",
                       help="hf-dynamic / hf-static / hf-quantized: transformers 5.x caches; toy: the seed's cache.")
urlparams.check_text("val_tokens", lambda text: [inputs.parse_tokens(p) for p in text.split(",") if p.strip()])
token_text = c2.text_input("Tokens (comma-separated)", "16, 64, 256", key="val_tokens", bind="query-params",
                           help="Each value is one measurement; keep them small on a CPU.")
device = inputs.select(c3, "Device", ["auto", "cpu", "cuda"], key="val_device",
                       help="auto = CUDA when a GPU is present, else CPU.")
inputs.not_used("tokens", "engine", "options", "tp", "pp", "gpu", "num_gpus", "weight_dtype",
                why="the boxes above pick the cache and the token counts; one device, no weights. The model, batch and KV dtype apply when you press Measure")
try:
    token_list = [inputs.parse_tokens(part) for part in token_text.split(",") if part.strip()]
except ValueError as exc:
    st.error(str(exc))
    st.stop()
if not token_list:
    st.info("Give at least one token count.")
    st.stop()

kv_dtype = "bf16" if work.kv_dtype == "auto" else work.kv_dtype
if st.button("Measure", key="val_run", type="primary", help="Runs kvmem.measure for each token count."):
    rows = []
    with st.status(f"Measuring {len(token_list)} cache(s) with torch…", expanded=True) as status:
        for i, tokens in enumerate(token_list):
            st.write(f"{i + 1}/{len(token_list)}: {tokens:,} tokens")
            result = common.guard(measure.measure, model, engine=engine, tokens=tokens, batch=work.batch,
                                  kv_dtype=kv_dtype, device=device,
                                  on_wait=lambda message: status.update(label=message))
            rows.append(result.to_dict())
        status.update(label=f"Measured {len(rows)} cache(s)", state="complete", expanded=False)
    st.session_state["val_rows"] = rows
if "val_rows" in st.session_state:
    import pandas as pd

    from kvmem import plots

    rows = st.session_state["val_rows"]
    frame = pd.DataFrame([{k: r[k] for k in ("model", "engine", "tokens", "batch", "kv_dtype", "device",
                                            "predicted_bytes", "tensor_bytes", "allocated_bytes", "peak_bytes",
                                            "predicted_peak_bytes", "reserved_bytes", "difference_bytes",
                                            "matches")} for r in rows])
    matched = int(frame["matches"].sum())
    (st.success if matched == len(frame) else st.error)(f"{matched} of {len(frame)} match: predicted bytes equal "
                                                       "the storages the cache holds.")
    common.chart(plots.predicted_vs_measured(frame, title=f"{rows[0]['model']} · {rows[0]['engine']}"),
                 key="val_chart")
    common.table(frame)
    common.download(frame, "validation.csv", key="dl_validation")
    cuda = [r["cuda"] for r in rows if r["cuda"]]
    if cuda:
        st.subheader("CUDA allocator")
        common.table(pd.DataFrame(cuda))
    st.caption(validation.ALLOCATOR_NOTE)
