"""The Fit page's llama.cpp offload panel, drawn right under the verdict (which is its placement's:
kvmem.engines.llamacpp.verdict): the flags that keep the most on the GPUs, --fit on's, the memory
per device and on the host, the decode bound and both llama-server commands.

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
    presets = list(host_memory_presets())
    host = st.selectbox("Host RAM bandwidth", presets, index=presets.index("ddr5-5600-2ch"), key="offload_host",
                        help="For the decode bound: bytes read per token from host RAM over this bandwidth "
                             "(kvmem/data/host_memory.json, each with its source).")
    try:
        plan = panel_offload(model, gpus=[fit_kwargs["gpu"]] * fit_kwargs["num_gpus"],
                             context=kvmem.parse_tokens(fit_kwargs["context"]), batch=fit_kwargs.get("batch"),
                             weight_dtype=fit_kwargs["weight_dtype"], kv_dtype=fit_kwargs["kv_dtype"],
                             host_memory=host, options=fit_kwargs)
    except ValueError as exc:
        st.info(f"Not placed: {exc}")
        return None
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
    with st.expander("Decode bound at each step of offload"):
        rows = panel_decode_curve(model, gpus=[fit_kwargs["gpu"]] * fit_kwargs["num_gpus"],
                                  context=kvmem.parse_tokens(fit_kwargs["context"]), batch=fit_kwargs.get("batch"),
                                  weight_dtype=fit_kwargs["weight_dtype"], kv_dtype=fit_kwargs["kv_dtype"],
                                  host_memory=host, options=fit_kwargs)
        st.dataframe([{"flag": f"{r.flag} {r.value}", "fits": r.fits,
                       "tokens/s (bound)": "—" if r.tokens_per_s is None else f"{r.tokens_per_s:,.1f}",
                       **{device: kvmem.format_bytes(n) for device, n in r.total_bytes.items()}} for r in rows],
                     hide_index=True)
    return host


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
