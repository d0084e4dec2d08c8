"""Overview: models x GPUs at the sidebar's context — fits, max batch, max context or the engine's
concurrency, one matrix per engine (kvmem.sweep; a refused cell shows the refusal's reason)."""

import streamlit as st

import kvmem
from kvmem import tables
from kvmem.engines import ENGINES
from ui import cache, common, inputs

st.title("Overview: models × GPUs")
st.caption("Each cell is kvmem.fit's answer for one model on one GPU type (× the sidebar's GPUs, tp = GPUs) at the "
           "sidebar's tokens, batch, KV dtype and weight format (kvmem.sweep). A cell the engine or kvmem refuses "
           "shows why, never a number. Open one cell on Fit hardware for the breakdown and the launch command.")

work = inputs.sidebar()
SHOW = {label: key for key, label in tables.SWEEP_SHOWS.items()}
c1, c2 = st.columns(2)
more_engines = inputs.multiselect(c1, "More engines", list(ENGINES), default=[], key="ov_engines",
                                  help="One matrix per engine: the sidebar's engine first, with the sidebar's options; "
                                       "the others with their defaults.")
shown = inputs.radio(c2, "Show", list(SHOW), key="ov_show", horizontal=True,
                     help=f"max batch: sequences of {work.tokens:,} tokens; fits: {work.batch} sequence(s) of "
                          f"{work.tokens:,} tokens; max context: tokens for {work.batch} sequence(s); max "
                          "concurrency: the engine's own figure for requests of this many tokens.")
models = inputs.multiselect(st, "Models", kvmem.list_models(), default=kvmem.list_models(), key="ov_models",
                            help="Rows; the sidebar's model is always the first row.")
more_gpus = inputs.multiselect(st, "GPUs", kvmem.list_gpus(), default=kvmem.list_gpus(), key="ov_gpus",
                               help="Columns; the sidebar's GPU is always the first column.")
if SHOW[shown] == "max_batch":   # the most sequences of this context: the batch asked for plays no part
    inputs.not_used("tp", "pp", "batch", why="each cell runs tp = the sidebar's GPUs, pp 1; max batch does not "
                                             "depend on the batch asked for")
else:
    inputs.not_used("tp", "pp", why="each cell runs tp = the sidebar's GPUs, pp 1")
engines = list(dict.fromkeys([work.engine, *more_engines]))
gpus = list(dict.fromkeys([work.gpu, *more_gpus]))

rows = [work.model] + [name for name in models if name != work.model.name]
base = dict(contexts=[work.tokens], num_gpus=work.num_gpus, batch=work.batch, kv_dtype=work.kv_dtype,
            weight_dtype=work.weight_dtype)
all_cells = []
for engine in engines:
    options = work.options if engine == work.engine else {}
    with st.spinner(f"Sizing {len(rows) * len(gpus):,} cells under {engine}…"):
        cells = common.guard(cache.sweep, rows, gpus, engines=[engine], **base, **options)
    all_cells += cells
    refused = sum(1 for c in cells if c.refused)
    for_batch = "" if SHOW[shown] == "max_batch" else f", batch {work.batch:,}"
    st.subheader(f"{engine}: {shown} at {work.tokens:,} tokens{for_batch}")
    st.caption(f"{len(cells):,} cells, {sum(1 for c in cells if c.fits):,} fit, {refused:,} refused.")
    common.table(tables.sweep_matrix(cells, show=SHOW[shown]))
common.download(tables.sweep_frame(all_cells), "overview.csv", key="dl_overview",
                label="Download every cell (CSV)")
