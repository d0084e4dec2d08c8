"""Shared inputs for every page: the model (six ways), the workload, the engine and its options.

One ``Workload`` carries every sidebar input, engine options included, to every page's library
call (``work.estimate()``, ``work.fit()``, ``work.engine_kwargs()``), so no page can forget one.
app.py builds the sidebar once per run, before the page, so its widgets belong to the main
script: their values and their URL parameters survive page switches, and Back/Forward restore
them (Streamlit's ``bind="query-params"``). Every URL parameter is checked before its widget
reads it (ui/urlparams.py). Nothing a user uploads or pastes is executed: it is parsed as JSON
only, size-limited, and its text is shown as plain text.
A Hugging Face id is resolved by kvmem (HF cache, else the Hub: config.json only); a GGUF upload
is read for its header only (kvmem.sources.gguf).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import streamlit as st

import kvmem
from kvmem import defaults
from kvmem.configs import custom_config, load_config
from kvmem.engines import ENGINES, llamacpp
from kvmem.units import require_positive_int
from kvmem.weights import weight_formats
from ui import urlparams
from ui.widgets import (MAX_TOKENS, multiselect, number, parse_bytes_input, parse_tokens,  # noqa: F401
                        parse_tokens_input, radio, select, slider)

MAX_CONFIG_BYTES = 1_000_000
MAX_GGUF_HEADER_MB = 64
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_GPU = "h100-sxm-80gb"
KV_DTYPES = ["auto", "bf16", "fp16", "fp32", "fp8", "fp8_e5m2", "int8", "int4", "int2", "nvfp4", "mxfp4",
             "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"]
SOURCES = ["Preset", "Hugging Face id", "Upload config.json", "Upload GGUF", "Paste JSON", "Custom fields"]
ENGINE_DEFAULT = "(engine default)"
# Options with a fixed set of values, as each engine's module accepts them.
OPTION_CHOICES = {
    ("llama.cpp", "type_k"): llamacpp.CACHE_TYPES,          # common/arg.cpp kv_cache_types
    ("llama.cpp", "type_v"): llamacpp.CACHE_TYPES,
    ("llama.cpp", "flash_attn"): ("on", "off", "auto"),      # -fa on|off|auto
    ("llama.cpp", "mla"): llamacpp.MLA_MODES,
    ("hf-quantized", "backend"): ("quanto", "hqq", "fp8"),
    ("hf-quantized", "nbits"): (1, 2, 3, 4, 8),
    ("vllm", "mamba_cache_mode"): ("none", "align", "all"),
    ("trtllm", "block_rounding"): ("ceil", "floor"),
}
# The sidebar's inputs, as a page names them when one does not apply to it.
LABELS = {"model": "model", "tokens": "tokens", "batch": "batch", "kv_dtype": "KV dtype", "engine": "engine",
          "options": "engine options", "tp": "tensor parallel", "pp": "pipeline parallel", "gpu": "GPU",
          "num_gpus": "GPUs", "weight_dtype": "weight format"}
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
        return {**args, **changes}

    def fit(self, **changes):
        return kvmem.fit(self.model, **self.fit_kwargs(**changes))


def kv_types(result) -> tuple[str, str]:
    """The effective K and V element formats of an Estimate ("q8_0/f16" -> ("q8_0", "f16"))."""
    parts = str(result.kv_dtype).split("/")
    return parts[0], parts[-1]


def kv_type_text(result) -> str:
    k, v = kv_types(result)
    return k if k == v else f"K {k}, V {v}"


def not_used(*names: str, why: str = "", where: str = "page") -> None:
    """Say which sidebar inputs this page (or tab) does not use, and why, so no input is silently ignored."""
    labels = ", ".join(LABELS[n] for n in names)
    st.caption(f"Not used on this {where}: {labels}" + (f" ({why})." if why else "."))


# ----------------------------------------------------------------------------- the model

def _from_text(text: str, what: str, container=st.sidebar) -> kvmem.Model:
    """A config from text; fields without their braces are read as an object ("model_type": ...).
    An error's line and column are those of the text as given (the braces added are not counted)."""
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise ValueError(f"{what} is larger than {MAX_CONFIG_BYTES:,} bytes; a config.json is a few KB")
    bare = not text.lstrip().startswith(("{", "["))
    try:
        cfg = load_config("{\n" + text + "\n}" if bare else text)  # the braces on lines of their own
    except ValueError as exc:
        if not bare:
            raise
        raise ValueError(_user_position(str(exc), text)) from None
    model = kvmem.Model.from_hf_config(cfg, name=str(cfg.get("_name_or_path") or what))
    _defaults_note(container, model)
    return model


def _user_position(message: str, text: str) -> str:
    """A JSON error message about "{\n" + text + "\n}" told in ``text``'s own lines: the line the
    message names is one line further down in the wrapped text."""
    import re

    lines = text.split("\n")

    def own(match):
        wrapped = int(match.group(1))
        if wrapped == 1:
            return "before the first line of the text (read as a JSON object)"
        if wrapped - 1 > len(lines):
            return "after the last line of the text (read as a JSON object)"
        return f"line {wrapped - 1} column {match.group(2)}"

    return re.sub(r"line (\d+) column (\d+)", own, message)


def _defaults_note(container, model: kvmem.Model) -> None:
    """Say which fields a config left out and transformers' defaults filled in (Model.reading)."""
    reading = model.reading
    if reading is not None and reading.from_defaults:
        container.warning("Not in this config, taken from transformers' defaults for "
                          f"{reading.model_type}: " + ", ".join(f"{name} = {value!r}"
                                                                for name, value in reading.from_defaults)
                          + ". Add them to the config if the model differs.", icon=":material/rule:")


def model_input(container=st.sidebar) -> kvmem.Model:
    """The model chosen in the sidebar; raises ValueError with a message naming the problem."""
    source = radio(container, "Model from", SOURCES, key="source", horizontal=True,
                   help="A preset (real config.json files), your own config.json, or a few fields.")
    if source == "Preset":
        name = select(container, "Model preset", kvmem.list_models(), default=DEFAULT_MODEL, key="model",
                      help="Type to search. Presets are real config.json files with their sources.")
        return kvmem.get_model(name)
    if source == "Hugging Face id":
        repo_id = container.text_input("Hugging Face id", key="hf_id", bind="query-params", placeholder="Qwen/Qwen3-4B",
                                       help="org/name: read from your Hugging Face cache, else the Hub (config.json "
                                            "only; HF_TOKEN for gated models). Never weights, never code.")
        if not repo_id.strip():
            raise ValueError("type a Hugging Face id (org/name), or choose another model source")
        with st.spinner(f"Reading {repo_id.strip()} config.json…"):
            model = kvmem.get_model(repo_id.strip())
        with st.spinner("Reading its safetensors headers for the weight bytes…"):
            _weights_caption(container, model)
        return model
    if source == "Upload GGUF":
        upload = container.file_uploader("GGUF file (its header is enough)", type=["gguf"], key="gguf_upload",
                                         max_upload_size=MAX_GGUF_HEADER_MB,
                                         help="Only the header is read (metadata and tensor list; "
                                              f"{MAX_GGUF_HEADER_MB} "
                                              "MB max). Upload the first MBs of a big file, e.g. "
                                              "head -c 16M model.gguf > header.gguf.")
        if upload is None:
            raise ValueError("upload a .gguf file or its first MBs, or choose another model source")
        from kvmem.sources.gguf import model_from_gguf_bytes
        model = model_from_gguf_bytes(upload, name=upload.name)      # reads the header's bytes only
        container.caption(f"{upload.name}: the header only — metadata and {len(model.checkpoint.tensors):,} tensor "
                          "infos; tensor data is never read.")
        _weights_caption(container, model)
        return model
    if source == "Upload config.json":
        upload = container.file_uploader("config.json", type=["json"], key="upload",
                                         max_upload_size=1, help="Parsed as JSON only (1 MB max); never executed.")
        if upload is None:
            raise ValueError("upload a config.json, or choose another model source")
        return _from_text(upload.getvalue().decode("utf-8", errors="replace"), upload.name, container)
    if source == "Paste JSON":
        text = container.text_area("config.json contents", key="pasted", height=160,
                                   help="Paste a Hugging Face config.json; parsed as JSON only.")
        if not text.strip():
            raise ValueError("paste a config.json, or choose another model source")
        return _from_text(text, "pasted config", container)
    c1, c2 = container.columns(2)
    fields = dict(
        layers=number(c1, "Layers", 1, 1000, 32, key="c_layers", help="num_hidden_layers"),
        heads=number(c2, "Query heads", 1, 1024, 32, key="c_heads", help="num_attention_heads"),
        kv_heads=number(c1, "KV heads", 1, 1024, 8, key="c_kv_heads",
                        help="num_key_value_heads: = heads for MHA, 1 for MQA, between for GQA"),
        head_dim=number(c2, "Head dim", 1, 4096, 128, key="c_head_dim", help="head_dim"),
        sliding_window=number(c1, "Sliding window (0 = none)", 0, 10**7, 0, key="c_window",
                              help="sliding_window in tokens"),
        full_every=number(c2, "Every n-th layer full (0 = none)", 0, 1000, 0, key="c_full_every",
                          help="Gemma-3: 6 (5 sliding : 1 full)"),
        kv_lora_rank=number(c1, "MLA kv_lora_rank (0 = no MLA)", 0, 65536, 0, key="c_mla_rank",
                            help="DeepSeek-V3: 512"),
        qk_rope_head_dim=number(c2, "MLA qk_rope_head_dim", 0, 4096, 0, key="c_mla_rope", help="DeepSeek-V3: 64"),
    )
    try:
        return kvmem.Model.from_hf_config(custom_config(**fields), name="custom")
    except ValueError as exc:  # say it with the sidebar's own boxes, not config fields it has no box for
        raise ValueError(custom_fields_message(str(exc))) from None


CUSTOM_LABELS = {"num_attention_heads": "Query heads", "num_key_value_heads": "KV heads",
                 "num_hidden_layers": "Layers", "head_dim": "Head dim", "sliding_window": "Sliding window",
                 "kv_lora_rank": "MLA kv_lora_rank", "qk_rope_head_dim": "MLA qk_rope_head_dim"}


def custom_fields_message(message: str) -> str:
    """A config reader's message about a custom model, in the sidebar's labels."""
    import re

    named = [label for field_name, label in CUSTOM_LABELS.items() if re.search(rf"\b{field_name}\b", message)]
    boxes = f" Change {' / '.join(dict.fromkeys(named))} in the sidebar." if named else ""
    return f"Custom fields: {message}.{boxes}"


# ----------------------------------------------------------------------------- engine options

def option_key(engine: str, name: str) -> str:
    return f"opt_{engine}_{name}".replace(".", "_").replace("-", "_")


def _weights_caption(container, model: kvmem.Model) -> None:
    """Say where the weight bytes (weight format auto) come from: the headers, or the formula."""
    from kvmem.weights import weights
    try:
        used = weights(model)
    except ValueError as exc:
        container.caption(f"Weights: not counted ({exc})")
        return
    if used.source == "formula":
        why = next((n for n in used.notes if n.startswith("weights: formula")), "no headers read")
        container.caption(f"Weights (format auto): the formula estimate, {kvmem.format_bytes(used.total_bytes)} "
                          f"— {why}")
    else:
        container.caption(f"Weights (format auto): exact from the {used.source} headers, "
                          f"{kvmem.format_bytes(used.total_bytes)}")


def _follow_default(key: str, shown_default) -> None:
    """Let a box whose default depends on the device follow it: when the device default moves
    (A100 -> H100) and the box still holds the old one, it takes the new one. A value the user
    typed stays. (A keyed widget keeps its value when only its default changes.)"""
    memo = f"_default_{key}"
    previous = st.session_state.get(memo)
    if previous is not None and previous != shown_default and st.session_state.get(key) == previous:
        st.session_state[key] = shown_default
    st.session_state[memo] = shown_default


def _option_widget(container, engine: str, name: str, default, shown_default):
    """One engine option, bound to the URL. ``shown_default`` is the value in force on this device,
    which the box shows. Returns the value to pass (``shown_default`` = not passed)."""
    key = option_key(engine, name)
    label = name.replace("_", " ")
    help_text = f"{engine} option `{name}`"
    choices = OPTION_CHOICES.get((engine, name))
    if choices is not None:
        options = [ENGINE_DEFAULT if default is None else default,
                   *[c for c in choices if c != default]]
        shown = [str(o) for o in options]
        picked = select(container, label, shown, key=key, help=help_text + "; (engine default) = not passed")
        value = options[shown.index(picked)]
        return default if value == ENGINE_DEFAULT else value
    if isinstance(default, bool):
        urlparams.check_choice(key, ["true", "false", "True", "False"])
        _follow_default(key, shown_default)
        return container.checkbox(label, value=shown_default, key=key, bind="query-params", help=help_text)
    if isinstance(default, int):
        _follow_default(key, shown_default)
        return number(container, label, 0, 10**9, shown_default, key=key, help=help_text, step=1)
    if isinstance(default, float):
        _follow_default(key, shown_default)
        return float(number(container, label, 0.0, 1e9, shown_default, key=key, help=help_text))
    urlparams.check_text(key, str)
    text = container.text_input(label, value="" if default is None else str(default), key=key,
                                bind="query-params", help=help_text + "; empty = engine default",
                                placeholder="engine default")
    if not text.strip():
        return default
    if name == "draft":
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
        for name, default in spec.options.items():
            shown_default = device.get(name, default)
            value = _option_widget(st, engine, name, default, shown_default)
            if value != shown_default:
                options[name] = value
    forced = in_force(options) if in_force and device else None
    values = dict(getattr(forced, "values", None) or {})
    if values:
        shown = ", ".join(f"{k} = {v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{k} = {v}"
                          for k, v in values.items())
        slot.caption(f"In force here: {shown} ({getattr(forced, 'reason', '')}).")
    return options


# ----------------------------------------------------------------------------- the workload

def workload_input(model: kvmem.Model | None, container=st.sidebar) -> Workload:
    """Tokens, batch, KV dtype, engine (with its options), parallelism and hardware from the sidebar."""
    c1, c2 = container.columns(2)
    urlparams.check_text("tokens", parse_tokens)
    tokens_text = c1.text_input("Tokens per sequence", "8k", key="tokens", bind="query-params",
                                help='Context held per sequence: 4096, "32k", "128k" (k = 1024), "1M".')
    batch = number(c2, "Batch", 1, 10**6, 1, key="batch", help="Sequences held at once.", typed_low=0)
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
    options = engine_options(engine, container,
                             in_force=lambda given: defaults_in_force(engine, gpu, tokens_text, tp, pp, given))
    try:  # read after every widget is drawn, so that a bad value leaves the rest of the sidebar in place
        tokens = parse_tokens(tokens_text)
    except ValueError as exc:
        raise ValueError(f"Tokens per sequence: {exc}") from None
    for label, name, value in (("Batch", "batch", batch), ("Tensor parallel", "tp", tp),
                               ("Pipeline parallel", "pp", pp), ("GPUs", "num_gpus", num_gpus)):
        try:
            require_positive_int(name, value)
        except ValueError as exc:
            raise ValueError(f"{label}: {exc}") from None
    return Workload(model=model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, engine=engine, tp=tp, pp=pp,
                    options=options, gpu=gpu, num_gpus=num_gpus, weight_dtype=weight_dtype)


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
