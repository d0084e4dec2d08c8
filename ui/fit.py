"""Fit hardware: will this model, context and batch fit on these GPUs under this engine — and how fast?"""

import streamlit as st

import kvmem
from kvmem import plots, tables
from kvmem.sizing import FitError
from ui import common, inputs

st.title("Fit hardware")
st.caption("Weights, KV cache and each engine's own memory budget per device (kvmem.fit). "
           "GiB = 2³⁰ bytes. Decode speed is a memory-bandwidth upper bound.")

work = inputs.sidebar()
model = work.model
page_args = {}
if work.engine == "vllm":
    page_args["gpu_memory_utilization"] = inputs.number(
        st, "gpu_memory_utilization (vLLM)", 0.05, 1.0, 0.9, key="util", step=0.01,
        help="vLLM budgets this share of the device's total memory.")
kwargs = work.fit_kwargs(**page_args)  # every sidebar input, engine options included

try:
    result = kvmem.fit(model, **kwargs)
except FitError as exc:
    result = exc.fit
    st.error(str(exc))
except ValueError as exc:
    st.error(str(exc))
    st.stop()

verdict = "fits" if result.fits else "does not fit"
st.subheader(f"{common.plain(model.name)} on {result.num_gpus} × {result.gpu}: {verdict}")
m1, m2, m3, m4 = st.columns(4)
m1.metric("Max batch", f"{result.max_batch:,}", help=f"sequences of {result.context:,} tokens per replica")
m2.metric("Max context", f"{result.max_context:,}", help=f"tokens per sequence at batch {result.batch or 1}")
m3.metric("Fewest GPUs", "—" if result.min_gpus is None else f"{result.min_gpus}",
          help="smallest tp (x pp) that holds the workload")
m4.metric("Decode bound", "—" if result.decode_tokens_per_s is None else f"{result.decode_tokens_per_s:,.1f} tok/s",
          help="per sequence: active weights + this sequence's KV read once per step"
               + ("" if result.decode_tokens_per_s_aggregate is None
                  else f"; {result.decode_tokens_per_s_aggregate:,.0f} tok/s over the batch"))
if result.kv_crossover_tokens:
    st.caption(f"KV reads overtake weight reads from {result.kv_crossover_tokens:,} tokens per sequence.")
if not result.fits and result.shortfall_bytes:
    st.warning(f"Short by {kvmem.format_bytes(result.shortfall_bytes)} per device.")
for line in result.suggestions:
    st.markdown(f"- would fit: {line}")

breakdown = tables.breakdown_frame(result)
st.plotly_chart(plots.breakdown_bar(breakdown, total_bytes=result.breakdown["total"],
                                    title=f"Per device ({result.engine}, tp {result.tp} × pp {result.pp})"),
                key="fit_breakdown")
with st.expander("Notes"):
    for note in result.notes:
        st.markdown(f"- {note}")

st.subheader("Max batch over context and GPU")
choices = inputs.multiselect(st, "GPUs to compare", kvmem.list_gpus(),
                            default=list(dict.fromkeys([work.gpu, "h100-sxm-80gb", "a100-sxm-80gb", "l40s-48gb",
                                                        "rtx-4090-24gb"])),
                            key="fit_gpus", help="Each cell is one kvmem.fit().")
contexts = tables.context_points(work.tokens, start=2048, at_least=32768)
if choices:
    grid = common.guard(tables.fit_grid, model, gpus=choices, contexts=contexts,
                        **{k: v for k, v in kwargs.items() if k not in ("context", "batch", "gpu")})
    st.plotly_chart(plots.fit_heatmap(grid, title=f"{common.chart_text(model.name)}: max batch ({work.num_gpus} GPU(s) each)"),
                    key="fit_heatmap")
    st.dataframe(grid, hide_index=True)
    common.download(grid, "fit_grid.csv", key="dl_fit")
