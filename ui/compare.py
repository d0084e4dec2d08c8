"""Compare: several models, KV dtypes or engines side by side, at the sidebar's workload."""

import streamlit as st

import kvmem
from kvmem import plots, strategies, tables
from kvmem.engines import ENGINES
from ui import common, inputs

st.title("Compare models, formats and engines")
st.caption("Each row is one kvmem.estimate() at the sidebar's tokens, batch and parallelism. "
           "GiB = 2³⁰ bytes.")

work = inputs.sidebar()
# the models on a row of their own: four default names fit whole there (in a third of the row the
# fourth chip was cut off)
models = inputs.multiselect(st, "Models", kvmem.list_models(),
                            default=["llama-3.1-8b", "qwen3-8b", "gemma-3-27b", "deepseek-v3"], key="cmp_models",
                            help="Presets to compare; the sidebar's model is always the first row.")
c2, c3 = st.columns(2)
dtypes = inputs.multiselect(c2, "KV dtypes", inputs.KV_DTYPES, default=[work.kv_dtype], key="cmp_dtypes",
                            help="Element formats of the cache.")
engines = inputs.multiselect(c3, "Engines", list(ENGINES), default=[work.engine], key="cmp_engines",
                             help="Allocation rules; the sidebar's engine runs with the sidebar's options, "
                                  "the others with their defaults.")
inputs.not_used("gpu", "num_gpus", "weight_dtype", why="KV only; hardware is on Fit hardware")
if not dtypes or not engines:
    st.info("Choose at least one KV dtype and one engine.")
    st.stop()

candidates = [(work.model.name, work.model)] + [(name, kvmem.get_model(name)) for name in models
                                                  if name != work.model.name]
rows, sweeps, skipped = [], {}, []
contexts = tables.context_points(work.tokens, at_least=131072)
for name, model in candidates:
    for kv_dtype in dtypes:
        for engine in engines:
            run = work.engine_kwargs(kv_dtype=kv_dtype) if engine == work.engine else dict(
                engine=engine, kv_dtype=kv_dtype, tp=work.tp, pp=work.pp)
            try:
                result = kvmem.estimate(model, tokens=work.tokens, batch=work.batch, **run)
                sweep = tables.context_sweep(model, contexts=contexts, batch=work.batch, **run)
            except (ValueError, OverflowError) as exc:
                skipped.append(f"{name} · {kvmem.dtype(kv_dtype, model_dtype=model.dtype).name} · {engine}: {exc}")
                continue
            # one spelling per format: the element format in force, as the result names it
            label = " · ".join(part for part, many in ((name, True), (result.kv_dtype, len(dtypes) > 1),
                                                        (engine, len(engines) > 1)) if many)
            rows.append((label, result))
            sweeps.setdefault(name, {})[label] = sweep

if skipped:
    with st.expander(f"{len(skipped)} combination(s) skipped: the engine refuses them", icon=":material/warning:"):
        for message in skipped:
            st.markdown(f"- {common.plain(message)}")
if rows:
    frame = tables.compare_frame(rows)
    common.chart(plots.bytes_per_token_bars(frame, title=f"KV bytes per token at {work.tokens:,} tokens"),
                 key="cmp_bars")
    lines = {label: sweep for per_model in sweeps.values() for label, sweep in per_model.items()}
    if len(lines) > 10:  # one model at a time keeps every line distinguishable
        shown = inputs.select(st, "Lines for", list(sweeps), key="cmp_lines_model",
                              help="More than 10 lines: the chart shows one model's formats and engines.")
        lines = sweeps[shown]
    common.chart(plots.compare_lines(lines, title=f"KV cache vs context (batch {work.batch})"), key="cmp_lines")
    common.table(frame)
    common.download(frame, "compare.csv", key="dl_compare")

st.header(f"{common.plain(work.model.name)} as MHA, GQA, MQA and MLA")
st.caption("The same layers with other attention — what the cache would be had the model been trained so "
           "(these variants need retraining; kvmem.strategies.architecture_variants).")
variants = common.guard(strategies.architecture_variants, work.model, tokens=work.tokens, batch=work.batch,
                        gqa_groups=common.gqa_groups(work.model), **work.engine_kwargs())
variant_frame = tables.rows_frame(variants)
common.chart(plots.labelled_bars(variant_frame, label="variant", value="bytes",
                                 title=f"KV cache at {work.tokens:,} tokens × {work.batch}"), key="cmp_variants")
common.table(variant_frame, ["variant", "gib", "saving_fraction", "needs_retraining", "cost"])
common.download(variant_frame, "variants.csv", key="dl_cmp_variants")
