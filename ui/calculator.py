"""Calculator: any model, workload and engine -> exact KV bytes, why, and how they grow with context."""

import streamlit as st

import kvmem
from kvmem import explain, plots, tables
from kvmem.engines import ENGINES
from kvmem.textbook import seed_terms
from kvmem.weights import weights
from ui import common, inputs, urlparams

st.title("KV-cache calculator")
st.caption("Bytes are exact integers from the kvmem library. GiB = 2³⁰ bytes, GB = 10⁹ bytes.")

work = inputs.sidebar()
model = work.model
result = common.guard(work.estimate)
common.engine_refusal(result)

st.markdown(f"**{common.plain(model.describe())}**")
inputs.not_used("num_gpus", why="one device's share is shown here; GPU counts are on Fit hardware")
gpu = kvmem.get_gpu(work.gpu)
weights_from = f"in {work.weight_dtype} (tp {work.tp}, pp {work.pp})"
if work.weights_bytes is not None:
    weights_bytes, weights_from = work.weights_bytes, "as given in the sidebar's Weights per device"
else:
    try:
        rules = ENGINES[work.engine].sizing   # whether this engine keeps replicated K/V heads' weights
        weights_bytes = weights(model, work.weight_dtype).per_device(
            tp=work.tp, pp=work.pp, replicated=bool(rules and rules.replicates_kv_weights))
    except ValueError as exc:
        weights_bytes = None
        st.info(f"Weights not counted: {exc}. Give them in the sidebar's **Weights per device** box.")
summary = tables.estimate_summary(result, weights_bytes=weights_bytes or 0, gpu_memory_bytes=gpu.usable_memory_bytes)
metrics = st.container(horizontal=True, horizontal_alignment="distribute")  # one block, not 5 columns
kv_type = inputs.kv_type_text(result)
metrics.metric("Total KV cache", summary.total_gib,
               help=f"{summary.total_bytes:,} bytes = {summary.total_gb} on one device ({work.engine}, "
               f"KV in {kv_type})")
metrics.metric("Per token", summary.per_token_text,
               help="K + V bytes per cached token, all layers: KV bytes / (tokens x batch), exact where every token "
                    "costs the same; a mean where sliding or compressed layers hold fewer tokens")
metrics.metric("Per sequence", summary.per_sequence_gib,
               help=f"{summary.per_sequence_bytes:,} bytes = {summary.per_sequence_gb}")
if weights_bytes is None:   # unknown, not 0 B: no share of the GPU either
    metrics.metric("Weights per device", "unknown", help="no parameter count: give them in the sidebar")
    metrics.metric("Weights + KV / GPU", "—", help="the weights are unknown")
else:
    metrics.metric("Weights per device", kvmem.format_bytes(weights_bytes), help=f"{weights_bytes:,} bytes {weights_from}")
    metrics.metric("Weights + KV / GPU", f"{summary.gpu_share:.0%}",
                   help=f"{kvmem.format_bytes(summary.device_bytes)} of "
                   f"{kvmem.format_bytes(gpu.usable_memory_bytes)} (activations and engine overheads are on the Fit "
                   "hardware page)")
st.caption(f"Total: {summary.total_bytes:,} bytes = {summary.total_gib} (binary) = {summary.total_gb} (decimal)"
           + (f"; of which recurrent state {summary.state_bytes:,} bytes" if summary.state_bytes else ""))

with st.expander("The seed's formula with your numbers, and why the engine differs", expanded=True):
    # the element format in force: an engine option (llama.cpp type_k / type_v) overrides the KV dtype
    try:
        terms = seed_terms(model, tokens=work.tokens, batch=work.batch, kv_dtype=result.kv_dtype)
    except ValueError as exc:  # MLA without the per-head widths in its config
        terms = None
        st.info(f"No naive reading of the seed's formula: {exc}")
    if terms:
        widths = ("" if terms.head_dim_k == terms.head_dim_v else
                  f"; d_head = ({terms.head_dim_k} + {terms.head_dim_v}) / 2, the mean of K's and V's head "
                  "widths as the config gives them")
        st.caption("The seed is the notebook this project started from (a KV-cache tutorial, not in this "
                   "repository); its formula is the textbook count below, read naively off the model's config.  \n"
                   f"p = {terms.bytes_per_element} B per element: KV in {kv_type}"
                   + (" (the mean of K's and V's element sizes)" if "/" in terms.dtype else "") + widths)
        st.latex(r"\begin{aligned}\text{Memory} &= 2 \times p \times b \times n_{layers} \times n_{kv\_heads} \times "
                 r"d_{head} \times t \\"
                 rf"&= 2 \times {terms.bytes_per_element} \times {terms.batch} \times {terms.layers} \times "
                 rf"{terms.kv_heads} \times {terms.head_dim} \times {terms.tokens:,} = {terms.formula_bytes:,.0f}"
                 r"\ \text{bytes}\end{aligned}".replace(",", "{,}"))
    st.markdown("\n".join(f"- {line}" for line in common.guard(explain.reasons, model, result)))
    if result.log_lines:
        st.caption(f"What {work.engine} itself logs for this cache:")
        st.code("\n".join(result.log_lines), language=None, wrap_lines=True)  # whole lines, none cut off

sweep = common.guard(tables.context_rows, model, contexts=tables.model_contexts(model, work.tokens), batch=work.batch,
                     weights_bytes=weights_bytes or 0, **work.engine_kwargs())
VIEWS = ["Memory vs context", "KV only vs context", "Per layer", "K vs V"]
urlparams.check_choice("view", VIEWS)
view = st.segmented_control("Chart", VIEWS, default="Memory vs context", key="view", bind="query-params",
                            help="Only the chosen chart is drawn. KV only: the cache alone, legible where the "
                                 "weights dwarf it (DeepSeek-V3).")
if view == "Per layer":
    layers = tables.per_layer_frame(model, result)
    common.chart(plots.per_layer_bars(layers, title=f"{common.chart_text(model.name)}: cache bytes per layer"), key="layer_chart")
    common.download(layers, "per_layer.csv", key="dl_layers")
elif view == "KV only vs context":
    common.chart(plots.kv_vs_context(tables.as_columns(sweep), title=f"{common.chart_text(model.name)}: KV cache "
                                                                       f"per device vs context (batch {work.batch})"),
                 key="kv_only_chart")
    common.download(sweep, "kv_vs_context.csv", key="dl_sweep_kv")
elif view == "K vs V":
    common.chart(plots.k_vs_v(result, title=f"{common.chart_text(model.name)}: K vs V"), key="kv_split_chart")
else:
    common.chart(plots.memory_vs_context(tables.as_columns(sweep), gpu_lines=[(gpu.name, gpu.usable_memory_bytes)],
                                         title=f"{common.chart_text(model.name)}: weights + KV per device vs context "
                                               f"(batch {work.batch})"),
                 key="kv_chart")
    common.download(sweep, "kv_vs_context.csv", key="dl_sweep")
