"""Strategies: the seed's four families of KV-cache reductions as what-ifs, in numbers and plots."""

import streamlit as st

import kvmem
from kvmem import plots, strategies, tables
from ui import common, inputs, urlparams

# One tab's results are computed and drawn at a time (the open tab is in the URL); every input
# is drawn on every run, so all of them stay in the URL and in the session.
VIEWS = ["Side by side", "Eviction", "Paged vs contiguous", "Prefix sharing and offloading", "Architecture variants"]
SAMPLE = 500  # request lengths per distribution on the Paged vs contiguous tab


def kv_only_tab():
    """The tabs that compute KV on one device and nothing else say so."""
    inputs.not_used("gpu", "num_gpus", "weight_dtype", where="tab",
                    why="KV only; the GPU only gives the host-link bandwidth, on the Prefix sharing and offloading tab")


st.title("Ways to shrink the KV cache")
st.caption("The seed's families — quantisation, eviction, paged allocation and prefix sharing, offloading, "
           "architecture variants — computed by kvmem.strategies at the sidebar's workload, one tab at a time. "
           "GiB = 2³⁰ bytes. *The seed* is the tutorial notebook kvmem started from (not in this repository).")

work = inputs.sidebar()
model = work.model
run = work.engine_kwargs(tokens=work.tokens, batch=work.batch)  # every sidebar input, engine options included

c1, c2 = st.columns(2)
budget = inputs.number(c1, "Eviction budget (tokens)", 1, 10**7, 1024, key="budget",
                       help="Tokens kept per layer by StreamingLLM / H2O / SnapKV (Side by side and Eviction).")
residual = inputs.number(c2, "Full-precision residual (tokens)", 0, 10**6, 128, key="residual",
                         help="KIVI / transformers QuantizedCache keep the newest tokens unquantised (Side by side).")
if "residual_length" in work.options:  # the engine option (hf-quantized) is the one in force
    residual = work.options["residual_length"]
    st.caption(f"Full-precision residual: {residual:,} tokens, from the hf-quantized options in the sidebar.")
urlparams.check_choice("strategy_view", VIEWS)
side, eviction, paged, sharing, variants_tab = st.tabs(VIEWS, key="strategy_view", bind="query-params")

with side:
    if side.open:
        kv_only_tab()
        rows = common.guard(kvmem.compare_strategies, model, budget=budget, **{**run, "residual_length": residual})
        frame = tables.rows_frame(rows)
        common.chart(plots.labelled_bars(frame.dropna(subset=["bytes"]), label="strategy", value="bytes",
                                         color="family",
                                         title=f"{common.chart_text(model.name)}: KV bytes per strategy at "
                                               f"{work.tokens:,} tokens × {work.batch}"), key="strategy_bars")
        common.table(frame, ["strategy", "family", "gib", "saving_fraction", "lossless", "needs_retraining", "cost"])
        common.download(frame, "strategies.csv", key="dl_strategies")

with eviction:
    if eviction.open:
        kv_only_tab()
        st.markdown("Memory stays bounded. Evicted tokens are gone for good: if a dropped token matters later, "
                    "the model cannot attend to it.")
        policies = common.guard(strategies.eviction_policies, budget)
        contexts = tables.eviction_contexts(work.tokens, budget)
        curves = common.guard(tables.eviction_curves, model, contexts=contexts, evictions=policies.by_label(),
                              batch=work.batch, **work.engine_kwargs())
        common.chart(plots.compare_lines(curves, title="KV cache vs tokens generated",
                                         x_title="tokens generated per sequence (log)", merge_equal=True),
                     key="eviction_lines")
        st.caption("Policies that keep the same number of tokens per layer hold the same bytes: such lines are one, "
                   "named \"A = B\" (StreamingLLM's sinks + window and H2O's budget, both the eviction budget).")

with paged:
    c1, c2 = st.columns(2)
    max_len = inputs.parse_tokens_input(c1, "max_model_len", "8k", key="max_model_len",
                                        help="Contiguous allocation reserves this much per request.")
    kv_memory = inputs.parse_bytes_input(c2, "KV memory budget", "20GiB", key="kv_memory",
                                         help="Bytes the engine has for KV on one device.")
    if paged.open:
        inputs.not_used("tokens", "batch", "engine", "options", "tp", "pp", "gpu", "num_gpus", "weight_dtype",
                        why="a sample of request lengths, max_model_len and the budget above stand for the workload, "
                            "and block sizes of 1 to 128 tokens are compared; the model and KV dtype apply",
                        where="tab")
        sweep = common.guard(strategies.allocation_sweep, model, max_model_len=max_len, kv_memory=kv_memory,
                             n=SAMPLE, kv_dtype=work.kv_dtype)
        alloc = tables.rows_frame(sweep)
        st.caption(f"Each distribution is a reproducible sample of {SAMPLE:,} request lengths (prompt + output, "
                   "kvmem.strategies.request_lengths, seed 0). **fixed**: every request max_model_len / 2 tokens. "
                   "**uniform**: 1 to max_model_len tokens, equally likely. **sharegpt**: prompt and output lengths "
                   "with the means of ShareGPT conversations (the vLLM paper's Figure 11). Contiguous allocation "
                   "reserves max_model_len per request; paged allocation reserves whole blocks. *Requests admitted* "
                   "is how many of the sample fit in the budget, one after another.")
        common.chart(plots.labelled_bars(alloc, label="allocation", value="admitted", color="distribution", scale=1,
                                         y_title="requests admitted", title="Requests that fit in the budget"),
                     key="alloc_bars")
        common.table(alloc, ["distribution", "allocation", "admitted", "waste_fraction", "mean_length"])
        common.download(alloc, "allocation.csv", key="dl_alloc")

with sharing:
    c1, c2 = st.columns(2)
    prefix = inputs.number(c1, "Shared prefix (tokens)", 0, 10**7, 0, key="prefix",
                           help="The batch's sequences share their first P tokens; paged engines share whole blocks.")
    offload = inputs.slider(c2, "Offloaded to host memory", 0.0, 1.0, 0.0, key="offload", step=0.05,
                            help="Fraction of the KV cache kept in host memory.")
    if sharing.open:
        inputs.not_used("num_gpus", "weight_dtype", why="KV only", where="tab")
        shared = common.guard(kvmem.estimate, model, shared_prefix=prefix, offload=offload, **run)
        base = common.guard(kvmem.estimate, model, **run)
        host = shared.offload.host_kv_bytes if shared.offload else 0
        st.markdown(f"Without prefix sharing or offloading, {base.engine} holds **{kvmem.format_bytes(base.kv_bytes)}** "
                    f"of KV for {work.tokens:,} tokens × {work.batch} on one device.")
        m1, m2, m3 = st.columns(3)
        saved = base.kv_bytes - shared.kv_bytes  # the library's two results, compared (no new arithmetic on them)
        m1.metric("KV on the device", kvmem.format_bytes(shared.kv_bytes),
                  delta=None if saved == 0 else f"-{kvmem.format_bytes(saved)}", delta_color="inverse",
                  help="Against the same workload without prefix sharing or offloading.")
        m2.metric("KV in host memory", kvmem.format_bytes(host))
        try:
            transfer_ms = f"{strategies.offload_transfer_seconds(host, gpu=work.gpu) * 1000:.2f} ms"
            transfer_help = f"reading {kvmem.format_bytes(host)} over {work.gpu}'s host link each step"
        except ValueError as exc:  # the catalog has no host-link bandwidth for this GPU
            transfer_ms, transfer_help = "—", str(exc)
        m3.metric("Host transfer per decode step (PCIe)", transfer_ms, help=transfer_help)

with variants_tab:
    if variants_tab.open:
        kv_only_tab()
        st.markdown("The same model with other attention: every variant but *as is* needs retraining.")
        variants = common.guard(strategies.architecture_variants, model, gqa_groups=common.gqa_groups(model), **run)
        var = tables.rows_frame(variants)
        common.chart(plots.labelled_bars(var, label="variant", value="bytes", title="The same model, other attention"),
                     key="variant_bars")
        common.table(var, ["variant", "gib", "saving_fraction", "needs_retraining", "cost"])
        common.download(var, "variants.csv", key="dl_variants")
