"""Learn: the seed notebook's lab, live — why caching K and V is exact, what it saves, what it costs."""

import pandas as pd
import streamlit as st

from kvmem import plots
from ui import cache, common, inputs, preload, urlparams

st.title("How a KV cache works")
st.markdown(
    "A decoder generates one token at a time, and each new token attends to every earlier one. "
    "Without a cache, every step recomputes the keys and values of the whole sequence. With causal masking, "
    "a token's key and value depend only on the tokens before it — so they never change once computed. "
    "Caching them and feeding in only the newest token gives the *same* outputs for a fraction of the work, "
    "at the price of memory that grows with every token. Everything below is computed live with torch on "
    "this machine (kvmem.lab). *The seed* is the tutorial notebook this project started from (not in this "
    "repository): its toy decoder, its KVCache class and its memory formula are reproduced here.")

inputs.not_used(*inputs.LABELS, why="this page runs the seed's own small decoder, not the sidebar's model")

st.header("1. Cached and uncached attention agree, step by step")
c1, c2 = st.columns(2)
steps = inputs.slider(c1, "Generated steps", 2, 12, 5, key="lab_steps",
                      help="The seed (the tutorial notebook kvmem started from) uses 5 tokens, d_model 12, d_head 6 and "
                           "random seed 42.")
urlparams.check_choice("lab_causal", ["true", "false", "True", "False"])
causal = c2.toggle("Causal masking", True, key="lab_causal", bind="query-params",
                   help="Turn it off to see why caching needs it: earlier outputs then change every step.")
with st.spinner("Running the seed's decoder with and without a cache (torch)…"):
    head = common.guard(cache.single_head, steps, causal)
diffs = pd.DataFrame({"step": range(1, steps + 1), "max |cached − uncached|": head.max_abs_diff,
                      "earlier rows changed by": head.past_drift_steps, "tokens in cache (len)": head.cache_tokens})
common.table(diffs)
common.download(diffs, "cached_vs_uncached.csv", key="dl_diffs")
st.caption(f"Largest difference over all steps: {head.max_abs_diff_overall:.2e} (float32 rounding). "
           "The seed's `KVCache.__len__` returned `keys.size(1)` — the head dimension; kvmem.lab's returns tokens.")

st.header("2. The attention matrix grows; the cache needs only its last row")
step = st.slider("Show step", 1, steps, steps, key="lab_show_step", help="Which generation step to draw.")
c1, c2 = st.columns(2)
common.chart(plots.attention_heatmap(head.weights_uncached[step - 1], title=f"No cache: {step}×{step} matrix"),
             key="attn_full", where=c1)
common.chart(plots.attention_heatmap([head.weights_cached[step - 1]], first_query=step,
                                     title=f"KV cache: 1×{step} row"),
             key="attn_row", where=c2)

st.header("3. What the cache costs in memory")
memory = head.memory
st.markdown(f"The cache holds **{memory.tensor_bytes:,} bytes** of tensors after {memory.tokens} tokens; the seed's "
            f"formula 2 × {memory.bytes_per_element} B × {memory.batch} × {memory.layers} layer × "
            f"{memory.kv_heads} head × {memory.head_dim} × {memory.tokens} gives **{memory.formula_bytes:,}**, and "
            f"kvmem.estimate gives **{memory.estimate_bytes:,}**.")

st.header("4. MHA, GQA and MQA side by side")
st.markdown("A small decoder (2 layers, 8 query heads) with 8, 2 and 1 KV heads: the same equivalence, "
            "a cache 4× and 8× smaller.")
with st.spinner("Running three small decoders (MHA, GQA, MQA) with torch; the result is then kept "
                "for every session…"):
    variants = common.guard(cache.variants)
table = pd.DataFrame([{"variant": v.variant, "kv_heads": v.kv_heads, "max |cached − uncached| (logits)":
                       v.max_abs_diff_overall, "bytes per token": v.bytes_per_token,
                       "cache bytes": v.memory.tensor_bytes, "formula bytes": v.memory.formula_bytes}
                      for v in variants])
common.table(table)
common.download(table, "variants.csv", key="dl_variants")

st.header("5. The speedup, measured here")
st.markdown("Time per generated token with and without the cache. Without it, each step reprocesses the whole "
            "sequence, so its cost grows with length; with it, each step processes one token.")
if st.button("Measure (about 2 s)", key="lab_measure", help="Runs lab.time_per_token on this machine."):
    with st.spinner("Timing generation with and without the cache…"):
        st.session_state["lab_timing"] = preload.lab().time_per_token(lengths=(16, 64, 256, 512))
if "lab_timing" in st.session_state:
    timing = pd.DataFrame(st.session_state["lab_timing"])
    common.chart(plots.speedup_lines(timing), key="speedup_chart")
    common.table(timing)
    common.download(timing, "speedup.csv", key="dl_speedup")
