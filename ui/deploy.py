"""The Fit page's Deploy panel: the launch command kvmem.plan writes for the sidebar's workload.

Thin: the target is a URL-bound radio (a shared link keeps it), the library writes the command and
the reasons, and this draws them (st.code has a copy button); a refusal is shown as the library says it.
"""

from __future__ import annotations

import shlex

import streamlit as st

import kvmem
import kvmem.disagg
from kvmem.engines import ENGINES
from kvmem.logcheck import readers
from ui import inputs

TARGETS = {"this exact workload": "workload", "largest batch": "max_batch", "largest context": "max_context"}
# The paste box's cap: a startup log's KV lines come in its first few hundred KB. The browser stops a paste
# there and Streamlit cuts any longer value to it (TextInputSerde), so a paste that fills the box is said to
# be cut; kvmem.check_log reads the rest in one pass per line (~0.3 s for 2 MB).
MAX_PASTE_CHARS = 2_000_000


def panel(model, fit_kwargs: dict, engine_options: dict, fit=None):
    """The command and the log box; returns the Plan (None without a command). ``fit``: the page's own
    kvmem.fit of the same inputs, whose shortfall the page shows: a refusal for that reason refers to it."""
    st.subheader("Deploy")
    plan = _command(model, fit_kwargs, fit)
    _log_box(model, fit_kwargs, engine_options, plan)
    _disaggregated(model, fit_kwargs)
    return plan


def _disaggregated(model, fit_kwargs: dict) -> None:
    """A prefill pool and a decode pool for a request rate (kvmem.disagg): GPUs per role, one GPU's memory per
    role drawn, and one command per role. The sidebar's context is prompt + output."""
    if not st.toggle("Disaggregate prefill and decode", key="deploy_disagg", bind="query-params",
                     help="Size a prefill pool and a decode pool apart (kvmem.disagg): the decode pool holds the "
                          "sequences decoding at once, the prefill pool the prompts in flight."):
        return
    context = fit_kwargs["context"]
    c1, c2, c3, c4 = st.columns(4)
    output = inputs.number(c1, "Output tokens", 1, max(context - 1, 1), min(1024, max(context // 4, 1)),
                           key="disagg_output", help="of the sidebar's context; the prompt is the rest")
    rate = inputs.number(c2, "Requests / s", 0.01, 100000.0, 10.0, key="disagg_rate", help="arrivals a second")
    prefill_gpus = inputs.number(c3, "GPUs a prefill instance", 1, 64, fit_kwargs.get("num_gpus") or 1,
                                 key="disagg_prefill_gpus", help="tensor-parallel GPUs of one prefill server")
    decode_gpus = inputs.number(c4, "GPUs a decode instance", 1, 64, fit_kwargs.get("num_gpus") or 1,
                                key="disagg_decode_gpus", help="tensor-parallel GPUs of one decode server")
    rest = {k: v for k, v in fit_kwargs.items() if k not in ("num_gpus", "tp", "pp", "context", "batch")}
    try:
        result = kvmem.disagg.disaggregate(model, prompt_tokens=context - output, output_tokens=output,
                                           request_rate=rate, prefill_gpus=prefill_gpus, decode_gpus=decode_gpus,
                                           **rest)
    except ValueError as exc:
        st.info(f"No disaggregated plan: {exc}")
        return
    st.caption(f"{result.gpus} GPUs: {result.prefill.instances} × {result.prefill.gpus_per_instance} prefill, "
               f"{result.decode.instances} × {result.decode.gpus_per_instance} decode "
               f"({result.decode.sequences_needed:,} sequences decoding at once).")
    gib = 1 << 30
    parts = ("weights_bytes", "kv_pool_bytes", "activations_bytes", "overhead_bytes")
    st.bar_chart({part.removesuffix("_bytes"): [getattr(role, part) / gib for role in (result.prefill, result.decode)]
                  for part in parts}, horizontal=True, y_label="GiB per GPU", x_label="")
    st.caption("Per GPU, GiB: prefill (first bar), decode (second).")
    for role in (result.prefill, result.decode):
        st.code(shlex.join(role.command) if role.command else f"({role.role}: no command)", language="bash")
        for note in role.notes:
            st.caption(note)
    for note in result.notes:
        st.caption(note)


def refusal_text(exc: ValueError, fit=None) -> str:
    """Why there is no command, said once: a workload that does not fit refers to the page's shortfall
    (the Fit of the same inputs), never a second one; any other refusal as the library says it."""
    refused = getattr(exc, "fit", None)
    if refused is not None and not refused.fits and fit is not None and not fit.fits:
        return "No command: the workload does not fit (the shortfall and what would fit are above)."
    reason = str(exc)
    return "No command: " + (reason[len("no command: "):] if reason.startswith("no command: ") else reason)


def _command(model, fit_kwargs: dict, fit=None):
    """The launch command and its reasons; the Plan, or None when there is none."""
    label = inputs.radio(st, "Plan for", list(TARGETS), key="deploy_target", horizontal=True,
                         help="The workload as given, the most sequences of this context, or the longest context "
                              "for this batch (kvmem.plan).")
    try:
        plan = kvmem.plan(model, target=TARGETS[label], **fit_kwargs)
    except ValueError as exc:   # PlanRefused, or an input the engine has no flag for
        st.info(refusal_text(exc, fit))
        return None
    st.caption(f"{plan.release}: {plan.batch:,} sequence(s) × {plan.context:,} tokens.")
    st.code(plan.command, language="bash")
    for name, text in plan.files.items():
        st.caption(f"Beside it, {name}:")
        st.code(text, language="yaml")
    width = max(len(f.shell) for f in plan.flags)         # quoted as in the command: no name is markdown here
    st.code("\n".join(f"{f.shell:<{width}}  # {f.reason}" for f in plan.flags), language="bash")
    numbers = plan.fit.engine_numbers
    if numbers is not None and numbers.lines:   # drawn once, from this plan's record, with the engine's numbers
        st.caption(f"What {numbers.engine} will print for this command is shown above, with its numbers.")
    return plan


def _source(source: str) -> str:
    """Where a setting the check ran under came from (kvmem.LogCheck.inputs), as the page says it: the
    sidebar's settings go in as check_log's fallback."""
    return "the engine's default" if source == "default" else source.replace("fallback", "the sidebar")


def _log_box(model, fit_kwargs: dict, engine_options: dict, plan) -> None:
    """Paste a startup log: kvmem.check_log reads it under the settings the log prints (the model it names,
    tp/pp, KV dtype, max length, block size, server_args, llama_context, ...); the sidebar's fill in only
    what the log does not print. The Deploy plan is not what the log is checked against: for an engine whose
    log states its KV budget (EngineSpec.logs_kv_budget) the plan's budget is shown beside it."""
    with st.expander(f"Check a startup log ({', '.join(readers())})"):
        text = st.text_area("Paste the server's startup log", key="deploy_log", height=160, max_chars=MAX_PASTE_CHARS,
                            help="Its lines are compared with kvmem's under the settings the log prints (the model "
                                 "it names, tp, pp, KV dtype, max length, block size, ...); the sidebar's fill in "
                                 f"what it does not print. At most {MAX_PASTE_CHARS:,} characters: the startup "
                                 "lines are enough. Nothing is stored or sent anywhere.")
        if len(text) >= MAX_PASTE_CHARS:
            st.warning(f"The paste reached the box's limit of {MAX_PASTE_CHARS:,} characters, so the rest was cut "
                       "off: lines after it are not checked. Paste the startup lines only, or run kvmem check-log on the file.")
        if not text.strip():
            return
        sidebar = {**engine_options, "model": model, "kv_dtype": fit_kwargs["kv_dtype"],
                   "tp": plan.fit.tp if plan else fit_kwargs.get("tp") or 1, "pp": fit_kwargs.get("pp", 1)}
        try:
            result = kvmem.check_log(text, fallback=sidebar)
        except ValueError as exc:
            st.error(f"The log could not be checked: {exc}")
            return
        if result.inputs:
            st.caption("Read under: " + "; ".join(
                f"{name} {getattr(value, 'name', value)} ({_source(source)})"
                for name, (value, source) in result.inputs.items()) + ".")
        for c in result.checks:
            if c.matches:
                st.success(f"Line {c.line}, {c.quantity}: matches ({c.logged}).")
            else:
                st.warning(f"Line {c.line}, {c.quantity}: logged {c.logged}, kvmem {c.kvmem}. {c.cause}.")
        budget = result.settings.get("available_kv_cache_memory_gib")
        if budget is not None and plan is not None and ENGINES[plan.engine].logs_kv_budget:
            st.caption(f"The Deploy plan budgets {plan.fit.kv_memory_bytes / (1 << 30):.2f} GiB of KV per GPU; this "
                       f"server had {budget:.2f} GiB (its profile run, weights and settings).")
        for note in result.notes:
            st.info(note)
