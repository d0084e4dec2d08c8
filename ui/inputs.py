"""Shared inputs for every page: the model (six ways), the workload, the engine and its options.

Widgets bind to URL query parameters (``bind="query-params"``), so a shared link reproduces
the view. Nothing a user uploads or pastes is executed: it is parsed as JSON only, size-limited.
A Hugging Face id is resolved by kvmem (HF cache, else the Hub: config.json only); a GGUF upload
is read for its header only (kvmem.sources.gguf).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import streamlit as st

import kvmem
from kvmem.configs import custom_config, load_config
from kvmem.engines import ENGINES
from kvmem.weights import weight_formats

MAX_CONFIG_BYTES = 1_000_000
MAX_GGUF_HEADER_MB = 64
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_GPU = "h100-sxm-80gb"
KV_DTYPES = ["auto", "bf16", "fp16", "fp32", "fp8", "fp8_e5m2", "int8", "int4", "int2", "nvfp4", "mxfp4",
             "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"]
SOURCES = ["Preset", "Hugging Face id", "Upload config.json", "Upload GGUF", "Paste JSON", "Custom fields"]


@dataclass(frozen=True)
class Workload:
    model: kvmem.Model
    tokens: int
    batch: int
    kv_dtype: str
    engine: str
    tp: int
    pp: int
    options: dict = field(default_factory=dict)
    gpu: str = "h100-sxm-80gb"
    num_gpus: int = 1
    weight_dtype: str = "auto"

    def estimate(self, **changes):
        args = dict(engine=self.engine, tokens=self.tokens, batch=self.batch, kv_dtype=self.kv_dtype,
                    tp=self.tp, pp=self.pp, **self.options)
        args.update(changes)
        return kvmem.estimate(self.model, **args)


def _from_text(text: str, what: str) -> kvmem.Model:
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise ValueError(f"{what} is larger than {MAX_CONFIG_BYTES:,} bytes; a config.json is a few KB")
    cfg = load_config(text if text.lstrip().startswith(("{", "[")) else "{" + text + "}")
    return kvmem.Model.from_hf_config(cfg, name=str(cfg.get("_name_or_path") or what))


def model_input(container=st.sidebar) -> kvmem.Model:
    """The model chosen in the sidebar; raises ValueError with a message naming the problem."""
    source = container.radio("Model from", SOURCES, key="source", horizontal=True, bind="query-params",
                             help="A preset (real config.json files), your own config.json, or a few fields.")
    if source == "Preset":
        models = kvmem.list_models()
        name = container.selectbox("Model preset", models, index=models.index(DEFAULT_MODEL), key="model",
                                   bind="query-params",
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
        return _from_text(upload.getvalue().decode("utf-8", errors="replace"), upload.name)
    if source == "Paste JSON":
        text = container.text_area("config.json contents", key="pasted", height=160,
                                   help="Paste a Hugging Face config.json; parsed as JSON only.")
        if not text.strip():
            raise ValueError("paste a config.json, or choose another model source")
        return _from_text(text, "pasted config")
    c1, c2 = container.columns(2)
    fields = dict(
        layers=c1.number_input("Layers", 1, 1000, 32, key="c_layers", bind="query-params", help="num_hidden_layers"),
        heads=c2.number_input("Query heads", 1, 1024, 32, key="c_heads", bind="query-params",
                              help="num_attention_heads"),
        kv_heads=c1.number_input("KV heads", 1, 1024, 8, key="c_kv_heads", bind="query-params",
                                 help="num_key_value_heads: = heads for MHA, 1 for MQA, between for GQA"),
        head_dim=c2.number_input("Head dim", 1, 4096, 128, key="c_head_dim", bind="query-params", help="head_dim"),
        sliding_window=c1.number_input("Sliding window (0 = none)", 0, 10**7, 0, key="c_window",
                                       bind="query-params", help="sliding_window in tokens"),
        full_every=c2.number_input("Every n-th layer full (0 = none)", 0, 1000, 0, key="c_full_every",
                                   bind="query-params", help="Gemma-3: 6 (5 sliding : 1 full)"),
        kv_lora_rank=c1.number_input("MLA kv_lora_rank (0 = no MLA)", 0, 65536, 0, key="c_mla_rank",
                                     bind="query-params", help="DeepSeek-V3: 512"),
        qk_rope_head_dim=c2.number_input("MLA qk_rope_head_dim", 0, 4096, 0, key="c_mla_rope",
                                         bind="query-params", help="DeepSeek-V3: 64"),
    )
    return kvmem.Model.from_hf_config(custom_config(**{k: int(v) for k, v in fields.items()}), name="custom")


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


def _option_widget(container, engine: str, name: str, default):
    key = f"opt_{engine}_{name}".replace(".", "_").replace("-", "_")
    label = name.replace("_", " ")
    if isinstance(default, bool):
        return container.checkbox(label, value=default, key=key, help=f"{engine} option {name}")
    if isinstance(default, int):
        return int(container.number_input(label, value=default, step=1, key=key, help=f"{engine} option {name}"))
    if isinstance(default, float):
        return float(container.number_input(label, value=default, key=key, help=f"{engine} option {name}"))
    text = container.text_input(label, value="" if default is None else str(default), key=key,
                                help=f"{engine} option {name}; empty = engine default")
    if not text.strip():
        return default
    if name == "draft":
        return kvmem.get_model(text.strip())
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text.strip()


def workload_input(model: kvmem.Model, container=st.sidebar) -> Workload:
    """Tokens, batch, KV dtype, engine (with its options) and parallelism from the sidebar."""
    c1, c2 = container.columns(2)
    tokens_text = c1.text_input("Tokens per sequence", "8k", key="tokens", bind="query-params",
                                help='Context held per sequence: 4096, "32k", "128k" (k = 1024), "1M".')
    batch = c2.number_input("Batch", 1, 10**6, 1, key="batch", bind="query-params", help="Sequences held at once.")
    kv_dtype = c1.selectbox("KV dtype", KV_DTYPES, index=KV_DTYPES.index("bf16"), key="kv_dtype",
                            bind="query-params", help="Element format of the cache; auto = the model's dtype.")
    engines = list(ENGINES)
    engine = c2.selectbox("Engine", engines, index=engines.index("vllm") if "vllm" in engines else 0,
                          key="engine", bind="query-params",
                          help="Whose allocation rules: ideal = every cached element once.")
    tp = c1.number_input("Tensor parallel", 1, 1024, 1, key="tp", bind="query-params", help="tp: splits KV heads")
    pp = c2.number_input("Pipeline parallel", 1, 1024, 1, key="pp", bind="query-params", help="pp: splits layers")
    options = {}
    spec = ENGINES[engine]
    if spec.options:
        with container.expander(f"{engine} options"):
            for name, default in spec.options.items():
                value = _option_widget(st, engine, name, default)
                if value != default:
                    options[name] = value
    gpus = kvmem.list_gpus()
    gpu = c1.selectbox("GPU", gpus, index=gpus.index(DEFAULT_GPU), key="gpu", bind="query-params",
                       help="Accelerator for weights + KV against memory (memory as the device reports it).")
    num_gpus = c2.number_input("GPUs", 1, 1024, 1, key="num_gpus", bind="query-params",
                               help="GPUs available; tp x pp of them hold one copy of the model.")
    formats = ["auto", *weight_formats()]
    weight_dtype = container.selectbox("Weight format", formats, key="weight_dtype", bind="query-params",
                                       help="How the weights are stored: auto = the checkpoint's own format.")
    return Workload(model=model, tokens=kvmem.parse_tokens(tokens_text), batch=int(batch), kv_dtype=kv_dtype,
                    engine=engine, tp=int(tp), pp=int(pp), options=options, gpu=gpu, num_gpus=int(num_gpus),
                    weight_dtype=weight_dtype)


def sidebar() -> Workload:
    """The whole shared sidebar; stops the page with a message when an input is invalid."""
    st.sidebar.header("Model")
    try:
        model = model_input()
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    st.sidebar.header("Workload")
    try:
        return workload_input(model)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()


def _parsed_text_input(container, label: str, default: str, *, parse, key: str, help: str) -> int:
    """A text box read by ``parse``; an unreadable value is shown as an error and stops the page."""
    text = container.text_input(label, default, key=key, bind="query-params", help=help)
    try:
        return parse(text)
    except ValueError as exc:
        st.error(f"{label}: {exc}")
        st.stop()


def parse_tokens_input(container, label: str, default: str, *, key: str, help: str) -> int:
    """A token-count text box ("8k")."""
    return _parsed_text_input(container, label, default, parse=kvmem.parse_tokens, key=key, help=help)


def parse_bytes_input(container, label: str, default: str, *, key: str, help: str) -> int:
    """A byte-count text box ("20GiB", "16GB")."""
    return _parsed_text_input(container, label, default, parse=kvmem.parse_bytes, key=key, help=help)
