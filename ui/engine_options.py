"""The sidebar's engine options: one box per option of the engine chosen, bound to the URL, showing
the value in force on the device where it depends on it; only the options the user changed
are passed to the library. Each box, its URL parameter and its help follow the engine's own
declaration (EngineSpec.option_specs, kvmem.engines.declared): this module names no engine."""

from __future__ import annotations

import json

import streamlit as st

import kvmem
from kvmem.engines import ENGINES
from ui import urlparams
from ui.widgets import number, parse_tokens, select

ENGINE_DEFAULT = "(engine default)"


def takes_utilization(engine: str) -> bool:
    """The engine budgets a share of the device's memory by gpu_memory_utilization (its SizingRules say so)."""
    rules = ENGINES[engine].sizing
    return bool(rules and rules.takes_utilization)


def option_key(engine: str, name: str) -> str:
    return f"opt_{engine}_{name}".replace(".", "_").replace("-", "_")


def _follow_default(key: str, shown_default) -> None:
    """Let a box whose default depends on the device follow it: when the device default moves
    (A100 -> H100) and the box still holds the old one, it takes the new one. A value the user
    typed stays. (A keyed widget keeps its value when only its default changes.)"""
    memo = f"_default_{key}"
    previous = st.session_state.get(memo)
    if previous is not None and previous != shown_default and st.session_state.get(key) == previous:
        st.session_state[key] = shown_default
    st.session_state[memo] = shown_default


def _option_widget(container, engine: str, option, shown_default):
    """One engine option (a kvmem.engines.declared.Option), bound to the URL. ``shown_default`` is
    the value in force on this device, which the box shows. Returns the value to pass
    (``shown_default`` = not passed)."""
    name, default, choices = option.name, option.default, option.choices
    key = option_key(engine, name)
    label = name.replace("_", " ")
    help_text = f"{engine} option `{name}`" + (f": {option.help}" if option.help else "")
    if option.kind == "choice":
        options = [ENGINE_DEFAULT if default is None else default,
                   *[c for c in choices if c != default]]
        shown = [str(o) for o in options]
        picked = select(container, label, shown, key=key, help=help_text + "; (engine default) = not passed")
        value = options[shown.index(picked)]
        return default if value == ENGINE_DEFAULT else value
    if option.kind == "bool":
        urlparams.check_choice(key, ["true", "false", "True", "False"])
        _follow_default(key, shown_default)
        return container.checkbox(label, value=shown_default, key=key, bind="query-params", help=help_text)
    if option.kind == "int":
        _follow_default(key, shown_default)
        return number(container, label, 0, 10**9, shown_default, key=key, help=help_text, step=1)
    if option.kind == "float":
        _follow_default(key, shown_default)
        return float(number(container, label, 0.0, 1e9, shown_default, key=key, help=help_text))
    urlparams.check_text(key, str)
    text = container.text_input(label, value="" if default is None else str(default), key=key,
                                bind="query-params", help=help_text + "; empty = engine default",
                                placeholder="engine default")
    if not text.strip():
        return default
    if option.kind == "model":
        return kvmem.get_model(text.strip())
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text.strip()


def defaults_in_force(engine: str, gpu: str, tokens_text: str, tp: int, pp: int, options: dict):
    """The engine's device-dependent defaults on ``gpu`` (kvmem.sizing.engine_defaults, where the
    library has it), or None."""
    from kvmem import sizing

    hook = getattr(sizing, "engine_defaults", None)
    if hook is None:
        return None
    try:
        return hook(engine, gpu, context=parse_tokens(tokens_text), tp=tp, pp=pp, **options)
    except (ValueError, TypeError, OverflowError):
        return None


def engine_options(engine: str, container=st.sidebar, *, in_force=None) -> dict:
    """The options the user changed from the values in force (only those are passed).

    ``in_force(options)``: an EngineDefaults (the device-dependent values in force on this
    device, and why), or None. An option whose default depends on the device shows the value in
    force in its box (vLLM's max_num_batched_tokens: 2048 on an A100, 8192 on an H100), and the
    top of the panel names every such value and why (max_num_seqs has no box of its own).
    """
    options = {}
    spec = ENGINES[engine]
    if not spec.options:
        return options
    device = dict(getattr(in_force({}) if in_force else None, "values", None) or {})
    with container.expander(f"{engine} options"):
        slot = st.empty()
        for option in spec.option_specs():
            shown_default = device.get(option.name, option.default)
            value = _option_widget(st, engine, option, shown_default)
            if value != shown_default:
                options[option.name] = value
    forced = in_force(options) if in_force and device else None
    values = dict(getattr(forced, "values", None) or {})
    if values:
        shown = ", ".join(f"{k} = {v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{k} = {v}"
                          for k, v in values.items())
        slot.caption(f"In force here: {shown} ({getattr(forced, 'reason', '')}).")
    return options
