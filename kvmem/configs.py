"""Hugging Face ``config.json`` -> Model: field readers and each family's defaults.

Real config files leave out what the transformers config class fills in by default
(Gemma-3's ``text_config`` has no head counts, Qwen2 no ``head_dim``, old configs no
``num_key_value_heads``). Those defaults are data, read from the transformers config
classes into ``data/hf_defaults.json`` (``tools/hf_defaults.py``, version recorded there).
The per-layer attention kinds follow the rules the config classes apply when
``layer_types`` is absent (transformers 5.x ``configuration_<family>.py``):

    gemma2                sliding if (i + 1) % 2                       (1:1)
    gemma3_text, cohere2  sliding if (i + 1) % sliding_window_pattern  (6 -> 5:1; 4 -> 3:1)
    gpt_oss               sliding if (i + 1) % 2, window 128
    qwen2/qwen3/qwen3_moe sliding if use_sliding_window and i >= max_window_layers
    gemma3n_text          full if (i + 1) % 5 == 0, else sliding
    any other family      all sliding when ``sliding_window`` is set, else all chunked when
                          ``attention_chunk_size`` is set, else all full (cache_utils.py
                          get_layer_types_and_kwargs: Mistral-7B-v0.1, Phi-3-mini-4k)
    llama4_text           chunked (attention_chunk_size) where no_rope_layers[i], else full;
                          no_rope_layers[i] = (i + 1) % no_rope_layer_interval != 0
    qwen3_next, qwen3_5   linear if (i + 1) % full_attention_interval, else full
    jamba                 attention if i % attn_layer_period == attn_layer_offset, else mamba
    nemotron_h            hybrid_override_pattern: "*" attention, "M" mamba2, "-"/"E" none
    gemma3n_text          the last num_kv_shared_layers read the last earlier layer of
                          the same type
    deepseek_v2/v3, kimi  every layer MLA; deepseek_v32 adds the indexer key (index_head_dim)

``head_dim`` from the config always wins over hidden_size / num_attention_heads.
"""

from __future__ import annotations

import json
import os
import stat
from functools import lru_cache
from importlib import resources

from .errors import ConfigError
from .model import (CHUNKED, FULL, LINEAR, MLA, NONE, SHARED, SLIDING, Layer, Model, ModelFacts, MoeShape,
                    RecurrentState, SsmFacts, register_reader)
from .params import count_params, moe_shape
from .units import show_value

__all__ = ["ConfigError", "model_from_config", "load_config"]


_MISSING = object()

# Bounds on what a config may say, generously above every real model (largest today: 126
# layers, 128 heads, head_dim 576 with MLA, hidden 16,384, vocab 262,144, 384 experts, a
# 10M-token context), so that a hostile file cannot make kvmem loop or allocate without end.
MAX_CONFIG_BYTES = 4 * 2**20     # a config.json is a few KB; the largest real ones ~100 KB
MAX_NESTING = 32                 # JSON object/array depth (real configs: 3)
_MAX_INT_DIGITS = 30
_LIMIT_GROUPS = (
    # 1,024 layers (8x the deepest real model) keeps every call, fit's searches included, in
    # about a second: their cost grows with the layer count
    (1024, ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_kv_shared_layers")),
    (4096, ("num_attention_heads", "n_head", "num_heads", "n_heads", "num_key_value_heads", "num_kv_heads",
            "n_head_kv", "multi_query_group_num", "linear_num_key_heads", "linear_num_value_heads",
            "mamba_num_heads", "n_groups", "index_n_heads", "linear_conv_kernel_dim", "mamba_d_conv",
            "conv_kernel", "mamba_expand", "num_nextn_predict_layers", "mtp_num_hidden_layers",
            "sliding_window_pattern", "_sliding_window_pattern", "full_attention_interval",
            "attn_layer_period", "attn_layer_offset", "no_rope_layer_interval", "interleave_moe_layer_step",
            "decoder_sparse_step", "moe_layer_freq", "expert_layer_period", "expert_layer_offset",
            "n_shared_experts")),
    (65536, ("head_dim", "kv_channels", "v_head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "kv_lora_rank",
             "q_lora_rank", "index_head_dim", "linear_key_head_dim", "linear_value_head_dim", "mamba_head_dim",
             "mamba_d_state", "ssm_state_size", "mamba_dt_rank", "n_routed_experts", "num_local_experts",
             "num_experts", "moe_num_experts", "num_experts_per_tok", "num_experts_per_token", "moe_top_k",
             "top_k")),
    (2**20, ("hidden_size", "n_embd", "d_model")),
    (2**24, ("vocab_size", "padded_vocab_size", "intermediate_size", "moe_intermediate_size",
             "intermediate_size_mlp", "shared_expert_intermediate_size", "n_inner", "ffn_hidden_size")),
    (2**30, ("sliding_window", "attention_chunk_size")),
)
FIELD_LIMITS = {name: limit for limit, names in _LIMIT_GROUPS for name in names}
DEFAULT_FIELD_LIMIT = 2**40      # any other integer field (max_position_embeddings, ...)


class _LongNumber:
    """A JSON number too long to read (Python refuses ints past 4300 digits): kept as a
    marker so that the field reader names the field that holds it."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"a {self.digits:,}-digit number"


def _parse_int(text: str):
    return int(text) if len(text) <= _MAX_INT_DIGITS else _LongNumber(text)


def _check_nesting(data) -> None:
    """Refuse JSON nested deeper than MAX_NESTING (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ConfigError(f"config is nested deeper than {MAX_NESTING} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _read_file(path) -> str:
    """A config file's text: a regular file only, at most MAX_CONFIG_BYTES, UTF-8."""
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {name!r}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"config file {name!r} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {name!r}: {exc.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {name!r} is larger than {MAX_CONFIG_BYTES:,} bytes")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"config file {name!r} is UTF-16 text; config.json must be UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {name!r} is not UTF-8 text (byte {data[exc.start]:#04x} at "
                          f"offset {exc.start})") from None

# Multimodal wrappers whose text model lives in text_config, and the type it has there.
_TEXT_MODEL_TYPES = {"gemma3": "gemma3_text", "gemma3n": "gemma3n_text", "llama4": "llama4_text",
                     "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text",
                     "mistral3": "mistral", "llava": "llama", "qwen2_5_vl": "qwen2_5_vl_text",
                     "qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text"}

_LAYER_TYPE_NAMES = {
    "full_attention": FULL, "attention": FULL, "global": FULL, "full": FULL,
    "sliding_attention": SLIDING, "sliding": SLIDING, "local": SLIDING,
    "chunked_attention": CHUNKED,
    "linear_attention": LINEAR, "mamba": LINEAR, "mamba2": LINEAR,
    "indexed_attention": FULL,
    "moe": NONE, "mlp": NONE, "dummy": NONE,
}

# modeling_nemotron_h.py: "*" attention, "M" mamba2, "-" MLP, "E" MoE (no cache).
_NEMOTRON_BLOCKS = {"*": FULL, "M": LINEAR, "-": NONE, "E": NONE}

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16",
           "fp16": "fp16", "fp32": "fp32", "half": "fp16", "float": "fp32"}


@lru_cache(maxsize=1)
def _hf_defaults() -> dict:
    text = resources.files("kvmem").joinpath("data/hf_defaults.json").read_text()
    return json.loads(text)["defaults"]


def load_config(cfg) -> dict:
    """A config as a dict, from a dict, JSON text, or a path to a JSON file.

    Files: regular files only, at most MAX_CONFIG_BYTES, UTF-8; JSON nested at most
    MAX_NESTING deep; a number of more than 30 digits is kept as a marker that the field
    reader refuses by name.
    """
    if isinstance(cfg, dict):
        _check_nesting(cfg)
        return cfg
    if isinstance(cfg, bytes):
        raise ConfigError("config must be a dict, JSON text or a path, got bytes")
    if isinstance(cfg, (str, os.PathLike)):
        text = str(cfg)
        if isinstance(cfg, os.PathLike) or not text.lstrip().startswith(("{", "[")):
            if "\x00" in text:
                raise ConfigError("config path contains a NUL character")
            text = _read_file(cfg)
        if len(text) > MAX_CONFIG_BYTES:
            raise ConfigError(f"config text is longer than {MAX_CONFIG_BYTES:,} characters")
        try:
            data = json.loads(text, parse_int=_parse_int)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except RecursionError:
            raise ConfigError(f"config is nested deeper than {MAX_NESTING} levels") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config must be a JSON object, got {type(data).__name__}")
        _check_nesting(data)
        return data
    raise ConfigError(f"config must be a dict, JSON text or a path, got {type(cfg).__name__}")


class Fields:
    """Reads a config's fields, falling back to the family's transformers defaults."""

    def __init__(self, cfg: dict, model_type: str):
        self.cfg = cfg
        self.model_type = model_type
        self.defaults = _hf_defaults().get(model_type, {})

    def has(self, name: str) -> bool:
        return self.cfg.get(name) is not None

    def get(self, *names: str, default=_MISSING):
        """The first of ``names`` set in the config, else the family default.

        A field the config sets to null stays null (``default``), as in the config class:
        Mistral-7B-v0.3's ``"sliding_window": null`` is not the class default of 4096.
        """
        for name in names:
            if self.cfg.get(name) is not None:
                return self.cfg[name]
        if any(name in self.cfg for name in names):
            if default is not _MISSING:
                return default
            raise ConfigError(f"config field {names[0]!r} is null and model_type {self.model_type!r} needs it")
        for name in names:
            if self.defaults.get(name) is not None:
                return self.defaults[name]
        if default is not _MISSING:
            return default
        raise ConfigError(f"config field {names[0]!r} is missing"
                          + (f" (also looked for {', '.join(map(repr, names[1:]))})" if len(names) > 1 else "")
                          + f" and model_type {self.model_type!r} has no default for it")

    def int(self, *names: str, default=_MISSING, minimum: int = 1) -> int:
        """An integer field in [minimum, its FIELD_LIMITS bound]; the message names both."""
        value = self.get(*names, default=default)
        if value is None:
            return value
        field = next((n for n in names if self.cfg.get(n) is not None), names[0])
        limit = FIELD_LIMITS.get(field, FIELD_LIMITS.get(names[0], DEFAULT_FIELD_LIMIT))
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= limit:
            raise ConfigError(f"config field {field!r} must be an integer from {minimum} to {limit:,}, "
                              f"got {show_value(value)}")
        return value


# Families published under their own model_type that transformers reads as another.
_FAMILY_ALIASES = {"kimi_k2": "deepseek_v3"}


def _text_part(raw: dict) -> tuple[dict, str]:
    """The text model's config and its model_type (multimodal configs nest it in text_config)."""
    model_type = raw.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"config field 'model_type' must be a string, got {type(model_type).__name__}")
    model_type = _FAMILY_ALIASES.get(model_type, model_type)
    text = raw.get("text_config") or raw.get("llm_config")
    if isinstance(text, dict) and "num_hidden_layers" not in raw:
        merged = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config", "audio_config")}
        merged.update(text)
        inner_type = text.get("model_type")
        if inner_type is not None and not isinstance(inner_type, str):
            raise ConfigError(f"config field 'text_config.model_type' must be a string, "
                              f"got {type(inner_type).__name__}")
        inner_type = inner_type or _TEXT_MODEL_TYPES.get(model_type, model_type)
        return merged, inner_type
    if not isinstance(model_type, str) or not model_type:
        model_type = ""
    return raw, model_type


def _attention_shape(f: Fields) -> tuple[int, int, int, int]:
    """(query heads, KV heads, K head dim, V head dim), checked against each other."""
    heads = f.int("num_attention_heads", "n_head", "num_heads", "n_heads")
    if f.model_type == "falcon":
        if f.get("new_decoder_architecture", default=False):
            kv_heads = f.int("num_kv_heads", default=heads)
        else:
            kv_heads = 1 if f.get("multi_query", default=True) else heads
    else:
        kv_heads = f.int("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                         default=heads)
    if heads % kv_heads:
        raise ConfigError(f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv_heads})")
    head_dim = f.int("head_dim", "kv_channels", default=None)
    mla = f.model_type in _MLA_TYPES or f.has("kv_lora_rank")
    if head_dim is None and mla and f.has("qk_nope_head_dim"):
        # MLA: a query/key head is qk_nope_head_dim + qk_rope_head_dim wide, whatever hidden / heads
        # is (GLM-4.7-Flash: hidden 2048, 20 heads, 192 + 64); the cache holds the latent instead
        head_dim = f.int("qk_nope_head_dim") + f.int("qk_rope_head_dim")
    elif head_dim is None:
        hidden = f.int("hidden_size", "n_embd", "d_model")
        if hidden % heads:
            raise ConfigError(f"hidden_size ({hidden}) is not divisible by num_attention_heads ({heads}) "
                              "and the config has no head_dim")
        head_dim = hidden // heads
    v_head_dim = f.int("v_head_dim", default=head_dim) if f.model_type not in _MLA_TYPES else head_dim
    return heads, kv_heads, head_dim, v_head_dim


_MLA_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_linear", "glm4_moe_lite"}


def _layer_kinds(f: Fields, n_layers: int) -> list[str]:
    """The attention kind of every layer: ``layer_types`` when given, else the family rule."""
    t = f.model_type
    given = f.get("layer_types", "layers_block_type", default=None)
    if given is not None:
        if not isinstance(given, list) or len(given) != n_layers:
            raise ConfigError(f"layer_types must list one type per layer ({n_layers}), "
                              f"got {len(given) if isinstance(given, list) else given!r}")
        kinds = []
        for i, name in enumerate(given):
            if not isinstance(name, str) or name not in _LAYER_TYPE_NAMES:
                raise ConfigError(f"layer_types[{i}] is {name!r}; known types: {sorted(_LAYER_TYPE_NAMES)}")
            kinds.append(_LAYER_TYPE_NAMES[name])
        return kinds
    if t == "nemotron_h":
        pattern = f.get("hybrid_override_pattern")
        if not isinstance(pattern, str):
            raise ConfigError(f"config field 'hybrid_override_pattern' must be a string of '*', 'M', '-', 'E', "
                              f"got {show_value(pattern)}")
        if len(pattern) != n_layers:
            raise ConfigError(f"hybrid_override_pattern has {len(pattern)} entries, num_hidden_layers is {n_layers}")
        unknown = sorted(set(pattern) - set(_NEMOTRON_BLOCKS))
        if unknown:
            raise ConfigError(f"hybrid_override_pattern has unknown block {unknown[0]!r}; known: "
                              "'*' attention, 'M' mamba2, '-' MLP, 'E' MoE")
        return [_NEMOTRON_BLOCKS[c] for c in pattern]
    if t == "jamba":
        period, offset = f.int("attn_layer_period"), f.int("attn_layer_offset", minimum=0)
        return [FULL if i % period == offset else LINEAR for i in range(n_layers)]
    if t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        interval = f.int("full_attention_interval")
        return [LINEAR if (i + 1) % interval else FULL for i in range(n_layers)]
    if t == "llama4_text":
        no_rope = f.get("no_rope_layers", default=None)
        if no_rope and (not isinstance(no_rope, list) or len(no_rope) != n_layers
                        or any(v not in (0, 1) or isinstance(v, float) for v in no_rope)):
            raise ConfigError(f"config field 'no_rope_layers' must list 0 or 1 for each of the {n_layers} layers, "
                              f"got {show_value(no_rope)}")
        if not no_rope:
            interval = f.int("no_rope_layer_interval", default=4)
            no_rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
        chunked = f.get("attention_chunk_size", default=None)
        return [CHUNKED if chunked and no_rope[i] else FULL for i in range(n_layers)]
    if t == "gemma3n_text":
        return [FULL if (i + 1) % 5 == 0 else SLIDING for i in range(n_layers)]
    if f.get("sliding_window", default=None) is None:
        chunked = f.get("attention_chunk_size", default=None)
        return [CHUNKED if chunked else FULL] * n_layers
    if t in ("gemma2", "gpt_oss"):
        return [SLIDING if (i + 1) % 2 else FULL for i in range(n_layers)]
    if t in ("gemma3_text", "cohere2"):
        pattern = f.int("sliding_window_pattern", "_sliding_window_pattern")
        return [SLIDING if (i + 1) % pattern else FULL for i in range(n_layers)]
    if t in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if not f.get("use_sliding_window", default=False):
            return [FULL] * n_layers
        first = f.int("max_window_layers", minimum=0)
        return [SLIDING if i >= first else FULL for i in range(n_layers)]
    return [SLIDING] * n_layers


def _recurrent_state(f: Fields) -> RecurrentState:
    """The per-sequence state of a linear-attention or SSM layer of this family."""
    t = f.model_type
    if t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        k_heads, v_heads = f.int("linear_num_key_heads"), f.int("linear_num_value_heads")
        k_dim, v_dim = f.int("linear_key_head_dim"), f.int("linear_value_head_dim")
        conv = 2 * k_heads * k_dim + v_heads * v_dim
        return RecurrentState(conv, f.int("linear_conv_kernel_dim"), v_heads * k_dim * v_dim, v_heads)
    if t == "jamba":
        inner = f.int("mamba_expand") * f.int("hidden_size")
        return RecurrentState(inner, f.int("mamba_d_conv"), inner * f.int("mamba_d_state"), inner)
    if t == "nemotron_h":
        heads, head_dim = f.int("mamba_num_heads"), f.int("mamba_head_dim")
        state, groups = f.int("ssm_state_size"), f.int("n_groups")
        inner = heads * head_dim
        return RecurrentState(inner + 2 * groups * state, f.int("conv_kernel"), inner * state, heads)
    raise ConfigError(f"model_type {t!r} has linear/mamba layers but kvmem does not know its state "
                      "layout; supported: qwen3_next, qwen3_5, jamba, nemotron_h")


def _shared_sources(f: Fields, kinds: list[str]) -> dict[int, int]:
    """Gemma-3n: layer index -> the earlier layer whose KV it reads."""
    n_shared = f.int("num_kv_shared_layers", default=0, minimum=0)
    if not n_shared:
        return {}
    first = len(kinds) - n_shared
    if first < 1:
        raise ConfigError(f"num_kv_shared_layers ({n_shared}) must be below num_hidden_layers ({len(kinds)})")
    sources = {}
    for i in range(first, len(kinds)):
        earlier = [j for j in range(first) if kinds[j] == kinds[i]]
        if not earlier:
            raise ConfigError(f"layer {i} shares KV but no earlier layer has type {kinds[i]!r}")
        sources[i] = earlier[-1]
    return sources


def _layers(f: Fields, n_layers: int, kv_heads: int, head_dim: int, v_head_dim: int):
    kinds = _layer_kinds(f, n_layers)
    if f.model_type in _MLA_TYPES or f.has("kv_lora_rank"):
        index_dim = f.int("index_head_dim", default=0, minimum=0) if f.model_type == "deepseek_v32" else 0
        mla = Layer(MLA, kv_lora_rank=f.int("kv_lora_rank"),
                    qk_rope_head_dim=f.int("qk_rope_head_dim"), index_head_dim=index_dim)
        kinds = [MLA if k == FULL else k for k in kinds]
    window = f.int("sliding_window", default=0, minimum=0) or 0
    chunk = f.int("attention_chunk_size", default=0, minimum=0) or 0
    state = _recurrent_state(f) if LINEAR in kinds else None
    if SLIDING in kinds and window < 1:
        raise ConfigError("layer_types has sliding_attention layers but sliding_window is not set")
    sources = _shared_sources(f, kinds)
    layers = []
    for i, kind in enumerate(kinds):
        if i in sources:
            layers.append(Layer(SHARED, shared_with=sources[i]))
        elif kind == MLA:
            layers.append(mla)
        elif kind == LINEAR:
            layers.append(Layer(LINEAR, state=state))
        elif kind == NONE:
            layers.append(Layer(NONE))
        else:
            layers.append(Layer(kind, kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=v_head_dim,
                                window=window if kind == SLIDING else chunk if kind == CHUNKED else 0))
    return tuple(layers)


def _dtype(raw: dict, text: dict) -> str:
    """The checkpoint dtype: torch_dtype (or transformers 5's dtype); bf16 only when none is given."""
    for part in (raw, text):
        for key in ("torch_dtype", "dtype"):
            value = part.get(key)
            if value is None:
                continue
            name = str(value).lower().removeprefix("torch.")
            if name not in _DTYPES:
                raise ConfigError(f"config field {key!r} is {value!r}; kvmem reads "
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
    if isinstance(architectures, str) or not all(isinstance(a, str) for a in architectures):
        raise ConfigError(f"config field 'architectures' must be a list of class names, got {architectures!r}")
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
        intermediate_size=f.int("intermediate_size", "n_inner", "ffn_hidden_size", default=0, minimum=0) or 0,
        vocab_size=f.int("vocab_size", "padded_vocab_size", default=0, minimum=0) or 0,
        tie_word_embeddings=bool(f.get("tie_word_embeddings", default=True)),
        q_lora_rank=f.int("q_lora_rank", default=0, minimum=0) or 0,
        qk_nope_head_dim=f.int("qk_nope_head_dim", default=0, minimum=0) or 0,
        v_head_dim=f.int("v_head_dim", default=0, minimum=0) or 0,
        partial_rotary_factor=str(rotary),
        new_decoder_architecture=bool(f.get("new_decoder_architecture", default=False)),
        quantization_config=qc if isinstance(qc, dict) else None,
        moe=moe, ssm=ssm)


def model_from_config(cfg, *, name: str | None = None, hf_id: str | None = None,
                      source: str | None = None) -> Model:
    """Build a Model from a Hugging Face config (dict, JSON text or path)."""
    raw = load_config(cfg)
    text, model_type = _text_part(raw)
    f = Fields(text, model_type)
    n_layers = f.int("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads, kv_heads, head_dim, v_head_dim = _attention_shape(f)
    layers = _layers(f, n_layers, kv_heads, head_dim, v_head_dim)
    dtype = _dtype(raw, text)
    moe = moe_shape(f, n_layers)
    total, active, embedding = count_params(f, layers, heads=heads, head_dim=head_dim, moe=moe)
    given_name = raw.get("_name_or_path")
    if given_name is not None and not isinstance(given_name, str):
        raise ConfigError(f"config field '_name_or_path' must be a string, got {type(given_name).__name__}")
    return Model(
        name=name or hf_id or given_name or model_type or "custom",
        layers=layers,
        hidden_size=f.int("hidden_size", "n_embd", "d_model"),
        num_attention_heads=heads,
        dtype=dtype,
        max_position_embeddings=f.int("max_position_embeddings", "n_positions", "seq_length",
                                      "max_sequence_length", default=None),
        params_total=total, params_active=active, params_embedding=embedding,
        model_type=model_type, hf_id=hf_id, source=source,
        mtp_layers=f.int("num_nextn_predict_layers", "mtp_num_hidden_layers", default=0, minimum=0) or 0,
        facts=_facts(raw, f, moe, has_linear=any(layer.kind == LINEAR for layer in layers)),
        config=raw,
    )


register_reader("hf_config", model_from_config)


def custom_config(*, layers: int, heads: int, kv_heads: int, head_dim: int, hidden_size: int | None = None,
                  sliding_window: int = 0, full_every: int = 0, kv_lora_rank: int = 0,
                  qk_rope_head_dim: int = 0, dtype: str = "bfloat16", name: str = "custom") -> dict:
    """A config.json-shaped dict from a handful of fields, read by the same reader as real files.

    ``sliding_window`` > 0 makes layers sliding; with ``full_every`` = n every n-th layer stays
    full (Gemma-3: n=6). ``kv_lora_rank`` > 0 makes every layer MLA (DeepSeek layout).
    """
    cfg = {"model_type": "custom", "_name_or_path": name, "num_hidden_layers": layers,
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
