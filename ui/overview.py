"""Overview: models x GPUs at the sidebar's context — fits, max batch, max context or the engine's
concurrency, one matrix per engine (kvmem.sweep; a refused cell shows the refusal's reason)."""

import streamlit as st

import kvmem
from kvmem import tables
from kvmem.engines import ENGINES
from ui import cache, common, inputs

MAX_NEW_CELLS = 2_000      # cells one view sizes anew: about every preset x every GPU under one engine (1-3 s)

st.title("Overview: models × GPUs")
st.caption("Each cell is kvmem.fit's answer for one model on one GPU type (× the sidebar's GPUs, tp = GPUs) at the "
           "sidebar's tokens, batch, KV dtype and weight format (kvmem.sweep). A cell the engine or kvmem refuses "
           "shows why, never a number. Open one cell on Fit hardware for the breakdown and the launch command.")

# A cell's colour says what it is (tables.sweep_status); a refusal's reason is said once per row
COLOURS = {"fits": "background-color: rgba(46, 160, 67, 0.22)", "does not fit": "background-color: rgba(248, 81, "
           "73, 0.18)", "refused": "color: rgba(128, 128, 128, 0.9); font-style: italic", "": ""}
GROUPS = ("fits on some GPU", "fits on none", "refused on every GPU")


def _matrix(cells, show: str) -> None:
    """One engine's matrix, grouped (the sidebar's model, then models that fit somewhere, fit nowhere,
    are refused everywhere) and coloured by each cell's status; refusals said once per row."""
    frame, status = tables.sweep_matrix(cells, show=show, reasons="row"), tables.sweep_status(cells)
    gpu_columns = [c for c in status.columns if c != "model"]

    def group(i: int) -> str:
        row = [status.at[i, gpu] for gpu in gpu_columns]
        return GROUPS[0] if "fits" in row else GROUPS[2] if all(s == "refused" for s in row) else GROUPS[1]

    frame.insert(1, "group", [group(i) for i in frame.index])
    order = sorted(frame.index, key=lambda i: (i != 0, GROUPS.index(frame.at[i, "group"]), i))
    frame, status = frame.loc[order].reset_index(drop=True), status.loc[order].reset_index(drop=True)
    styles = frame.copy().astype(str).map(lambda _: "")
    for gpu in gpu_columns:
        styles[gpu] = status[gpu].map(COLOURS)
    styled = frame.rename(columns={"model": "Model", "group": "Group"}).style.apply(
        lambda _: styles.rename(columns={"model": "Model", "group": "Group"}).values, axis=None)
    st.table(styled, hide_index=True)
    counts = {name: sum(frame["group"] == name) for name in GROUPS}
    st.caption("Green: fits; red: does not fit; grey: refused (why, once per row, in the last column). Rows: "
               + ", ".join(f"{n:,} {name}" for name, n in counts.items() if n) + ".")


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
per_engine = len(rows) * len(gpus)
# One view sizes at most MAX_NEW_CELLS cells it has not sized before (every engine of every preset on
# every GPU was 15-42 s of the server's one interpreter, and stalled other sessions' pages): the
# sidebar's engine always, the others while the budget lasts, the rest on the next view. A session
# keeps the matrices of its current view, so a rerun (the button below) sizes only what is left.
view = repr((work.model.fingerprint, rows[1:], gpus, sorted(base.items()), sorted(work.options.items())))
kept = st.session_state.get("_ov_cells", {})
kept = {key: cells for key, cells in kept.items() if key[1] == view}     # this view's only: bounded memory
budget, pending, all_cells = MAX_NEW_CELLS, [], []
for engine in engines:
    key = (engine, view)
    if key not in kept:
        if per_engine > budget and budget < MAX_NEW_CELLS:
            pending.append(engine)
            continue
        options = work.options if engine == work.engine else {}
        with st.spinner(f"Sizing {per_engine:,} cells under {engine}…"):
            kept[key] = common.guard(cache.sweep, rows, gpus, engines=[engine], **base, **options)
        budget -= per_engine
    cells = kept[key]
    all_cells += cells
    refused = sum(1 for c in cells if c.refused)
    for_batch = "" if SHOW[shown] == "max_batch" else f", batch {work.batch:,}"
    st.subheader(f"{engine}: {shown} at {work.tokens:,} tokens{for_batch}")
    st.caption(f"{len(cells):,} cells, {sum(1 for c in cells if c.fits):,} fit, {refused:,} refused.")
    _matrix(cells, SHOW[shown])
st.session_state["_ov_cells"] = kept
if pending:
    st.info(f"Not sized yet: {', '.join(pending)}. The Overview sizes at most {MAX_NEW_CELLS:,} new cells per view "
            f"({len(rows):,} models × {len(gpus):,} GPUs = {per_engine:,} per engine), so that one page never holds "
            "the server for long; size the next, or choose fewer models or GPUs.", icon=":material/hourglass:")
    st.button(f"Size {pending[0]}" + (f" (then {len(pending) - 1:,} more)" if len(pending) > 1 else ""),
              key="ov_next", help="Sizes the next engine(s) within the same budget; the matrices above are kept.")
common.download(tables.sweep_frame(all_cells), "overview.csv", key="dl_overview",
                label="Download every cell shown (CSV)" if pending else "Download every cell (CSV)")
