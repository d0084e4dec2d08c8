"""Fit hardware: will this model, context and batch fit on these GPUs under this engine — and how fast?"""

import streamlit as st

import kvmem
from kvmem import plots, tables
from kvmem.engine_choice import engine_rows
from kvmem.engines import ENGINES
from kvmem.sizing import engine_defaults, part_names
from ui import cache, common, deploy, inputs, offload
from ui.engine_options import takes_utilization

st.title("Fit hardware")
st.caption("Weights, KV cache and each engine's own memory budget per device (kvmem.fit). "
           "GiB = 2³⁰ bytes. Decode speed is a memory-bandwidth upper bound.")


def _engine_numbers(record, command) -> None:
    """What the engine prints at start-up, from one record (kvmem.Fit.engine_numbers), said once on the page."""
    numbers = record.engine_numbers
    if numbers is None:
        return
    e1, e2 = st.columns(2)
    e1.metric(numbers.tokens_label, f"{numbers.tokens:,}", help=f"what {numbers.engine} prints at start-up "
              "for this budget (kvmem.fit(...).engine_numbers)")
    if numbers.max_concurrency is not None:
        e2.metric(f"Concurrency at {numbers.context:,} tokens", f"{numbers.max_concurrency:.2f}x",
                  help="requests of this many tokens the pool holds at once (the engine's 'Maximum concurrency')")
    if numbers.lines:
        st.caption(f"{numbers.engine} will print, for {command or 'this workload'} ({record.breakdown_batch:,} "
                   f"sequence(s) × {record.context:,} tokens per replica):")
        st.code("\n".join(numbers.lines), language=None)
    st.caption(("Exact: it follows from " if numbers.exact else "Estimated: it depends on ") + numbers.depends_on + ".")


def _grid(model, choices: list, contexts: list, grid_args: dict):
    """The GPU x context grid (tables.fit_grid), sized a cell at a time while the view has time (common.ViewClock):
    the first GPU's row whole, then cell after cell, at least one; a press sizes the next, another rerun of the same
    grid none (under llama.cpp each cell is a placement over GPU and host: Kimi-K3's or DeepSeek-V4-Pro's 30 cells
    took 19 s, holding the server). The rows of the GPUs sized whole (None: none), and a note of the rest."""
    import pandas as pd

    if not choices:
        return None
    key = repr((model.fingerprint, choices, contexts, sorted(grid_args.items())))
    kept = st.session_state.get("_fit_grid")
    sized = kept[1] if kept and kept[0] == key else {}     # (gpu, context) -> its row: this grid's only
    cells = [(gpu, context) for gpu in choices for context in contexts]
    left = [cell for cell in cells if cell not in sized]
    if sized and not st.session_state.get("fit_grid_next"):
        left = []                                           # a rerun for another input: no more cells unless asked
    clock = common.ViewClock()
    if left:
        with st.spinner(f"Sizing {len(left)} GPU × context cells…"):
            for gpu, context in left:
                if gpu != choices[0] and not clock.more():
                    break
                sized[gpu, context] = common.guard(cache.fit_grid, model, gpus=[gpu], contexts=[context], **grid_args)
                clock.sized += 1
    st.session_state["_fit_grid"] = (key, sized)
    whole = [gpu for gpu in choices if all((gpu, c) in sized for c in contexts)]
    if len(whole) < len(choices):
        st.info(f"Sized {len(whole)} of {len(choices)} GPUs ({len(sized):,} of {len(cells):,} cells). {clock.why()}.",
                icon=":material/hourglass:")
        st.button("Size the next GPUs", key="fit_grid_next", help="Sizes the next cells for as long again; the GPUs "
                                                                  "drawn are kept.")
    if not whole:
        return None
    return pd.concat([sized[gpu, c] for gpu in whole for c in contexts], ignore_index=True)


def _placement_inversion(model, grid_args: dict, context: int, big: tuple, small: tuple) -> None:
    """Why a card with as much memory or more holds fewer sequences under llama.cpp (tables.fit_grid_inversions):
    the max batch is what each card's placement of one sequence holds (kvmem.engines.llamacpp.verdict); where the
    bigger card's keeps less in host RAM, more of the model is on its GPU and less room is left for more sequences'
    KV (DeepSeek-R1 at 8k: an L4 24 GB's -ngl 30 holds 1, a T4 16 GB's -ngl 12 holds 5). From the two cells' fits."""
    (gpu_big, n_big), (gpu_small, n_small) = big, small
    placed = {gpu: common.guard(kvmem.fit, model, gpu=gpu, context=context, **grid_args).placement
              for gpu in (gpu_big, gpu_small)}
    if any(p is None for p in placed.values()):     # no placement on one of them (it does not fit there)
        return
    flags = {gpu: " ".join(p["flags"]) for gpu, p in placed.items()}
    host = {gpu: p["host_bytes"] for gpu, p in placed.items()}
    why = (f"{gpu_big}'s ({flags[gpu_big]}) keeps {kvmem.format_bytes(host[gpu_small] - host[gpu_big])} less in "
           f"host RAM than {gpu_small}'s ({flags[gpu_small]}), so more of the model is on its GPU and less room is "
           f"left for more sequences' KV. For more sequences on {gpu_big}, give it fewer layers (type such flags "
           "under Your llama-server flags)"
           if host[gpu_big] < host[gpu_small] else f"{gpu_big}'s is {flags[gpu_big]}, {gpu_small}'s {flags[gpu_small]}")
    st.info(f"{gpu_big} has as much memory as {gpu_small} or more but holds fewer sequences at {context:,} tokens "
            f"({n_big:,} vs {n_small:,}): under llama.cpp the max batch is what the placement of one sequence holds; "
            f"{why}.", icon=":material/compare_arrows:")


work = inputs.sidebar()
model = work.model
cards = offload.cards_input(work.engine)    # llama.cpp on mixed cards: kvmem fit --gpu A,B's record
page_args = {}
if takes_utilization(work.engine):
    page_args["gpu_memory_utilization"] = inputs.number(
        st, f"gpu_memory_utilization ({work.engine})", 0.05, 1.0, 0.9, key="util", step=0.01,
        help=f"{work.engine} budgets this share of the device's total memory.")
kwargs = work.fit_kwargs(**page_args)  # every sidebar input, engine options included
host_args = offload.host_inputs(work.engine, kwargs)     # host RAM as a budget (kvmem.host)
kwargs.update(host_args)
mmproj_args = offload.mmproj_inputs(work.engine, kwargs)   # a multimodal projector beside the model
kwargs.update(mmproj_args)
if cards:   # the placement over the cards listed, the CLI's answer for the same inputs; one kind of card below
    inputs.not_used("gpu", "num_gpus", why="the mixed cards replace them")
    offload.mixed_panel(model, work, cards, {**work.options, **host_args, **mmproj_args})
    st.caption("Deploy, Which engine? and the GPU grid size one kind of card: clear the mixed cards for them.")
    st.stop()

try:
    result = kvmem.fit(model, **kwargs)
except ValueError as exc:
    st.error(str(exc))
    st.stop()

common.engine_refusal(result)
verdict = "fits" if result.fits else "does not fit"
if result.placement:    # llama.cpp's verdict is its placement's (kvmem.engines.llamacpp.verdict)
    verdict += f", {kvmem.format_bytes(result.placement['host_bytes'])} of it in host RAM"
    if result.fits and result.placement.get("condition"):
        verdict += f" — {result.placement['condition']}"
formats = f"KV {result.kv_dtype}, weights {result.weight_dtype}"
st.subheader(f"{common.plain(model.name)} on {result.num_gpus} × {result.gpu} ({formats}): {verdict}")
host_bandwidth = None
if "offload" in ENGINES[work.engine].panels:   # the engine places layers on GPUs and host: its placement first
    host_bandwidth = offload.panel(model, kwargs)
decode = result.decode_tokens_per_s
decode_help = "per sequence: active weights + every sequence's KV read once per step"
if decode is None and host_bandwidth and result.fits and result.placement and not result.placement.get("whole"):
    # layers or experts in host RAM: the placement's bound at the host RAM bandwidth the panel above uses
    decode = offload.decode_bound(model, kwargs, host_bandwidth, result.breakdown_batch)
    decode_help = (f"per sequence: kvmem's placement, each device's bytes read per step over its bandwidth, host RAM "
                   f"at {host_bandwidth} (the panel's choice)")
m1, m2, m3, m4 = st.columns(4)
m1.metric("Max batch", f"{result.max_batch:,}", help=f"sequences of {result.context:,} tokens at once"
          + (f", over {result.replicas} replicas" if result.replicas > 1 else ""))
m2.metric("Max context", f"{result.max_context:,}", help=f"tokens per sequence at batch {result.batch or 1}")
m3.metric("Fewest GPUs", "—" if result.min_gpus is None else f"{result.min_gpus}",
          help="smallest tp (x pp) that holds the workload")
m4.metric(f"Decode bound at batch {result.breakdown_batch:,}", "—" if decode is None else f"{decode:,.1f} tok/s",
          help=decode_help + ("" if result.decode_text is None else f"; {result.decode_text}"))
if result.kv_crossover_tokens:
    st.caption(f"KV reads overtake weight reads from {result.kv_crossover_tokens:,} tokens per sequence.")
if result.why_not:    # the one shortfall and what would fit, said once on this page (the Deploy box refers to it)
    st.error(result.why_not)
offload.host_panel(result)    # what the plan keeps in host RAM, each term with its source
engine_box = st.container()   # what the engine will print: filled from the Deploy plan's record, or this fit's

breakdown = tables.breakdown_frame(result)
batch_for = getattr(result, "breakdown_batch", None)
context_for = getattr(result, "breakdown_context", None)
shown_for = (f"{batch_for:,} × {context_for:,} tokens, " if batch_for and context_for else "")
common.chart(plots.breakdown_bar(breakdown, total_bytes=result.breakdown["total"], names=part_names(work.engine),
                                 title=f"Per device, {shown_for}{result.engine}, tp {result.tp} × pp {result.pp}, "
                                       f"{formats}"),
             key="fit_breakdown")
plan = deploy.panel(model, kwargs, work.options, fit=result)
with engine_box:      # one record: the command's fit where there is a command, else this page's fit
    _engine_numbers(plan.fit if plan is not None else result, "the command below" if plan is not None else None)
if result.notes:
    with st.expander(f"Notes ({len(result.notes)})", expanded=not result.fits):
        for note in result.notes:
            st.markdown(f"- {note}")

st.subheader("Which engine?")
if st.toggle("Size this workload under every engine mode", key="fit_engines",
             help="One kvmem.fit and one kvmem.plan per engine (kvmem compare): fits, max batch, max context, the "
                  "engine's concurrency and its command. The sidebar's engine options go to the engines that "
                  "declare them; the others run with their defaults."):
    with st.spinner("Sizing every engine mode…"):
        engine_table = common.guard(engine_rows, model, **{k: v for k, v in kwargs.items() if k != "engine"})
    shown = [{"engine": r.engine, "fits": "refused" if r.fits is None else r.fits, "max_batch": r.max_batch,
              "max_context": r.max_context, "max_concurrency": r.max_concurrency,
              "command": r.command or r.refused or r.no_command} for r in engine_table]
    common.table(tables.rows_frame(shown, drop=()))

st.subheader("Max batch over context and GPU")
choices = inputs.multiselect(st, "GPUs to compare", kvmem.list_gpus(),
                            default=list(dict.fromkeys([work.gpu, "h100-sxm-80gb", "a100-sxm-80gb", "l40s-48gb",
                                                        "rtx-4090-24gb"])),
                            key="fit_gpus", help="Each cell is one kvmem.fit().")
contexts = tables.context_points(work.tokens, start=2048, at_least=32768)
grid = _grid(model, choices, contexts, {k: v for k, v in kwargs.items() if k not in ("context", "batch", "gpu")})
if grid is not None:
    common.chart(plots.fit_heatmap(grid, title=f"{common.chart_text(model.name)}: max batch ({work.num_gpus} GPU(s) each)"),
                 key="fit_heatmap")
    for context, big, small, n_big, n_small in tables.fit_grid_inversions(grid):
        if result.placement:        # llama.cpp: each card's max batch is what its one-sequence placement holds
            _placement_inversion(model, {k: v for k, v in kwargs.items() if k not in ("context", "batch", "gpu")},
                                 context, (big, n_big), (small, n_small))
            break
        # as much memory, fewer sequences: said where the engine's own settings differ by GPU (vLLM's batch
        # defaults: 8,192 tokens on an H100 80 GB, 2,048 on an A100), not only in the CLI's notes
        why = {gpu: common.guard(engine_defaults, work.engine, gpu, context=context, tp=result.tp, pp=result.pp,
                                 **work.options) for gpu in (big, small)}
        if why[big] is None or why[big].values == why[small].values:
            continue
        st.info(f"{big} has about as much memory as {small} but holds fewer sequences at {context:,} tokens "
                f"({n_big:,} vs {n_small:,}): {work.engine}'s own settings differ by GPU — {why[big].reason}; "
                f"{why[small].reason}. Set them in the engine options to compare GPUs on equal terms.",
                icon=":material/compare_arrows:")
        break
    common.table(grid)
    common.download(grid, "fit_grid.csv", key="dl_fit")
