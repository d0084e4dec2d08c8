"""Reading one config field: the first spelling set, else the family's transformers default.

Real config files leave out what the transformers config class fills in by default
(Gemma-3's ``text_config`` has no head counts, Qwen2 no ``head_dim``, old configs no
``num_key_value_heads``). Those defaults are data, read from the transformers config
classes into ``data/hf_defaults.json`` (``tools/hf_defaults.py``, version recorded there); a
field a class derives from others when it is absent is a rule (kvmem.configs.derived).
Every integer is bounded (FIELD_LIMITS), generously above every real model (largest today:
126 layers, 128 heads, head_dim 576 with MLA, hidden 16,384, vocab 262,144, 384 experts, a
10M-token context), so that a hostile file cannot make kvmem loop or allocate without end.
"""

from __future__ import annotations

from functools import lru_cache

from ..datafiles import read_json
from ..errors import ConfigError
from ..units import show_value
from .derived import DERIVED_DEFAULTS, KWARG_DEFAULTS

__all__ = ["Fields", "FIELD_LIMITS", "DEFAULT_FIELD_LIMIT", "MISSING", "hf_defaults"]

MISSING = object()

_LIMIT_GROUPS = (
    # 1,024 layers (8x the deepest real model) keeps every call, fit's searches included, in
    # about a second: their cost grows with the layer count
    (1024, ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "layers", "num_kv_shared_layers")),
    (4096, ("num_attention_heads", "n_head", "num_heads", "n_heads", "num_key_value_heads", "num_kv_heads",
            "n_head_kv", "multi_query_group_num", "linear_num_key_heads", "linear_num_value_heads",
            "mamba_num_heads", "n_groups", "index_n_heads", "linear_conv_kernel_dim", "mamba_d_conv",
            "conv_kernel", "mamba_expand", "num_nextn_predict_layers", "mtp_num_hidden_layers",
            "sliding_window_pattern", "_sliding_window_pattern", "full_attention_interval",
            "attn_layer_period", "attn_layer_offset", "no_rope_layer_interval", "interleave_moe_layer_step",
            "decoder_sparse_step", "moe_layer_freq", "expert_layer_period", "expert_layer_offset",
            "n_shared_experts", "num_global_key_value_heads", "swa_num_key_value_heads",
            "swa_num_attention_heads", "linear_num_heads", "conv_L_cache", "kv_n_heads", "conv_kernel_size",
            "sconv_kernel_size", "cca_time0", "cca_time1", "global_attn_every_n_layers", "number_of_conv_states")),
    (65536, ("head_dim", "kv_channels", "v_head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "kv_lora_rank",
             "q_lora_rank", "index_head_dim", "linear_key_head_dim", "linear_value_head_dim", "mamba_head_dim",
             "mamba_d_state", "ssm_state_size", "mamba_dt_rank", "n_routed_experts", "num_local_experts",
             "num_experts", "moe_num_experts", "num_experts_per_tok", "num_experts_per_token", "moe_top_k",
             "top_k", "global_head_dim", "swa_head_dim", "swa_v_head_dim", "linear_head_dim")),
    (2**20, ("hidden_size", "n_embd", "d_model", "embed_dim")),
    (2**24, ("vocab_size", "padded_vocab_size", "intermediate_size", "moe_intermediate_size",
             "intermediate_size_mlp", "shared_expert_intermediate_size", "n_inner", "ffn_hidden_size")),
    (2**30, ("sliding_window", "attention_chunk_size", "index_topk", "sliding_window_size", "local_attention")),
)
FIELD_LIMITS = {name: limit for limit, names in _LIMIT_GROUPS for name in names}
DEFAULT_FIELD_LIMIT = 2**40      # any other integer field (max_position_embeddings, ...)


@lru_cache(maxsize=1)
def hf_defaults() -> dict:
    """model_type -> the defaults its transformers config class declares (data/hf_defaults.json)."""
    return read_json("hf_defaults.json")["defaults"]


class Fields:
    """Reads a config's fields, falling back to the family's transformers defaults, and keeps
    which fields it took from the file (``from_config``) and which from the defaults
    (``from_defaults``, with their values) for Model.reading."""

    def __init__(self, cfg: dict, model_type: str, *, defaults_type: str | None = None):
        self.cfg = cfg
        self.model_type = model_type
        self.defaults = hf_defaults().get(defaults_type or model_type, {})
        self.from_config: dict[str, None] = {}
        self.from_defaults: dict[str, object] = {}

    def has(self, name: str) -> bool:
        return self.cfg.get(name) is not None

    def get(self, *names: str, default=MISSING):
        """The first of ``names`` set in the config, else the family default.

        A field the config sets to null stays null (``default``), as in the config class:
        Mistral-7B-v0.3's ``"sliding_window": null`` is not the class default of 4096; a field the
        class derives from others when it is None (DERIVED_DEFAULTS) is derived, absent or null.
        """
        for name in names:
            if self.cfg.get(name) is not None:
                self.from_config[name] = None
                return self.cfg[name]
        derived = DERIVED_DEFAULTS.get(self.model_type, {})
        for name in names:
            if name in derived:
                self.from_defaults[name] = value = derived[name](self)
                return value
        if any(name in self.cfg for name in names):
            if default is not MISSING:
                return default
            raise ConfigError(f"config field {names[0]!r} is null and model_type {self.model_type!r} needs it")
        kwargs = KWARG_DEFAULTS.get(self.model_type, {})
        for name in names:
            if name in kwargs:
                self.from_defaults[name] = kwargs[name]
                return kwargs[name]
        for name in names:
            if self.defaults.get(name) is not None:
                self.from_defaults[name] = self.defaults[name]
                return self.defaults[name]
        if default is not MISSING:
            return default
        raise ConfigError(f"config field {names[0]!r} is missing"
                          + (f" (also looked for {', '.join(map(repr, names[1:]))})" if len(names) > 1 else "")
                          + f" and model_type {self.model_type!r} has no default for it")

    def int(self, *names: str, default=MISSING, minimum: int = 1) -> int:
        """An integer field in [minimum, its FIELD_LIMITS bound]; the message names both."""
        value = self.get(*names, default=default)
        if value is None:
            return value  # type: ignore[return-value]  # only where the caller gave default=None
        field = next((n for n in names if self.cfg.get(n) is not None), names[0])
        return check_int(field, value, minimum=minimum)

    def flag(self, name: str, default: bool = False) -> bool:
        """A boolean field (true/false, as JSON writes it)."""
        value = self.get(name, default=default)
        if not isinstance(value, bool):
            raise ConfigError(f"config field {name!r} must be true or false, got {show_value(value)}")
        return value


def check_int(field: str, value, *, minimum: int = 1) -> int:
    """``value`` as the integer field ``field``: in [minimum, its FIELD_LIMITS bound]."""
    limit = FIELD_LIMITS.get(field, DEFAULT_FIELD_LIMIT)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= limit:
        raise ConfigError(f"config field {field!r} must be an integer from {minimum} to {limit:,}, "
                          f"got {show_value(value)}")
    return value
