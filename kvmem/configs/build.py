"""Hugging Face ``config.json`` -> a Model's fields: the one reader of config fields.

The text model's part of the file (multimodal configs nest it in ``text_config``), its family
(kvmem.configs.families: unknown families and unread cache fields are refused), the layers
(kvmem.configs.layers), and the facts engines and sizing read beyond them (ModelFacts).
"""

from __future__ import annotations

from ..errors import ConfigError
from ..facts import ConfigReading, ModelFacts, MoeShape, SsmFacts
from ..layer import LINEAR
from ..units import show_value
from .families import ALIASES, family_of
from .fields import Fields, check_int
from .files import load_config
from .kinds import layer_count
from .layers import attention_shape, layers_of
from .params import count_params, moe_shape
from .reads import CACHE_FIELDS, check_fields
from .wrappers import TEXT_MODEL_TYPES

__all__ = ["model_fields", "custom_config"]

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16",
           "fp16": "fp16", "fp32": "fp32", "half": "fp16", "float": "fp32"}


_TEXT_SHAPE = CACHE_FIELDS | {"hidden_size", "num_attention_heads", "num_hidden_layers"}


def _alias(model_type: str | None) -> str | None:
    """The model_type transformers reads a file's model_type as (ALIASES), None kept."""
    return None if model_type is None else ALIASES.get(model_type, model_type)


def _text_part(raw: dict) -> tuple[dict, str | None]:
    """The text model's config and its model_type, as transformers' get_text_config(decoder=True) finds it
    (kvmem.configs.wrappers): a wrapper's ``text_config`` (or InternVL's ``llm_config``); a known
    wrapper's flat legacy file read as its text model; any other file as itself."""
    model_type = raw.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"config field 'model_type' must be a string, got {type(model_type).__name__}")
    model_type = _alias(model_type)
    wrapped = TEXT_MODEL_TYPES.get(model_type) if model_type else None
    text = raw.get("text_config") or raw.get("llm_config")
    if isinstance(text, dict) and ("num_hidden_layers" not in raw or wrapped):
        inner_type = text.get("model_type")
        if inner_type is not None and not isinstance(inner_type, str):
            raise ConfigError(f"config field 'text_config.model_type' must be a string, "
                              f"got {type(inner_type).__name__}")
        inner_type = inner_type or wrapped or model_type
        if "num_hidden_layers" in raw:
            # a wrapper that also repeats text fields at the top (Qwen2.5-VL saved by transformers 4.5x):
            # transformers reads text_config alone (configuration_utils.py#L1548-L1564)
            return dict(text), _alias(inner_type)
        # the wrapper's own fields fill what text_config leaves out, but never its shape: transformers
        # builds the text model from text_config and its class defaults alone (Ovis2Config's own
        # hidden_size, 1536, is not its Qwen2 text model's)
        merged = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config", "audio_config")
                  and k not in _TEXT_SHAPE}
        merged.update(text)
        return merged, _alias(inner_type)
    if wrapped and text is None and "num_hidden_layers" in raw:
        # transformers <= 4.4x saved Qwen2-VL / Qwen2.5-VL flat: the wrapper's __post_init__ builds its
        # text config from the top-level fields (configuration_qwen2_5_vl.py#L192-L200)
        return raw, ALIASES.get(wrapped, wrapped)
    if not isinstance(model_type, str) or not model_type:
        model_type = ""
    return raw, model_type


def _dtype(raw: dict, text: dict) -> str:
    """The checkpoint dtype: torch_dtype (or transformers 5's dtype); bf16 only when none is given."""
    for part in (raw, text):
        for key in ("torch_dtype", "dtype"):
            value = part.get(key)
            if value is None:
                continue
            name = str(value).lower().removeprefix("torch.")
            if name not in _DTYPES:
                from ..sources.bounded import quote
                raise ConfigError(f"config field {key!r} is {quote(value)}; kvmem reads "
                                  f"{', '.join(sorted({'bfloat16', 'float16', 'float32'}))} (or omit it for bf16)")
            return _DTYPES[name]
    return "bf16"


def _first(raw: dict, text: dict, name: str):
    """A field the outer config sets first (architectures, quantization_config), else the text model's."""
    value = raw.get(name)
    if value is None and isinstance(raw.get("text_config"), dict):
        value = raw["text_config"].get(name)
    return value if value is not None else text.get(name)


def _facts(raw: dict, f: Fields, moe: MoeShape | None, *, has_linear: bool) -> ModelFacts:
    """The non-layer facts engines and sizing read, once (see ModelFacts)."""
    text = f.cfg
    architectures = _first(raw, text, "architectures") or ()
    if not isinstance(architectures, (list, tuple)) or not all(isinstance(a, str) for a in architectures):
        raise ConfigError(f"config field 'architectures' must be a list of class names, "
                          f"got {show_value(architectures)}")
    qc = _first(raw, text, "quantization_config")
    ssm = None
    if has_linear:
        ssm = SsmFacts(n_groups=f.int("n_groups", default=0, minimum=0) or 0,
                       state_size=f.int("ssm_state_size", "mamba_d_state", default=0, minimum=0) or 0,
                       chunk_size=f.int("chunk_size", "mamba_chunk_size", default=0, minimum=0) or 0,
                       ssm_dtype=f.get("mamba_ssm_dtype", "mamba_ssm_cache_dtype", default=None))
    rotary = f.get("partial_rotary_factor", "rotary_pct", default=1) or 1
    return ModelFacts(
        architectures=tuple(architectures),
        intermediate_size=_mlp_width(f),
        vocab_size=f.int("vocab_size", "padded_vocab_size", default=0, minimum=0) or 0,
        tie_word_embeddings=bool(f.get("tie_word_embeddings", default=True)),
        q_lora_rank=f.int("q_lora_rank", default=0, minimum=0) or 0,
        qk_nope_head_dim=f.int("qk_nope_head_dim", default=0, minimum=0) or 0,
        v_head_dim=f.int("v_head_dim", default=0, minimum=0) or 0,
        partial_rotary_factor=str(rotary),
        new_decoder_architecture=bool(f.get("new_decoder_architecture", default=False)),
        quantization_config=qc if isinstance(qc, dict) else None,
        moe=moe, ssm=ssm)


def _mlp_width(f) -> int:
    """The MLP width; Gemma 3n writes one per layer (transformers@5.24.0 models/gemma3n/
    configuration_gemma3n.py#L130-L138 expands an int to a list): its published configs repeat one width."""
    value = f.get("intermediate_size", default=None)
    if isinstance(value, list) and value and all(type(v) is int and v == value[0] for v in value):
        return check_int("intermediate_size", value[0], minimum=0)
    return f.int("intermediate_size", "n_inner", "ffn_hidden_size", default=0, minimum=0) or 0


def model_fields(cfg, *, name: str | None = None, hf_id: str | None = None,
                 source: str | None = None) -> dict:
    """A Hugging Face config (dict, JSON text or path) read into kvmem.model.Model's keyword arguments:
    Model.from_hf_config builds the Model from them (this package sits below kvmem.model)."""
    raw = load_config(cfg)
    text, found_type = _text_part(raw)
    model_type = found_type or ""       # family_of refuses a config without one
    family = family_of(model_type)
    check_fields(text, model_type, family)
    f = Fields(text, model_type, defaults_type=family.defaults or None)
    n_layers = layer_count(f)
    heads, kv_heads, head_dim, v_head_dim = attention_shape(f, family)
    layers = layers_of(f, family, n_layers, kv_heads, head_dim, v_head_dim)
    dtype = _dtype(raw, text)
    moe = moe_shape(f, n_layers)
    total, active, embedding = count_params(f, layers, heads=heads, head_dim=head_dim, moe=moe)
    given_name = raw.get("_name_or_path")
    if given_name is not None and not isinstance(given_name, str):
        raise ConfigError(f"config field '_name_or_path' must be a string, got {type(given_name).__name__}")
    facts = _facts(raw, f, moe, has_linear=any(layer.kind == LINEAR for layer in layers))
    ignored = tuple((name, why) for name, why in family.ignores if text.get(name) not in (None, False, 0, "", [], {}))
    reading = ConfigReading(model_type, family.source, tuple(f.from_config), tuple(f.from_defaults.items()), ignored)
    return dict(
        name=name or hf_id or given_name or model_type or "custom",
        layers=layers,
        hidden_size=f.int("hidden_size", "n_embd", "d_model", "embed_dim"),
        num_attention_heads=heads,
        dtype=dtype,
        max_position_embeddings=f.int("max_position_embeddings", "n_positions", "seq_length",
                                      "max_sequence_length", default=None),
        params_total=total, params_active=active, params_embedding=embedding,
        model_type=model_type, hf_id=hf_id, source=source,
        mtp_layers=f.int("num_nextn_predict_layers", "mtp_num_hidden_layers", default=0, minimum=0) or 0,
        facts=facts,
        config=raw,
        reading=reading,
    )



def custom_config(*, layers: int, heads: int, kv_heads: int, head_dim: int, hidden_size: int | None = None,
                  sliding_window: int = 0, full_every: int = 0, kv_lora_rank: int = 0,
                  qk_rope_head_dim: int = 0, dtype: str = "bfloat16", name: str = "custom") -> dict:
    """A config.json-shaped dict from a handful of fields, read by the same reader as real files.

    ``sliding_window`` > 0 makes layers sliding; with ``full_every`` = n every n-th layer stays
    full (Gemma-3: n=6). ``kv_lora_rank`` > 0 makes every layer MLA (DeepSeek layout).
    """
    cfg: dict[str, object] = {
        "model_type": "custom_mla" if kv_lora_rank else "custom", "_name_or_path": name, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "hidden_size": hidden_size or heads * head_dim, "torch_dtype": dtype}
    if kv_lora_rank:
        cfg.update(kv_lora_rank=kv_lora_rank, qk_rope_head_dim=qk_rope_head_dim,
                   qk_nope_head_dim=head_dim, v_head_dim=head_dim, q_lora_rank=None)
    elif sliding_window:
        cfg["sliding_window"] = sliding_window
        cfg["layer_types"] = ["full_attention" if full_every and (i + 1) % full_every == 0 else "sliding_attention"
                              for i in range(layers)]
    return cfg
