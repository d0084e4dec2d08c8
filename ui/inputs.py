"""Shared inputs for every page: the model (six ways), the workload, the engine and its options.

One ``Workload`` carries every sidebar input, engine options included, to every page's library
call (``work.estimate()``, ``work.fit()``, ``work.engine_kwargs()``), so no page can forget one.
app.py builds the sidebar once per run, before the page, so its widgets belong to the main
script: their values and their URL parameters survive page switches, and Back/Forward restore
them (Streamlit's ``bind="query-params"``). Every URL parameter is checked before its widget
reads it (ui/urlparams.py). The model comes from ui/model_input.py, the engine's options from
ui/engine_options.py; this module holds the workload and builds the sidebar.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

import kvmem
from kvmem import defaults
from kvmem.dtypes import kv_pair
from kvmem.engines import ENGINES
from kvmem.units import MAX_COUNT, require_positive_int
from kvmem.weights import weight_formats
from ui import urlparams
from ui.engine_options import defaults_in_force, engine_options, option_key
from ui.model_input import MAX_CONFIG_BYTES, model_input  # noqa: F401  (ui.inputs.MAX_CONFIG_BYTES: the README's limit)
from ui.widgets import (MAX_TOKENS, multiselect, number, parse_bytes_input, parse_tokens,  # noqa: F401
                        parse_tokens_input, radio, select, slider)

DEFAULT_GPU = "h100-sxm-80gb"
MAX_BATCH = 10**6    # sequences the app takes (a link's batch too); the library and the CLI take up to MAX_COUNT
KV_DTYPES = ["auto", "bf16", "fp16", "fp32", "fp8", "fp8_e5m2", "int8", "int4", "int2", "nvfp4", "mxfp4",
             "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"]
# The sidebar's inputs, as a page names them when one does not apply to it.
LABELS = {"model": "model", "tokens": "tokens", "batch": "batch", "kv_dtype": "KV dtype", "engine": "engine",
          "options": "engine options", "tp": "tensor parallel", "pp": "pipeline parallel", "gpu": "GPU",
          "num_gpus": "GPUs", "weight_dtype": "weight format", "weights_bytes": "weights per device"}
_BUILT = "_kvmem_sidebar"


@dataclass(frozen=True)
class Workload:
    """Every sidebar input; pages pass all of it to the library through the methods below."""

    model: kvmem.Model
    tokens: int
    batch: int
    kv_dtype: str
    engine: str
    tp: int
    pp: int
    options: dict = field(default_factory=dict)
    gpu: str = DEFAULT_GPU
    num_gpus: int = 1
    weight_dtype: str = "auto"
    weights_bytes: int | None = None     # given per device, replacing the checkpoint's headers or the formula

    def engine_kwargs(self, **changes) -> dict:
        """engine, kv_dtype, tp, pp and the engine's options, as kvmem.estimate takes them."""
        return {**dict(engine=self.engine, kv_dtype=self.kv_dtype, tp=self.tp, pp=self.pp, **self.options),
                **changes}

    def estimate(self, **changes):
        return kvmem.estimate(self.model, **self.engine_kwargs(tokens=self.tokens, batch=self.batch, **changes))

    def fit_kwargs(self, **changes) -> dict:
        """kvmem.fit's arguments: tp=None (search) at tp 1, the sidebar's GPU, weights and options."""
        args = self.engine_kwargs(context=self.tokens, batch=self.batch, weight_dtype=self.weight_dtype,
                                  gpu=self.gpu, num_gpus=self.num_gpus)
        args["tp"] = self.tp if self.tp > 1 else None
        if self.weights_bytes is not None:
            args["weights_bytes"] = self.weights_bytes
        return {**args, **changes}

    def fit(self, **changes):
        return kvmem.fit(self.model, **self.fit_kwargs(**changes))


def kv_types(result) -> tuple[str, str]:
    """The effective K and V element formats of an Estimate ("q8_0/f16" -> ("q8_0", "f16"))."""
    return kv_pair(result.kv_dtype)


def kv_type_text(result) -> str:
    k, v = kv_types(result)
    return k if k == v else f"K {k}, V {v}"


def not_used(*names: str, why: str = "", where: str = "page") -> None:
    """Say which sidebar inputs this page (or tab) does not use, and why, so no input is silently ignored."""
    labels = ", ".join(LABELS[n] for n in names)
    st.caption(f"Not used on this {where}: {labels}" + (f" ({why})." if why else "."))


# ----------------------------------------------------------------------------- the workload

def weights_or_none(text: str) -> int | None:
    """The "Weights per device" box: empty is None (the checkpoint's headers or the formula), else bytes."""
    return None if not str(text).strip() else kvmem.parse_bytes(text)


def workload_input(model: kvmem.Model | None, container=st.sidebar) -> Workload:
    """Tokens, batch, KV dtype, engine (with its options), parallelism and hardware from the sidebar."""
    c1, c2 = container.columns(2)
    urlparams.check_text("tokens", parse_tokens)
    tokens_text = c1.text_input("Tokens per sequence", "8k", key="tokens", bind="query-params",
                                help='Context held per sequence: 4096, "32k", "128k" (k = 1024), "1M".')
    batch = number(c2, "Batch", 1, MAX_BATCH, 1, key="batch", help=f"Sequences held at once (1 to {MAX_BATCH:,}).",
                   typed_low=-MAX_COUNT, typed_high=MAX_COUNT)   # any typed value reaches the check below
    kv_dtype = select(c1, "KV dtype", KV_DTYPES, default=defaults.KV_DTYPE, key="kv_dtype",
                      help="Element format of the cache; auto = the model's dtype. Engine options "
                           "(llama.cpp type k / type v) override it; the pages show the type in force.")
    engines = list(ENGINES)
    engine = select(c2, "Engine", engines, default=defaults.ENGINE, key="engine",
                    help="Whose allocation rules: ideal = every cached element once.")
    tp = number(c1, "Tensor parallel", 1, 1024, 1, key="tp", help="tp: splits KV heads", typed_low=0)
    pp = number(c2, "Pipeline parallel", 1, 1024, 1, key="pp", help="pp: splits layers", typed_low=0)
    gpu = select(container, "GPU", kvmem.list_gpus(), default=DEFAULT_GPU, key="gpu",  # full width: names uncut
                 help="Accelerator for weights + KV against memory (memory as the device reports it).")
    num_gpus = number(container, "GPUs", 1, 1024, 1, key="num_gpus", typed_low=0,
                      help="GPUs available; tp x pp of them hold one copy of the model.")
    weight_dtype = select(container, "Weight format", ["auto", *weight_formats()], key="weight_dtype",
                          help="How the weights are stored: auto = the checkpoint's own format.")
    urlparams.check_text("weights", weights_or_none)
    weights_text = container.text_input(
        "Weights per device", "", key="weights", bind="query-params", placeholder="from the checkpoint",
        help='Leave empty to size the weights from the checkpoint\'s headers or its parameter count; give bytes '
             '("62GB", "57.7GiB") where kvmem cannot (a config without a parameter count) or you measured them.')
    options = engine_options(engine, container,
                             in_force=lambda given: defaults_in_force(engine, gpu, tokens_text, tp, pp, given))
    try:  # read after every widget is drawn, so that a bad value leaves the rest of the sidebar in place
        tokens = parse_tokens(tokens_text)
    except ValueError as exc:
        raise ValueError(f"Tokens per sequence: {exc}") from None
    try:
        weights_bytes = weights_or_none(weights_text)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"Weights per device: {exc}") from None
    for label, name, value in (("Batch", "batch", batch), ("Tensor parallel", "tp", tp),
                               ("Pipeline parallel", "pp", pp), ("GPUs", "num_gpus", num_gpus)):
        try:
            require_positive_int(name, value)
        except ValueError as exc:
            raise ValueError(f"{label}: {exc}") from None
    if batch > MAX_BATCH:
        raise ValueError(f"Batch: at most {MAX_BATCH:,} sequences in the app, got {batch:,} (kvmem fit --batch takes "
                         f"up to {MAX_COUNT:,})")
    return Workload(model=model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, engine=engine, tp=tp, pp=pp,
                    options=options, gpu=gpu, num_gpus=num_gpus, weight_dtype=weight_dtype,
                    weights_bytes=weights_bytes)


def build_sidebar() -> Workload | str:
    """Draw the shared sidebar (app.py calls this before the page) and keep its Workload for the page;
    returns it too (or the message naming an invalid input)."""
    built = st.session_state[_BUILT] = _build()
    return built


def _build() -> Workload | str:
    """The Workload, or the message naming the input that is invalid. Every widget is drawn
    either way, so that one bad input does not lose the others' values."""
    st.sidebar.header("Model")
    try:
        model, model_error = model_input(), None
    except (ValueError, OverflowError) as exc:
        model, model_error = None, str(exc)
    st.sidebar.header("Workload")
    try:
        work = workload_input(model)
    except (ValueError, OverflowError) as exc:
        return model_error or str(exc)
    if model_error:
        return model_error
    _refuse_link_options(work)
    return work


def _refuse_link_options(work: Workload) -> None:
    """An engine option a link set and the engine refuses (``opt_vllm_block_size=-1``) is refused
    as a link parameter by name, and the page reruns with the engine's default, as for any other
    bad link parameter; an option the user typed keeps its message on the page."""
    linked = {name: option_key(work.engine, name) for name in work.options
              if urlparams.from_link(option_key(work.engine, name))}
    if not linked:
        return
    try:
        work.estimate()
    except (ValueError, OverflowError) as exc:
        import re

        named = [name for name in linked if re.search(rf"\b{name}\b", str(exc))]
        if named:
            key = linked[named[0]]
            urlparams.refuse(key, st.query_params.get(key, ""), str(exc))
            del st.session_state[key]  # the box takes the engine's default on the rerun
            st.rerun()


def sidebar() -> Workload:
    """The shared sidebar's Workload (built by app.py, or here when a page runs alone); an invalid
    input stops the page with a message naming it."""
    built = st.session_state.pop(_BUILT, None)
    if built is None:
        built = _build()
        urlparams.show_refusals()
    if isinstance(built, str):
        st.error(built)
        st.stop()
    return built
