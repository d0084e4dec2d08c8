"""The Fit page's llama.cpp offload panel, drawn right under the verdict (which is its placement's:
kvmem.engines.llamacpp.verdict): the flags that keep the most on the GPUs, --fit on's, the memory
per device and on the host, the decode bound and both llama-server commands. On mixed cards (the
page's "Mixed cards" box) the page is kvmem fit --gpu A,B's record (kvmem.engines.llamacpp.panel
mixed_cards), drawn here: its headline, this panel, max batch and context, memory per device.

Thin: kvmem.llamacpp_offload computes everything; this draws it (st.code has a copy button).
"""

from __future__ import annotations

import streamlit as st

import kvmem
from kvmem.engines.llamacpp.offload import host_memory_presets
from kvmem.engines.llamacpp.panel import panel_decode_curve, panel_offload


def panel(model, fit_kwargs: dict) -> str | None:
    """Draw the panel; the host RAM bandwidth it was drawn with (the page's decode bound takes the same one), or
    None where nothing is placed."""
    st.subheader("llama.cpp: layers and experts on the GPUs")
    host = host_bandwidth_input()
    gpus = [fit_kwargs["gpu"]] * fit_kwargs["num_gpus"]
    try:
        plan = panel_offload(model, gpus=gpus, context=kvmem.parse_tokens(fit_kwargs["context"]),
                             batch=fit_kwargs.get("batch"), weight_dtype=fit_kwargs["weight_dtype"],
                             kv_dtype=fit_kwargs["kv_dtype"], host_memory=host, options=fit_kwargs)
    except ValueError as exc:
        st.info(f"Not placed: {exc}")
        return None
    draw_plan(plan)
    decode_steps(model, gpus, fit_kwargs, host)
    own_flags_panel(model, gpus, context=kvmem.parse_tokens(fit_kwargs["context"]), batch=fit_kwargs.get("batch"),
                    weight_dtype=fit_kwargs["weight_dtype"], kv_dtype=fit_kwargs["kv_dtype"], host=host,
                    options=fit_kwargs)
    return host


def host_bandwidth_input() -> str:
    """The host RAM bandwidth of the decode bound (a kvmem/data/host_memory.json preset)."""
    presets = list(host_memory_presets())
    return st.selectbox("Host RAM bandwidth", presets, index=presets.index("ddr5-5600-2ch"), key="offload_host",
                        help="For the decode bound: bytes read per token from host RAM over this bandwidth "
                             "(kvmem/data/host_memory.json, each with its source).")


def draw_plan(plan) -> None:
    """kvmem's placement and --fit on's (kvmem.llamacpp_offload): layers, memory per device, the decode bound and
    each command (st.code: a copy button; the command's -ot patterns are shell-quoted)."""
    for label, lay, speed, command in (("kvmem: the most on the GPUs", plan.best, plan.decode_best, plan.command_best),
                                       ("--fit on", plan.fit, plan.decode_fit, plan.command_fit)):
        if lay is None:
            st.warning(f"{label}: nothing fits")
            continue
        memory = ", ".join(f"{device} {kvmem.format_bytes(n)}" for device, n in lay.total_bytes.items())
        bound = "—" if speed is None else f"{speed:,.1f} tok/s"
        st.markdown(f"**{label}**: {lay.placement.offloaded_layers}/{lay.placement.layers_total} layers on the GPUs, "
                    f"context {lay.n_ctx:,}; {memory}; decode bound {bound}")
        st.code(command, language="bash")
    st.caption(f"--fit on: {plan.fit_note}. " + " ".join(plan.notes))


def decode_steps(model, gpus: list, fit_kwargs: dict, host: str) -> None:
    """The decode bound at each step of offload (kvmem.llamacpp_decode_curve), in an expander."""
    with st.expander("Decode bound at each step of offload"):
        rows = panel_decode_curve(model, gpus=gpus, context=kvmem.parse_tokens(fit_kwargs["context"]),
                                  batch=fit_kwargs.get("batch"), weight_dtype=fit_kwargs["weight_dtype"],
                                  kv_dtype=fit_kwargs["kv_dtype"], host_memory=host, options=fit_kwargs)
        st.dataframe([{"flag": f"{r.flag} {r.value}", "fits": r.fits,
                       "tokens/s (bound)": "—" if r.tokens_per_s is None else f"{r.tokens_per_s:,.1f}",
                       **{device: kvmem.format_bytes(n) for device, n in r.total_bytes.items()}} for r in rows],
                     hide_index=True)


def decode_bound(model, fit_kwargs: dict, host: str, batch: int) -> float | None:
    """kvmem's placement's decode bound (tokens/s per sequence) for ``batch`` sequences, host RAM read at
    ``host``: the Fit page's metric where the fit keeps layers or experts in host RAM (kvmem.fit has no host
    bandwidth), with the bandwidth the panel uses."""
    try:
        plan = panel_offload(model, gpus=[fit_kwargs["gpu"]] * fit_kwargs["num_gpus"],
                             context=kvmem.parse_tokens(fit_kwargs["context"]), batch=batch,
                             weight_dtype=fit_kwargs["weight_dtype"], kv_dtype=fit_kwargs["kv_dtype"],
                             host_memory=host, options=fit_kwargs)
    except ValueError:
        return None
    return plan.decode_best


def mmproj_inputs(engine: str, fit_kwargs: dict) -> dict:
    """The multimodal projector, for an engine whose sizing takes one (its SizingRules.options name "mmproj"):
    its weight bytes and whether it is on the GPU; only what the user set is passed (sizing options of kvmem.fit)."""
    rules = kvmem.engines.engine_spec(engine).sizing
    if rules is None or "mmproj" not in rules.options or "mmproj" in fit_kwargs:
        return {}
    with st.expander("Multimodal projector (mmproj)"):
        mb = st.number_input("mmproj weights, MB (0: none)", 0, 1 << 20, 0, key="mmproj_mb",
                             help="The --mmproj GGUF's tensors (its 'load_hparams: model size'); its compute buffer "
                                  "is counted beside it where kvmem has the projector's graph (Gemma 3), else a "
                                  "note says it is not computed.")
        on_gpu = st.toggle("On the GPU (--mmproj-offload, the default)", value=True, key="mmproj_offload")
    if not mb:
        return {}
    return {"mmproj": mb * 1_000_000, **({} if on_gpu else {"mmproj_offload": False})}


# ---- host RAM as a budget (kvmem.host): the node's RAM and the tiers each engine keeps there

_GIB = 1 << 30


def host_inputs(engine: str, fit_kwargs: dict) -> dict:
    """The host-memory settings of the Fit page (kvmem.host): the node's RAM and the engine's host tier;
    only what the user set is passed (sizing options of kvmem.fit)."""
    out = {}
    with st.expander("Host RAM (offload tiers, checkpoints)"):
        gib = st.number_input("Host RAM per node, GiB (0: not checked)", 0, 1 << 20, 0, key="host_ram_gib",
                              help="A plan that pins or maps more host RAM than this does not fit (kvmem.host).")
        if gib and "host_memory_bytes" not in fit_kwargs:
            out["host_memory_bytes"] = gib * _GIB
        rules = kvmem.engines.engine_spec(engine).sizing
        shown = {}
        for item in (rules.host_inputs if rules else ()):      # the engine's own host settings (kvmem.host.HostInput)
            if item.under is not None and not shown.get(item.under):
                continue
            key = f"host_{item.option}"
            if item.kind == "toggle":
                value = st.toggle(item.label, key=key, help=item.help or None)
            elif item.kind == "int":
                value = int(st.number_input(item.label, 0, int(item.maximum), int(item.unset), key=key,
                                            help=item.help or None))
            else:
                value = st.number_input(item.label, 0.0, float(item.maximum), float(item.unset), key=key,
                                        help=item.help or None)
            shown[item.option] = value
            if value != item.unset:
                out[item.option] = value
    return out


def host_panel(result) -> None:
    """The host side of a fit (Fit.host): each term with its bytes per node, the tokens a tier holds and its
    source; the total against the node's RAM."""
    host = result.host
    if not host:
        return
    bound = host["host_memory_bytes"]
    st.subheader("Host RAM per node: " + kvmem.format_bytes(host["total_bytes"])
                 + (f" of {kvmem.format_bytes(bound)}" if bound is not None else " (not checked)"))
    st.dataframe([{"term": t["name"], "per node": kvmem.format_bytes(t["bytes_per_node"]),
                   "per rank": kvmem.format_bytes(t["bytes_per_rank"]),
                   "tokens held": "—" if t.get("tokens") is None else f"{t['tokens']:,}",
                   "counted": "yes" if t["binding"] else "no (its source says why)",
                   "source": t["source"]} for t in host["terms"]], hide_index=True)


# ---- mixed cards (a 3090 and a 4090, a 24 GB and a 12 GB card): kvmem fit --gpu A,B's record, drawn

MAX_CARDS = 8      # cards the app takes in its mixed-cards box (kvmem fit --gpu A,B,... takes any number)
CARDS_KEY = "cards"


def parse_cards(text) -> list[str]:
    """The mixed-cards box: two to MAX_CARDS GPU names (kvmem.get_gpu: a catalog name, an alias such as rtx-3090
    or a custom spec), comma-separated, in CUDA order; empty: none (the sidebar's GPU x GPUs)."""
    text = str(text).strip()
    if not text:
        return []
    if len(text) > 40 * MAX_CARDS:
        raise ValueError(f"{len(text):,} characters is not a list of at most {MAX_CARDS} GPU names")
    cards = [card.strip() for card in text.split(",")]
    if len(cards) > MAX_CARDS:
        raise ValueError(f"{len(cards)} cards: the app takes at most {MAX_CARDS} (kvmem fit --gpu takes the list "
                         "whole)")
    if len(cards) < 2:
        raise ValueError(f"one card ({cards[0]}) is the sidebar's GPU: give two or more, comma-separated, or none")
    for i, card in enumerate(cards, 1):
        if not card:
            raise ValueError(f"card {i} is empty: one GPU name between each pair of commas")
        try:
            kvmem.get_gpu(card)
        except ValueError as exc:
            from ui.urlparams import nearest_choice
            near = nearest_choice(card, kvmem.list_gpus())
            named = card if len(card) <= 40 else card[:37] + "..."
            why = (str(exc) if card.lower().startswith("custom:") else
                   "not a GPU kvmem knows; " + (f"nearest: {near}" if near else "the sidebar's GPU list names them "
                                                "all, or give a custom spec such as custom:24GiB:936GB/s"))
            raise ValueError(f"card {i}, {named!r}: {why}") from None
    return cards


def cards_input(engine: str) -> list[str]:
    """The Fit page's mixed-cards box, for an engine that places layers on unequal cards (EngineSpec.panels
    "offload"); for the others, one line on why they take one kind of card. A bad list stops the page, named."""
    from kvmem.engines import ENGINES
    from ui import urlparams
    if "offload" not in ENGINES[engine].panels:
        placing = " and ".join(spec.name for spec in ENGINES.values() if "offload" in spec.panels)
        # vllm@v0.33.0 vllm/v1/core/kv_cache_planning.py#L1580-L1595 (every rank re-planned at min_num_blocks);
        # sglang@v0.5.23 python/sglang/srt/utils/common.py#L427-L433 get_available_gpu_memory (distributed: the minimum)
        why = (f"mixed cards (a 3090 beside a 4090) are {placing}'s: it splits the layers over unequal cards. "
               f"{ENGINES[engine].name} is sized on one kind of card: tensor parallelism gives each card an equal "
               "share of every layer, and vLLM and SGLang size every rank's KV cache by the smallest rank's")
        linked, held = urlparams.link_value(CARDS_KEY), st.session_state.get(CARDS_KEY)
        if linked:      # a link's cards for an engine that takes one kind: refused by name, not dropped silently
            urlparams.refuse(CARDS_KEY, linked, f"mixed cards are {placing}'s; engine {ENGINES[engine].name} takes "
                                                "one kind of card (GPU x GPUs in the sidebar)")
        elif held:      # typed under another engine: said where the box was
            shown = held if len(str(held)) <= 80 else str(held)[:77] + "..."
            st.info(f"Mixed cards {shown} not used: {why}.")
            return []
        st.caption(why[0].upper() + why[1:] + ".")
        return []
    urlparams.check_text(CARDS_KEY, parse_cards, max_chars=40 * MAX_CARDS)
    text = st.text_input("Mixed cards, in CUDA order", "", key=CARDS_KEY, bind="query-params",
                         placeholder="rtx-4090-24gb,rtx-3090-24gb (empty: the sidebar's GPU x GPUs)",
                         help=f"Two to {MAX_CARDS} GPUs, comma-separated, CUDA0 first, as kvmem fit --gpu A,B takes "
                              "them: the GPU list in the sidebar names each, or custom:24GiB:936GB/s. llama.cpp "
                              "splits the layers over them (--split-mode layer, -ts); the sidebar's GPU and GPUs are "
                              "then not used.")
    try:
        return parse_cards(text)
    except ValueError as exc:
        st.error(f"Mixed cards: {exc}")
        st.stop()


def _contradiction(work, cards: list[str], options: dict) -> str | None:
    """A sidebar input that the cards contradict, as kvmem fit --gpu A,B refuses its flags (cli.fit._mixed_flags):
    llama.cpp runs them as one replica split by layers (GPUs n, pp n, tp 1), and lays out its own bytes."""
    from kvmem.sizing.setup import Given
    n = len(cards)
    for label, value, fine in (("GPUs", work.num_gpus, (1, n)), ("Pipeline parallel", work.pp, (1, n)),
                               ("Tensor parallel", work.tp, (1,))):
        if value not in fine:
            return (f"{label} {value}: the {n} mixed cards run as one llama.cpp replica split by layers over the {n} "
                    f"(GPUs {n}, pipeline parallel {n}, tensor parallel 1); set {label} so in the sidebar, or clear "
                    "the mixed cards")
    given = Given.of(options)
    for label, value in (("Weights per device", work.weights_bytes), ("weights_bytes", given.weights_bytes),
                         ("activation_bytes", given.activation_bytes)):
        if value is not None:
            return (f"{label}: on mixed cards kvmem lays out llama.cpp's tensors and buffers itself (its placement "
                    "takes no byte counts); clear it, or clear the mixed cards for the sizing that takes it")
    return None


def mixed_panel(model, work, cards: list[str], options: dict) -> None:
    """kvmem fit --gpu A,B on the page (kvmem.engines.llamacpp.panel.mixed_cards, the record the CLI prints): the
    verdict's headline, the placement right under it (both commands), max batch and context, memory per device."""
    from kvmem.engines.llamacpp.panel import mixed_cards
    from ui import common
    why = _contradiction(work, cards, options)
    if why:
        st.error(why)
        st.stop()
    host = host_bandwidth_input()
    try:
        got = mixed_cards(model, cards, context=work.tokens, batch=work.batch, weight_dtype=work.weight_dtype,
                          kv_dtype=work.kv_dtype, host_memory=host, options=options)
    except ValueError as exc:
        st.error(f"Not placed: {exc}")
        st.stop()
    st.subheader(f"{common.plain(model.name)} on {' + '.join(got.gpus)} · {got.engine}: "
                 + ("fits with the placement below" if got.fits else "does not fit: no placement below runs"))
    draw_plan(got.plan)
    if got.host_shortfall:
        st.error(got.host_shortfall)
    elif got.fits and got.host_bytes and not got.host_checked:
        st.info(f"It runs if the host has {kvmem.format_bytes(got.host_bytes)} of free RAM for it (not checked: "
                "Host RAM per node, under Host RAM, checks it).")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Max batch", f"{got.max_batch:,}", help=f"sequences of {got.context:,} tokens that kvmem's placement's "
              "flags hold")
    m2.metric("Max context", f"{got.max_context:,}", help=f"tokens per sequence at batch {got.batch or 1} that its "
              "flags hold (llama.cpp pads each sequence's cells to 256)")
    m3.metric("In host RAM", kvmem.format_bytes(got.host_bytes), help="kvmem's placement's tensors and buffers there")
    speed = got.plan.decode_best if got.plan.best is not None else None
    m4.metric(f"Decode bound at batch {got.batch or 1}", "—" if speed is None else f"{speed:,.1f} tok/s",
              help=f"per sequence: each device's bytes read per step over its bandwidth, host RAM at {host}")
    _device_bars(got.to_dict())
    if got.plan.best is not None:
        decode_steps(model, list(got.gpus), {"context": got.context, "batch": got.batch,
                                             "weight_dtype": work.weight_dtype, "kv_dtype": work.kv_dtype,
                                             **options}, host)
    own_flags_panel(model, list(got.gpus), context=work.tokens, batch=work.batch, weight_dtype=work.weight_dtype,
                    kv_dtype=work.kv_dtype, host=host, options=options)


def _device_bars(record: dict) -> None:
    """kvmem's placement per device, the parts of each device's total (layouts.Layout.total_bytes): the weights
    resident there (on the host, its own tensors: the mmap span llama.cpp prints as CPU_Mapped also covers GPU
    tensors, read once at load), KV, compute buffers and the rest (the CUDA context, a projector); as bars against
    the card's memory and as a table."""
    best = record.get("best")
    if not best:
        return
    budgets = record["budgets"]
    rows = []
    for d in best["devices"]:
        weights = d["model_bytes"] if d["device"] in budgets else sum(d["group_bytes"].values())
        rows.append({"device": d["device"], "layers": len(d["layers"]), "weights": weights, "KV": d["kv_bytes"],
                     "compute": d["compute_bytes"],
                     "other": d["total_bytes"] - weights - d["kv_bytes"] - d["compute_bytes"],
                     "total": d["total_bytes"], "memory": budgets.get(d["device"])})
    parts = ["weights", "KV", "compute", "other"]
    st.bar_chart({"device": [r["device"] for r in rows], **{part: [r[part] / _GIB for r in rows] for part in parts}},
                 x="device", y=parts, horizontal=True, stack=True, sort=False, x_label="", y_label="GiB (2^30 bytes)",
                 height=80 + 40 * len(rows))
    st.dataframe([{**{k: v for k, v in r.items() if k not in (*parts, "total", "memory")},
                   **{k: kvmem.format_bytes(r[k]) for k in (*parts, "total")},
                   "memory": "host RAM" if r["memory"] is None else kvmem.format_bytes(r["memory"])} for r in rows],
                 hide_index=True)
    st.caption("other: the CUDA context on each GPU, a multimodal projector where it sits. Host weights: the tensors "
               "kept there; llama.cpp's CPU_Mapped line prints the mapped span that holds them, with any GPU tensors "
               "between them.")


OWN_FLAGS_KEY = "llama_args"


def own_flags_panel(model, gpus: list, *, context: int, batch, weight_dtype, kv_dtype, host, options: dict) -> None:
    """"Your llama-server flags": kvmem fit --llama-args's record (kvmem.engines.llamacpp.own_flags) for the flags
    typed here, on the page's cards and workload: the verdict, each device against its memory, the largest batch
    and context they hold, what kvmem and --fit on would do instead and the lines llama.cpp would print. The text
    is bounded (MAX_ARGS_CHARS), read as check-log reads a command, never run, and shown back shell-quoted."""
    from kvmem.engines.llamacpp.own_flags import MAX_ARGS_CHARS, own_flags
    st.markdown("##### Your llama-server flags")
    text = st.text_input("Your llama-server flags", "", key=OWN_FLAGS_KEY, max_chars=MAX_ARGS_CHARS,
                         placeholder="-ngl 99 -ts 3,1 --n-cpu-moe 30", label_visibility="collapsed",
                         help="The placement flags of YOUR llama-server command (-ngl, -ts, -ot, --cpu-moe, "
                              "--n-cpu-moe, -c, -np, -ctk/-ctv, -fa, -ub, -b, -kvu, -nkvo, -lm, --fit), as "
                              "kvmem fit --llama-args takes them: whether they fit these cards at this workload. "
                              "Read, never run.")
    if not text.strip():
        return
    try:
        got = own_flags(model, gpus, llama_args=text, context=context, batch=batch, weight_dtype=weight_dtype,
                        kv_dtype=kv_dtype, host_memory=host, options=options)
    except ValueError as exc:
        st.error(f"Your flags: {exc}")
        return
    head, *rest = got.lines()
    (st.success if got.fits else st.error)(head[0].upper() + head[1:])
    st.code(got.given or "(no flags)", language="bash")
    st.dataframe([{"device": d["device"], "weights": kvmem.format_bytes(d["model_bytes"]),
                   "KV": kvmem.format_bytes(d["kv_bytes"]),
                   "compute": kvmem.format_bytes(d["compute_bytes"]) + ("" if d["compute_exact"] else " (estimate)"),
                   "total": kvmem.format_bytes(d["total_bytes"]),
                   "memory": "not given" if d["memory_bytes"] is None else kvmem.format_bytes(d["memory_bytes"]),
                   "holds it": "—" if d["memory_bytes"] is None else ("yes" if d["fits"] else "NO")}
                  for d in got.devices], hide_index=True)
    from kvmem.engines.llamacpp.server_slots import raised_words
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Your -c / -np: sequences at once", f"{got.pool_sequences:,}",
              help=f"sequences of {got.context:,} tokens the flags' own -c and -np hold")
    c2.metric("Your -c / -np: longest sequence", f"{got.slot_context:,}", help="tokens one slot gets")
    c3.metric("Max batch", f"{got.max_batch:,}", help=f"sequences of {got.context:,} tokens this placement holds, "
              + raised_words(got, "max_batch"))
    c4.metric("Max context", f"{got.max_context:,}", help=f"tokens a sequence at batch {got.batch} this placement "
              "holds, " + raised_words(got, "max_context"))
    st.code("\n".join(line.strip() for line in rest if line.strip().startswith(("instead", "sized as"))),
            language="text")
    st.code("\n".join(got.log_lines), language="text")
    if got.notes:
        st.caption(" ".join(got.notes))
