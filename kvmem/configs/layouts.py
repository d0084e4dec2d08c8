"""The layout rules: each family's layer kinds when its config gives no ``layer_types``.

LAYOUTS maps each layout (kvmem.configs.families names each family's) to its rule and states
it, with the transformers 5.x config class (``configuration_<family>.py``) it follows;
``layout_table()`` prints them all. A layout not in LAYOUTS is ``generic``: all sliding when
``sliding_window`` is set, else all chunked when ``attention_chunk_size`` is set, else all full
(cache_utils.py get_layer_types_and_kwargs). A new layout adds one rule function and one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ConfigError
from ..layer import CHUNKED, FULL, LINEAR, NONE, SLIDING, Kind
from ..units import show_value
from .fields import Fields, check_int

__all__ = ["LAYOUTS", "Layout", "layout_kinds", "layout_table", "decilm_groups", "rope_layers"]

HYBRID, SPARSE = Kind.HYBRID, Kind.SPARSE
HYBRID_SLIDING = Kind.HYBRID_SLIDING

# modeling_nemotron_h.py: "*" attention, "M" mamba2, "-" MLP, "E" MoE (no cache).
_NEMOTRON_BLOCKS = {"*": FULL, "M": LINEAR, "-": NONE, "E": NONE}


# ----------------------------------------------------------------------------- the layout rules
# Each takes the config's fields and the layer count and gives every layer's kind; LAYOUTS below
# names each with its rule in words and the config class it follows.

def _nemotron_h(f: Fields, n_layers: int) -> list[Kind]:
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


def _jamba(f: Fields, n_layers: int) -> list[Kind]:
    period, offset = f.int("attn_layer_period"), f.int("attn_layer_offset", minimum=0)
    return [FULL if i % period == offset else LINEAR for i in range(n_layers)]


def _interval(f: Fields, n_layers: int) -> list[Kind]:
    interval = f.int("full_attention_interval")
    return [LINEAR if (i + 1) % interval else FULL for i in range(n_layers)]


def _llama4(f: Fields, n_layers: int) -> list[Kind]:
    rope = rope_layers(f, n_layers)
    chunked = f.get("attention_chunk_size", default=None)
    return [CHUNKED if chunked and rope[i] else FULL for i in range(n_layers)]


def _gemma3n(_f: Fields, n_layers: int) -> list[Kind]:
    return [FULL if (i + 1) % 5 == 0 else SLIDING for i in range(n_layers)]


def _mimo(f: Fields, n_layers: int) -> list[Kind]:
    pattern = f.get("hybrid_layer_pattern", default=None)
    if pattern is None:
        return [FULL if i == 0 or not (i + 1) % 6 else SLIDING for i in range(n_layers)]
    return [SLIDING if v else FULL for v in _flags("hybrid_layer_pattern", pattern, n_layers)]


def _minimax(f: Fields, n_layers: int) -> list[Kind]:
    types = f.get("attn_type_list", default=None)
    if types is None:
        return [FULL if (i + 1) % 2 else LINEAR for i in range(n_layers)]
    return [FULL if v else LINEAR for v in _flags("attn_type_list", types, n_layers)]


def _bailing(f: Fields, n_layers: int) -> list[Kind]:
    group = f.int("layer_group_size")
    return [FULL if (i + 1) % group == 0 else LINEAR for i in range(n_layers)]


def _decoder(f: Fields, n_layers: int) -> list[Kind]:
    if not f.flag("is_decoder"):
        raise ConfigError(f"config field 'is_decoder' is false: a {f.model_type} encoder caches nothing (kvmem sizes "
                          "it run as a decoder, is_decoder true)")
    return _generic(f, n_layers)


def _cohere2_moe(f: Fields, n_layers: int) -> list[Kind]:
    dense = f.int("first_k_dense_replace", default=0, minimum=0)
    prefix, pattern = f.int("prefix_dense_sliding_window_pattern"), f.int("sliding_window_pattern")
    return ([SLIDING if (i + 1) % prefix else FULL for i in range(min(dense, n_layers))]
            + [SLIDING if (i + 1) % pattern else FULL for i in range(n_layers - min(dense, n_layers))])


def _all_linear(_f: Fields, n_layers: int) -> list[Kind]:
    return [LINEAR] * n_layers


def _all_full(_f: Fields, n_layers: int) -> list[Kind]:
    return [FULL] * n_layers


def _all_hybrid(_f: Fields, n_layers: int) -> list[Kind]:
    return [HYBRID] * n_layers


def _bamba(f: Fields, n_layers: int) -> list[Kind]:
    attention = set(_indices("attn_layer_indices", f.get("attn_layer_indices", default=[]) or [], n_layers, first=0))
    return [FULL if i in attention else LINEAR for i in range(n_layers)]


def _inkling(f: Fields, n_layers: int) -> list[Kind]:
    local = f.get("local_layer_ids", default=None)
    local = set(range(n_layers)) - {i for i in range(n_layers) if not (i + 1) % 6} if local is None else \
        set(_indices("local_layer_ids", local, n_layers, first=0))
    return [HYBRID_SLIDING if i in local else HYBRID for i in range(n_layers)]


def _smollm3(f: Fields, n_layers: int) -> list[Kind]:
    if not (f.flag("use_sliding_window") and f.get("sliding_window", default=None) is not None):
        return [FULL] * n_layers
    return [FULL if rope else SLIDING for rope in rope_layers(f, n_layers)]


def _minimax_m3(f: Fields, n_layers: int) -> list[Kind]:
    sparse = f.get("sparse_attention_config", default=None) or {}
    if not isinstance(sparse, dict):
        raise ConfigError(f"config field 'sparse_attention_config' must be an object, got {show_value(sparse)}")
    freq = sparse.get("sparse_attention_freq")
    if freq is None:
        return [FULL] * n_layers
    if not isinstance(freq, list) or len(freq) != n_layers or any(v not in (0, 1) or isinstance(v, float)
                                                                   for v in freq):
        raise ConfigError(f"config field 'sparse_attention_config.sparse_attention_freq' must list 0 or 1 (or "
                          f"false / true) for each of the {n_layers} layers, got {show_value(freq)}")
    return [SPARSE if v else FULL for v in freq]


def _modernbert(f: Fields, n_layers: int) -> list[Kind]:
    every = f.int("global_attn_every_n_layers", default=3)
    return [SLIDING if i % every else FULL for i in range(n_layers)]


def _decilm(f: Fields, n_layers: int) -> list[Kind]:
    return [FULL if heads else NONE for heads in decilm_groups(f, n_layers)]


def _lfm2(f: Fields, n_layers: int) -> list[Kind]:
    full = f.get("full_attn_idxs", default=None)
    if full is None:
        raise ConfigError(f"model_type {f.model_type!r} needs layer_types or full_attn_idxs")
    full = set(_indices("full_attn_idxs", full, n_layers, first=0))
    return [FULL if i in full else LINEAR for i in range(n_layers)]


def _gemma4(_f: Fields, n_layers: int) -> list[Kind]:
    return [SLIDING if (i + 1) % 6 else FULL for i in range(n_layers)]


def _generic(f: Fields, n_layers: int) -> list[Kind]:
    if f.get("sliding_window", default=None) is None:
        chunked = f.get("attention_chunk_size", default=None)
        return [CHUNKED if chunked else FULL] * n_layers
    return [SLIDING] * n_layers


def _alternate(_f: Fields, n_layers: int) -> list[Kind]:
    return [SLIDING if (i + 1) % 2 else FULL for i in range(n_layers)]


def _pattern(f: Fields, n_layers: int) -> list[Kind]:
    pattern = f.int("sliding_window_pattern", "_sliding_window_pattern", "global_attn_every_n_layers")
    return [SLIDING if (i + 1) % pattern else FULL for i in range(n_layers)]


def _qwen2(f: Fields, n_layers: int) -> list[Kind]:
    if not f.get("use_sliding_window", default=False):
        return [FULL] * n_layers
    first = f.int("max_window_layers", minimum=0)
    return [SLIDING if i >= first else FULL for i in range(n_layers)]


@dataclass(frozen=True)
class Layout:
    """One layout's rule (fields, layer count -> kinds) and the rule in words, with its source.
    ``windowed``: the rule applies only where ``sliding_window`` is set; without it the layers are
    the generic rule's (all chunked with ``attention_chunk_size``, else all full)."""

    rule: Callable[[Fields, int], list[Kind]]
    text: str
    windowed: bool = False


LAYOUTS: dict[str, Layout] = {
    "generic": Layout(_generic, "all sliding when sliding_window is set, else all chunked when "
                      "attention_chunk_size is set, else all full (cache_utils.py get_layer_types_and_kwargs: "
                      "Mistral-7B-v0.1, Phi-3-mini-4k)"),
    "decoder": Layout(_decoder, "as generic, run as a decoder: is_decoder false is refused (an encoder caches "
                      "nothing)"),
    "alternate": Layout(_alternate, "gemma2, gpt_oss: sliding if (i + 1) % 2", windowed=True),
    "pattern": Layout(_pattern, "gemma3_text, cohere2: sliding if (i + 1) % sliding_window_pattern (6 -> 5:1)",
                      windowed=True),
    "exaone_moe": Layout(_pattern, "as pattern (per-layer windows: kvmem.configs.layers)", windowed=True),
    "qwen2": Layout(_qwen2, "sliding if use_sliding_window and i >= max_window_layers", windowed=True),
    "gemma3n": Layout(_gemma3n, "full if (i + 1) % 5 == 0, else sliding; the last num_kv_shared_layers read the "
                      "last earlier layer of the same type"),
    "gemma4": Layout(_gemma4, "sliding if (i + 1) % 6, the last layer always full; kv sharing as gemma3n "
                     "(configuration_gemma4.py kv_sharing_modes)"),
    "llama4": Layout(_llama4, "chunked (attention_chunk_size) where no_rope_layers[i], else full; "
                     "no_rope_layers[i] = (i + 1) % no_rope_layer_interval != 0"),
    "interval": Layout(_interval, "qwen3_next, qwen3_5: linear if (i + 1) % full_attention_interval, else full"),
    "cohere2_moe": Layout(_cohere2_moe, "the first_k_dense_replace layers sliding if (i + 1) % "
                          "prefix_dense_sliding_window_pattern, the rest if (i + 1) % sliding_window_pattern"),
    "jamba": Layout(_jamba, "attention if i % attn_layer_period == attn_layer_offset, else mamba"),
    "nemotron_h": Layout(_nemotron_h, "hybrid_override_pattern (or layers_block_type): '*' attention, 'M' mamba2, "
                         "'-'/'E' no cache"),
    "mimo": Layout(_mimo, "MiMo-V2-Flash: hybrid_layer_pattern (1 sliding, 0 full), else full at layer 0 and every "
                   "6th (configuration_mimo_v2_flash.py)"),
    "kimi_linear": Layout(lambda f, n: _kimi_kinds(f, n), "linear_attn_config: full_attn_layers MLA, kda_layers KDA "
                          "(1-indexed), else full where i and i % 4 == 0 (configuration_kimi_linear.py)"),
    "minimax": Layout(_minimax, "attn_type_list (1 full, 0 lightning), else full if (i + 1) % 2 "
                      "(configuration_minimax.py; the published MiniMax-M1/Text-01 files give the list)"),
    "lfm2": Layout(_lfm2, "layer_types ('conv' short convolutions), else full_attn_idxs (configuration_lfm2.py)"),
    "granite_hybrid": Layout(_all_linear, "layer_types / layers_block_type ('mamba', 'attention'), else all Mamba2 "
                             "(configuration_granitemoehybrid.py)"),
    "bamba": Layout(_bamba, "attention at attn_layer_indices, else Mamba2 (configuration_bamba.py)"),
    "mamba": Layout(_all_linear, "attention-free: every layer a Mamba mixer"),
    "mamba2": Layout(_all_linear, "attention-free: every layer a Mamba2 mixer"),
    "falcon_h1": Layout(_all_hybrid, "every layer 'hybrid': attention and a Mamba2 mixer side by side, both cached "
                        "(cache_utils.py LinearAttentionAndFullAttentionLayer)"),
    "inkling": Layout(_inkling, "layer_types 'hybrid' / 'hybrid_sliding' (attention, full or sliding, beside "
                      "short convolutions), else sliding at local_layer_ids, else where (i + 1) % 6 "
                      "(configuration_inkling.py)"),
    "inkling_loop": Layout(_inkling, "as inkling, its looped layers copied (kvmem.configs.layers loop_copies)"),
    "zaya": Layout(_all_hybrid, "layer_types 'hybrid' / 'hybrid_sliding', else every layer 'hybrid' "
                   "(configuration_zaya.py)"),
    "smollm3": Layout(_smollm3, "layer_types, else sliding on the NoPE layers (no_rope_layers 0) when "
                      "use_sliding_window and sliding_window are set, else full (configuration_smollm3.py)"),
    "listed": Layout(_all_full, "layer_types, else every layer full whatever sliding_window says (laguna: its config "
                     "class fills layer_types with full_attention)"),
    "minimax_m3": Layout(_minimax_m3, "layer_types ('minimax_m3_sparse': a full layer with an indexer key), else "
                         "sparse_attention_config.sparse_attention_freq (1 sparse), else all full "
                         "(configuration_minimax_m3_vl.py)"),
    "bailing": Layout(_bailing, "linear (KDA) unless (i + 1) % layer_group_size == 0 "
                      "(configuration_bailing_hybrid.py)"),
    "modernbert": Layout(_modernbert, "sliding unless i % global_attn_every_n_layers == 0 (3 by default) "
                         "(configuration_modernbert_decoder.py)"),
    "decilm": Layout(_decilm, "Nemotron-NAS (Llama-3.3-Nemotron-Super-49B): block_configs[i].attention; no cache "
                     "where no_op or replace_with_linear (vllm/model_executor/models/nemotron_nas.py; transformers "
                     "has no class for it)"),
    "step3p5": Layout(_all_full, "layer_types, else every layer full (configuration_step3p7.py "
                      "Step3p7TextConfig.__post_init__)"),
}


def layout_kinds(f: Fields, layout: str, n_layers: int) -> list[Kind]:
    """The family rule (LAYOUTS; generic where the layout has none), for configs without ``layer_types``."""
    entry = LAYOUTS.get(layout, LAYOUTS["generic"])
    if entry.windowed and f.get("sliding_window", default=None) is None:
        return _generic(f, n_layers)
    return entry.rule(f, n_layers)


def layout_table() -> str:
    """LAYOUTS as text: one layout a line, its rule in words (what the module docstring once held)."""
    width = max(map(len, LAYOUTS))
    return "\n".join(f"{name:<{width}}  {entry.text}" for name, entry in LAYOUTS.items())


def rope_layers(f: Fields, n_layers: int) -> list[int]:
    """Per layer 1 where it uses RoPE: ``no_rope_layers`` (despite its name, 1 = RoPE), else every
    layer but each no_rope_layer_interval-th (4 by default; configuration_llama4.py,
    configuration_mistral_large4.py)."""
    rope = f.get("no_rope_layers", default=None)
    if rope and (not isinstance(rope, list) or len(rope) != n_layers
                 or any(v not in (0, 1) or isinstance(v, float) for v in rope)):
        raise ConfigError(f"config field 'no_rope_layers' must list 0 or 1 for each of the {n_layers} layers, "
                          f"got {show_value(rope)}")
    if not rope:
        interval = f.int("no_rope_layer_interval", default=4)
        rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
    return rope


def _flags(field: str, values, n_layers: int) -> list[int]:
    """A per-layer list of 0/1 flags, one per layer."""
    if not isinstance(values, list) or len(values) != n_layers or any(v not in (0, 1) or isinstance(v, (bool, float))
                                                                      for v in values):
        raise ConfigError(f"config field {field!r} must list 0 or 1 for each of the {n_layers} layers, "
                          f"got {show_value(values)}")
    return values


def _indices(field: str, values, n_layers: int, *, first: int) -> list[int]:
    """Layer indices (0- or 1-based as ``first`` says) as 0-based indices, each in range once."""
    if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, int)
                                           or not first <= v < n_layers + first for v in values):
        raise ConfigError(f"config field {field!r} must list layer numbers from {first} to {n_layers - 1 + first}, "
                          f"got {show_value(values)}")
    if len(set(values)) != len(values):
        raise ConfigError(f"config field {field!r} lists a layer twice: {show_value(values)}")
    return [v - first for v in values]


_DECILM_UNREAD = ("window_length", "num_sink_tokens", "sparsify", "unshifted_sink",
                  "use_prefill_window_in_sink_attention")


def decilm_groups(f: Fields, n_layers: int) -> list[int]:
    """Nemotron-NAS: per layer its n_heads_in_group (0: the block has no attention cache)."""
    blocks = f.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != n_layers:
        raise ConfigError(f"config field 'block_configs' must list one block per layer ({n_layers}), "
                          f"got {show_value(blocks)}")
    groups = []
    for i, block in enumerate(blocks):
        attention = block.get("attention") if isinstance(block, dict) else None
        if not isinstance(attention, dict):
            raise ConfigError(f"block_configs[{i}].attention must be an object, got {show_value(attention)}")
        unread = [name for name in _DECILM_UNREAD if attention.get(name) not in (None, False, 0, [], {})]
        if unread:
            raise ConfigError(f"block_configs[{i}].attention sets {', '.join(map(repr, unread))}, which kvmem "
                              "does not read")
        if attention.get("no_op") or attention.get("replace_with_linear"):
            groups.append(0)
        else:
            groups.append(check_int(f"block_configs[{i}].attention.n_heads_in_group",
                                    attention.get("n_heads_in_group")))
    return groups


def _kimi_kinds(f: Fields, n_layers: int) -> list[Kind]:
    """Kimi-Linear: linear_attn_config's full_attn_layers / kda_layers, 1-indexed, cover every layer."""
    lac = f.get("linear_attn_config", default=None)
    if lac is None:
        return [FULL if i and i % 4 == 0 else LINEAR for i in range(n_layers)]
    if not isinstance(lac, dict):
        raise ConfigError(f"config field 'linear_attn_config' must be an object, got {show_value(lac)}")
    full = set(_indices("linear_attn_config.full_attn_layers", lac.get("full_attn_layers", []), n_layers, first=1))
    kda = set(_indices("linear_attn_config.kda_layers", lac.get("kda_layers", []), n_layers, first=1))
    if full & kda or len(full | kda) != n_layers:
        raise ConfigError(f"linear_attn_config's full_attn_layers and kda_layers must name each of the {n_layers} "
                          "layers exactly once")
    return [FULL if i in full else LINEAR for i in range(n_layers)]
