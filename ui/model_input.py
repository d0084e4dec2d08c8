"""The sidebar's model, six ways: a preset, a Hugging Face id (kvmem resolves it: HF cache, else
the Hub, config.json only), an uploaded config.json, a GGUF header, pasted JSON, or a few
custom fields. Nothing a user uploads or pastes is executed: it is parsed as JSON only,
size-limited, and its text is shown as plain text; a GGUF upload is read for its header only
(kvmem.sources.gguf)."""

from __future__ import annotations

import streamlit as st

import kvmem
from kvmem.configs import custom_config, load_config
from ui.widgets import number, radio, select

MAX_CONFIG_BYTES = 1_000_000
MAX_GGUF_HEADER_MB = 64
DEFAULT_MODEL = "llama-3.1-8b"
SOURCES = ["Preset", "Hugging Face id", "Upload config.json", "Upload GGUF", "Paste JSON", "Custom fields"]


def _from_text(text: str, what: str, container=st.sidebar) -> kvmem.Model:
    """A config from text; fields without their braces are read as an object ("model_type": ...).
    An error's line and column are those of the text as given (the braces added are not counted)."""
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise ValueError(f"{what} is larger than {MAX_CONFIG_BYTES:,} bytes; a config.json is a few KB")
    if not text.strip():
        raise ValueError(f"{what} is empty{' (whitespace only)' if text else ' (0 bytes)'}: give the model's "
                         "config.json, a JSON object such as {\"model_type\": \"llama\", ...}")
    yaml_line = _yaml_key_line(text)
    if yaml_line:
        raise ValueError(f"{what} is not JSON: it reads as YAML (line {yaml_line[0]}: {yaml_line[1]!r}); kvmem reads "
                         "a Hugging Face config.json, a JSON object with quoted keys: {\"model_type\": \"llama\", ...}")
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


def _yaml_key_line(text: str) -> tuple[int, str] | None:
    """(line number, line) of the first line that is a YAML mapping key (``model_type: llama``, unquoted),
    where the text has no brace or quote before it; None for text that reads as JSON or bare JSON fields."""
    import re

    for line_number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped == "---":
            continue
        if re.match(r"[A-Za-z_][\w.-]*\s*:(\s|$)", stripped):
            return line_number, stripped[:60]
        return None
    return None


def _user_position(message: str, text: str) -> str:
    """A JSON error message about "{\n" + text + "\n}" told in ``text``'s own lines: the line the
    message names is one line further down in the wrapped text."""
    import re

    lines = text.split("\n")

    def own(match):
        wrapped = int(match.group(2))
        if wrapped == 1:
            return "before the first line of the text (read as a JSON object)"
        if wrapped - 1 > len(lines):
            return "after the last line of the text (read as a JSON object)"
        return f"{match.group(1) or ''}line {wrapped - 1} column {match.group(3)}"

    return re.sub(r"(at )?line (\d+) column (\d+)", own, message)


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
    from kvmem.sources import hub
    # This session's Hub failures, remembered for it alone (kvmem.sources.hub): one user's failed try
    # never fails the same id for another until a restart; "Retry" below forgets them.
    hub.keep_failures_in(st.session_state.setdefault("_hub_failures", {}))
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
        if repo_id.strip() in hub.failed_ids() and container.button(
                "Retry the Hub", key="hf_retry", help="This session's last try of this id failed and is "
                "remembered (so pages do not wait for the Hub again); ask the Hub again now."):
            hub.forget_failures(repo_id.strip())
        with st.spinner(f"Reading {repo_id.strip()} config.json…"):
            model = kvmem.get_model(repo_id.strip())
        with st.spinner("Reading its safetensors headers for the weight bytes…"):
            weights_caption(container, model)
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
        from kvmem.sources.gguf import fields_from_gguf_bytes
        model = kvmem.Model(**fields_from_gguf_bytes(upload, name=upload.name))      # reads the header's bytes only
        container.caption(f"{upload.name}: the header only — metadata and {len(model.checkpoint.tensors):,} tensor "
                          "infos; tensor data is never read.")
        weights_caption(container, model)
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


def weights_caption(container, model: kvmem.Model) -> None:
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
