"""Calculator: a preset, tokens, batch and KV dtype -> exact KV bytes and the curve over context."""

import streamlit as st

import kvmem
from kvmem import plots, tables

st.title("KV-cache calculator")
st.caption("Bytes are exact integers from the library. GiB = 2³⁰ bytes, GB = 10⁹ bytes.")

models = kvmem.list_models()
default_model = models.index("llama-3.1-8b") if "llama-3.1-8b" in models else 0
col_model, col_tokens, col_batch, col_dtype = st.columns([3, 2, 1, 1])
model_name = col_model.selectbox("Model preset", models, index=default_model, key="model",
                                 help="Presets are real config.json files; see `kvmem models` for sources.")
tokens_text = col_tokens.text_input("Tokens per sequence", value="8k", key="tokens",
                                    help='Context held per sequence: 4096, "32k", "128k" (k = 1024), "1M".')
batch = col_batch.number_input("Batch", min_value=1, value=1, step=1, key="batch",
                               help="Sequences held at once.")
kv_dtype = col_dtype.selectbox("KV dtype", ["auto", "bf16", "fp16", "fp32", "fp8", "int8", "int4",
                                            "q8_0", "q4_0"], key="kv_dtype",
                               help="Element format of the cache; auto = the model's own dtype.")

try:
    tokens = kvmem.parse_tokens(tokens_text)
    model = kvmem.get_model(model_name)
    result = kvmem.estimate(model, tokens=tokens, batch=int(batch), kv_dtype=kv_dtype)
except ValueError as exc:
    st.error(str(exc))
    st.stop()

summary = tables.estimate_summary(result)
st.markdown(f"**{model.describe()}**")
m1, m2, m3 = st.columns(3)
m1.metric("Total KV cache", summary["total_gib"], help=f"{summary['total_bytes']:,} bytes = {summary['total_gb']}")
m2.metric("Per token", f"{summary['per_token_bytes']:,.0f} B", help="K + V bytes per cached token, all layers")
m3.metric("Per sequence", summary["per_sequence_gib"],
          help=f"{summary['per_sequence_bytes']:,} bytes = {summary['per_sequence_gb']}")
st.caption(f"Total: {summary['total_bytes']:,} bytes = {summary['total_gib']} (GiB) = {summary['total_gb']} (GB)")

max_tokens = max(tokens, model.max_position_embeddings or tokens)
sweep = tables.context_sweep(model, contexts=tables.context_points(max_tokens), batch=int(batch),
                             kv_dtype=kv_dtype)
st.plotly_chart(plots.kv_vs_context(sweep, title=f"{model.name}: KV cache vs context (batch {int(batch)})"),
                key="kv_chart")
