"""What a transformers 5.24 config class derives where a config file leaves a field out, when its
declared default (data/hf_defaults.json) does not say it: a value computed from other fields, or a
layer pattern of the class's own. Each rule cites the __post_init__ lines it follows
(transformers@5.24.0 models/<family>/configuration_<family>.py). Found by leaving each declared field
out in turn and comparing with the class (kvmem/oracles/transformers.py absent_fields).
"""

from __future__ import annotations

from collections.abc import Callable

from ..layer import FULL, LINEAR, SLIDING, Kind

__all__ = ["DERIVED_DEFAULTS", "KWARG_DEFAULTS", "DERIVED_LAYER_TYPES"]


def _olmo_hybrid_key_dim(f) -> int:
    # int(0.75 * hidden_size / linear_num_key_heads), in integers
    return (3 * f.int("hidden_size")) // (4 * f.int("linear_num_key_heads"))


# Fields a config class derives from others where the file leaves them out or sets them to null (its
# __post_init__ tests "is None"), which hf_defaults.json's declared defaults (None) cannot say:
# model_type -> field -> rule of the file's kvmem.configs.fields.Fields (untyped: fields.py imports this, and
# an estimate imports no typing).
# transformers@5.24.0 models/minicpm3/configuration_minicpm3.py#L124-L125,
# models/olmo_hybrid/configuration_olmo_hybrid.py#L131-L138
DERIVED_DEFAULTS: dict[str, dict[str, Callable[..., object]]] = {
    "minicpm3": {"v_head_dim": lambda f: f.int("hidden_size") // f.int("num_attention_heads")},
    "olmo_hybrid": {"linear_num_key_heads": lambda f: f.int("num_attention_heads"),
                    "linear_num_value_heads": lambda f: f.int("num_attention_heads"),
                    "linear_key_head_dim": _olmo_hybrid_key_dim,
                    "linear_value_head_dim": lambda f: 2 * f.int("linear_key_head_dim")},
}

# Fields a config class takes as a kwarg with a default of its own where the file leaves them out (a
# null one reaches the rule as None, which the class cannot use): model_type -> field -> value.
# transformers@5.24.0 models/cohere2/configuration_cohere2.py#L95-L100,
# qwen3_next/configuration_qwen3_next.py#L129-L133, qwen3_5/configuration_qwen3_5.py#L111-L115,
# qwen3_5_moe/configuration_qwen3_5_moe.py#L123-L127
KWARG_DEFAULTS: dict[str, dict[str, int]] = {
    "cohere2": {"sliding_window_pattern": 4},
    **{t: {"full_attention_interval": 4} for t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")},
}


# Config classes that fill an absent layer_types with a pattern of their own, which their layout's rule
# (generic: all sliding when sliding_window is set) does not give: layer i of n, as the __post_init__ of
# transformers@5.24.0 models/<family>/configuration_<family>.py at the lines given writes it.
_F, _S, _L = FULL, SLIDING, LINEAR
_MUSE = (lambda i, n: _F if (n - 1 - i) % 4 == 0 else _S)     # full every 4th layer counted back from the last
_GRANITE_SWA = (lambda i, _n: _F if i % 4 == 0 else _S)
DERIVED_LAYER_TYPES: dict[str, tuple[Callable[[int, int], Kind], str]] = {
    "olmo3": (lambda i, _n: _S if (i + 1) % 4 else _F, "configuration_olmo3.py#L92-L95: full where (i + 1) % 4 == 0"),
    "beam": (lambda i, n: _F if (i + 1) % 6 == 0 or i == n - 1 else _S,
             "configuration_beam.py#L112-L117: full where (i + 1) % 6 == 0, and the last layer"),
    "cwm": (lambda i, _n: _F if i % 4 == 0 else _S, "configuration_cwm.py#L97-L103: full where i % 4 == 0"),
    "flint": (lambda i, n: _F if i < 2 or i % 4 == 1 or i == n - 1 else _S,
              "configuration_flint.py#L104-L108: full on layers 0 and 1, where i % 4 == 1, and the last"),
    "granite_swa": (_GRANITE_SWA, "configuration_granite_swa.py#L104-L107: full where i % 4 == 0"),
    "granitemoe_swa": (_GRANITE_SWA, "configuration_granitemoe_swa.py#L109-L112: full where i % 4 == 0"),
    "kolibri1": (lambda i, _n: _F if (i + 1) % 5 == 0 else _S,
                 "configuration_kolibri1.py#L99-L102: full where (i + 1) % 5 == 0"),
    "mellum": (lambda _i, _n: _F, "configuration_mellum.py#L116-L117: every layer full"),
    "cohere_compass_text": (lambda _i, _n: _F, "configuration_cohere_compass.py#L113-L114: every layer full, "
                                             "sliding_window or not"),
    "muse_glimmer_text": (_MUSE, "configuration_muse_glimmer.py#L147-L151: full where (n - 1 - i) % 4 == 0"),
    "muse_spark_text": (_MUSE, "configuration_muse_spark.py#L165-L169: full where (n - 1 - i) % 4 == 0"),
    "vaultgemma": (lambda i, _n: _S if (i + 1) % 2 else _F,
                   "configuration_vaultgemma.py#L92-L95: sliding where (i + 1) % 2"),
    "olmo_hybrid": (lambda i, n: _F if i % 4 == 3 or (n < 4 and i == n - 1) else _L,
                    "configuration_olmo_hybrid.py#L121-L129: full where i % 4 == 3 (the last layer when no layer "
                    "is), else linear"),
    "lara_mini": (lambda i, _n: (_L, _S, _L, _F, _S)[i % 5],
                  "configuration_lara_mini.py#L122-L131: linear, sliding, linear, full, sliding, repeated"),
    "lfm3": (lambda i, _n: _F if i % 4 == 2 else _S if i % 4 == 0 and i > 0 else _L,
             "configuration_lfm3.py#L94-L98: full where i % 4 == 2, sliding where i % 4 == 0 past layer 0, "
             "else conv"),
}
