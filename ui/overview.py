"""Overview: models x GPUs at the sidebar's context — fits, max batch, max context or the engine's
concurrency, one matrix per engine (kvmem.sweep; a refused cell shows the refusal's reason).

One view sizes new cells for common.ViewClock's time (KVMEM_VIEW_SECONDS, 6 s): the sidebar's model under the
sidebar's engine always, then row after row, engine after engine; a press sizes the next. Every
preset x every GPU is under a second under vLLM, but 3-4 minutes of the server's one interpreter under
llama.cpp (bench/README.md: each cell a placement over GPU and host, DeepSeek-V4-Pro's row alone 38 s at 32k)."""

import time

import streamlit as st

import kvmem
from kvmem import tables
from kvmem.engines import ENGINES
from ui import cache, common, inputs

CELL_ALONE = 0.05       # a row whose first cell took longer is sized a GPU at a time (_size)

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


def _size(engine: str, sized: dict, options: dict, clock) -> None:
    """Size ``engine``'s rows of the page's ``rows`` x ``gpus`` left (``sized``: row index -> its cells so far, in
    ``gpus`` order) while ``clock`` (common.ViewClock) has time, the sidebar's model under the sidebar's engine whole.
    A row's first cell alone, then the rest at once where it took at most CELL_ALONE seconds, else GPU by GPU (under
    llama.cpp Kimi-K3's row takes 57 s at 8k, 1.8 s a cell), so that a view overruns its time by one cell at most."""
    left = [i for i in range(len(rows)) if len(sized.get(i, ())) < len(gpus)]
    if not left:
        return
    bar = st.progress(0.0)
    for done, i in enumerate(left):
        row, step = sized.setdefault(i, []), 1
        while len(row) < len(gpus) and (clock.more() or (engine, i) == (engines[0], 0)):
            bar.progress(done / len(left), text=f"Sizing {getattr(rows[i], 'name', rows[i])} under {engine} "
                                                f"({len(rows) - len(left) + done + 1:,} of {len(rows):,} models)…")
            started = time.monotonic()
            cells = common.guard(cache.sweep, [rows[i]], gpus[len(row):len(row) + step], engines=[engine], **base,
                                 **options)
            row += cells
            clock.sized += len(cells)
            if len(row) == 1 and time.monotonic() - started <= CELL_ALONE:
                step = len(gpus)
        if len(row) < len(gpus):
            break
    bar.empty()


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
# A session keeps the rows of its current view (row index -> cells, per engine), so a press sizes only what is left
view = repr((work.model.fingerprint, rows[1:], gpus, sorted(base.items()), sorted(work.options.items())))
kept = st.session_state.get("_ov_rows", {})
kept = {key: sized for key, sized in kept.items() if key[1] == view}     # this view's only: bounded memory
clock = common.ViewClock()
pending, all_cells = {}, []
for engine in engines:
    sized = kept.setdefault((engine, view), {})
    _size(engine, sized, work.options if engine == work.engine else {}, clock)
    done = sorted(i for i in sized if len(sized[i]) == len(gpus))
    if len(done) < len(rows):
        partial = [f"{getattr(rows[i], 'name', rows[i])} on {len(sized[i]):,} of {len(gpus):,} GPUs so far"
                   for i in sized if 0 < len(sized[i]) < len(gpus)]
        pending[engine] = f"{len(rows) - len(done):,} of {len(rows):,} models under {engine}" + (
            f" ({', '.join(partial)})" if partial else "")
    if not done:
        continue
    cells = [cell for i in done for cell in sized[i]]
    all_cells += cells
    refused = sum(1 for c in cells if c.refused)
    for_batch = "" if SHOW[shown] == "max_batch" else f", batch {work.batch:,}"
    st.subheader(f"{engine}: {shown} at {work.tokens:,} tokens{for_batch}")
    part = f" ({len(done):,} of {len(rows):,} models sized)" if len(done) < len(rows) else ""
    st.caption(f"{len(cells):,} cells{part}, {sum(1 for c in cells if c.fits):,} fit, {refused:,} refused."
               + (" A cell's max batch and max context are what that card's placement of one sequence (layers and "
                  "experts over GPU and host) holds: a bigger card, keeping more on its GPU, can show fewer."
                  if "offload" in ENGINES[engine].panels else ""))
    _matrix(cells, SHOW[shown])
st.session_state["_ov_rows"] = kept
if pending:
    st.info(f"Not sized yet: {'; '.join(pending.values())}. {clock.why()}: size the next, or choose fewer models "
            "or GPUs.", icon=":material/hourglass:")
    st.button("Size the next rows", key="ov_next", help="Sizes the next rows for as long again; the rows above are "
                                                        "kept.")
common.download(tables.sweep_frame(all_cells), "overview.csv", key="dl_overview",
                label="Download every cell shown (CSV)" if pending else "Download every cell (CSV)")
