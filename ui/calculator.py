"""Calculator: any model, workload and engine -> exact KV bytes, why, and how they grow with context."""

import streamlit as st

from kvmem import explain, plots, tables
from kvmem.formula import seed_terms
from ui import inputs, common

st.title("KV-cache calculator")
st.caption("Bytes are exact integers from the kvmem library. GiB = 2³⁰ bytes, GB = 10⁹ bytes.")

work = inputs.sidebar()
model = work.model
result = common.guard(work.estimate)
summary = tables.estimate_summary(result)

st.markdown(f"**{model.describe()}**")
m1, m2, m3 = st.columns(3)
m1.metric("Total KV cache", summary["total_gib"],
          help=f"{summary['total_bytes']:,} bytes = {summary['total_gb']} on one device ({work.engine})")
m2.metric("Per token", f"{summary['per_token_bytes']:,.0f} B", help="K + V bytes per cached token, all layers")
m3.metric("Per sequence", summary["per_sequence_gib"],
          help=f"{summary['per_sequence_bytes']:,} bytes = {summary['per_sequence_gb']}")
st.caption(f"Total: {summary['total_bytes']:,} bytes = {summary['total_gib']} (GiB) = {summary['total_gb']} (GB)"
           + (f"; of which recurrent state {summary['state_bytes']:,} bytes" if summary["state_bytes"] else ""))

with st.expander("The seed's formula with your numbers, and why the engine differs", expanded=True):
    terms = common.guard(seed_terms, model, tokens=work.tokens, batch=work.batch, kv_dtype=work.kv_dtype)
    st.latex(r"\text{Memory} = 2 \times p \times b \times n_{layers} \times n_{heads} \times d_{head} \times t")
    st.latex(rf"= 2 \times {terms['bytes_per_element']} \times {terms['batch']} \times {terms['layers']} \times "
             rf"{terms['kv_heads']} \times {terms['head_dim']} \times {terms['tokens']:,} = {terms['bytes']:,}"
             r"\ \text{bytes}".replace(",", "{,}"))
    for line in common.guard(explain.reasons, model, result):
        st.markdown(f"- {line}")

max_tokens = max(work.tokens, model.max_position_embeddings or work.tokens)
sweep = common.guard(tables.context_sweep, model, contexts=tables.context_points(max_tokens), batch=work.batch,
                     kv_dtype=work.kv_dtype, engine=work.engine, tp=work.tp, pp=work.pp, **work.options)
view = st.segmented_control("Chart", ["Memory vs context", "Per layer", "K vs V"], default="Memory vs context",
                            key="view", bind="query-params", help="Only the chosen chart is drawn.")
if view == "Per layer":
    layers = tables.per_layer_frame(model, result)
    st.plotly_chart(plots.per_layer_bars(layers, title=f"{model.name}: cache bytes per layer"), key="layer_chart")
    common.download(layers, "per_layer.csv", key="dl_layers")
elif view == "K vs V":
    st.plotly_chart(plots.k_vs_v(result, title=f"{model.name}: K vs V"), key="kv_split_chart")
else:
    st.plotly_chart(plots.kv_vs_context(sweep, title=f"{model.name}: KV cache vs context (batch {work.batch})"),
                    key="kv_chart")
    common.download(sweep, "kv_vs_context.csv", key="dl_sweep")
