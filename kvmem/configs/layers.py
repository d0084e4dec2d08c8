"""Each layer's attention kind and cache shape, by the layout rule of its family.

The kinds follow the rules the transformers 5.x config classes apply when ``layer_types``
is absent (``configuration_<family>.py``; kvmem.configs.families names each family's):

    generic      all sliding when ``sliding_window`` is set, else all chunked when
                 ``attention_chunk_size`` is set, else all full (cache_utils.py
                 get_layer_types_and_kwargs: Mistral-7B-v0.1, Phi-3-mini-4k)
    alternate    gemma2, gpt_oss: sliding if (i + 1) % 2
    pattern      gemma3_text, cohere2: sliding if (i + 1) % sliding_window_pattern (6 -> 5:1)
    qwen2        sliding if use_sliding_window and i >= max_window_layers
    gemma3n      full if (i + 1) % 5 == 0, else sliding; the last num_kv_shared_layers read the
                 last earlier layer of the same type
    gemma4       sliding if (i + 1) % 6, the last layer always full; full layers take
                 head_dim = global_head_dim (512 by default) and, with attention_k_eq_v,
                 num_global_key_value_heads KV heads, unless per_layer_config overrides them;
                 kv sharing as gemma3n (configuration_gemma4.py kv_sharing_modes)
    llama4       chunked (attention_chunk_size) where no_rope_layers[i], else full;
                 no_rope_layers[i] = (i + 1) % no_rope_layer_interval != 0
    interval     qwen3_next, qwen3_5: linear if (i + 1) % full_attention_interval, else full
    cohere2_moe  the first_k_dense_replace layers sliding if (i + 1) % prefix_dense_sliding_window_pattern,
                 the rest if (i + 1) % sliding_window_pattern
    jamba        attention if i % attn_layer_period == attn_layer_offset, else mamba
    nemotron_h   hybrid_override_pattern (or layers_block_type): "*" attention, "M" mamba2,
                 "-"/"E" no cache
    mimo         MiMo-V2-Flash: hybrid_layer_pattern (1 sliding, 0 full), else full at layer 0
                 and every 6th; sliding layers take swa_num_key_value_heads (modeling_mimo_v2_flash.py
                 hard-codes 2 x num_key_value_heads), swa_head_dim / swa_v_head_dim and a window of
                 sliding_window_size + 1 (configuration_mimo_v2_flash.py)
    kimi_linear  linear_attn_config: full_attn_layers MLA, kda_layers KDA (1-indexed), else full
                 where i and i % 4 == 0 (configuration_kimi_linear.py)
    minimax      attn_type_list (1 full, 0 lightning), else full if (i + 1) % 2
                 (configuration_minimax.py; the published MiniMax-M1/Text-01 files give the list)
    lfm2         layer_types ("conv" short convolutions), else full_attn_idxs (configuration_lfm2.py)
    granite_hybrid  layer_types / layers_block_type ("mamba", "attention"), else all Mamba2
                 (configuration_granitemoehybrid.py)
    bamba        attention at attn_layer_indices, else Mamba2 (configuration_bamba.py)
    falcon_h1    every layer "hybrid": attention and a Mamba2 mixer side by side, both cached
                 (cache_utils.py LinearAttentionAndFullAttentionLayer)
    decilm       Nemotron-NAS (Llama-3.3-Nemotron-Super-49B): block_configs[i].attention; no cache
                 where no_op or replace_with_linear, else num_attention_heads // n_heads_in_group
                 KV heads (vllm/model_executor/models/nemotron_nas.py; no transformers class)
    MLA families every attention layer caches the latent; an indexer key of index_head_dim
                 where the config sets index_topk (DeepSeek sparse attention, as vLLM keys it), on
                 the layers whose indexer_types entry is "full" (configuration_glm_moe_dsa.py:
                 index_topk_pattern "F"/"S", else full where max(i - offset + 1, 0) % freq == 0)

``head_dim`` from the config always wins over hidden_size / num_attention_heads.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..model import CHUNKED, FULL, LINEAR, MLA, NONE, SHARED, SLIDING, Layer
from ..units import show_value
from .families import Family
from .fields import Fields, check_int
from .states import recurrent_state

__all__ = ["attention_shape", "layers_of", "layer_count", "LAYER_TYPE_NAMES"]

LAYER_TYPE_NAMES = {
    "full_attention": FULL, "attention": FULL, "global": FULL, "full": FULL,
    "sliding_attention": SLIDING, "sliding": SLIDING, "local": SLIDING,
    "chunked_attention": CHUNKED,
    "linear_attention": LINEAR, "mamba": LINEAR, "mamba2": LINEAR, "conv": LINEAR,
    "hybrid": "hybrid",          # attention and a Mamba2 mixer side by side in one layer (Falcon-H1)
    "indexed_attention": FULL,   # DeepSeek sparse attention: a full layer whose indexer picks the keys
    "moe": NONE, "mlp": NONE, "dummy": NONE,
}

# modeling_nemotron_h.py: "*" attention, "M" mamba2, "-" MLP, "E" MoE (no cache).
_NEMOTRON_BLOCKS = {"*": FULL, "M": LINEAR, "-": NONE, "E": NONE}


def layer_count(f: Fields) -> int:
    """num_hidden_layers (or its spellings); Nemotron-3 configs give only ``layers_block_type``."""
    if f.model_type == "nemotron_h" and not any(f.has(n) for n in ("num_hidden_layers", "n_layer")):
        blocks = f.cfg.get("layers_block_type")
        if isinstance(blocks, list):
            return check_int("num_hidden_layers", len(blocks))
    return f.int("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def attention_shape(f: Fields, family: Family) -> tuple[int, int, int, int]:
    """(query heads, KV heads, K head dim, V head dim) of the model's usual attention layer."""
    heads = f.int("num_attention_heads", "n_head", "num_heads", "n_heads", "attention_heads")
    if family.layout == "falcon":
        if f.get("new_decoder_architecture", default=False):
            kv_heads = f.int("num_kv_heads", default=heads)
        else:
            kv_heads = 1 if f.get("multi_query", default=True) else heads
    elif family.layout == "multi_query":
        # modeling_gpt_bigcode.py: one K/V head when multi_query, else one per query head
        kv_heads = 1 if f.flag("multi_query", default=True) else heads
    elif family.layout == "mpt":
        # modeling_mpt.py MptAttention: K and V have all n_heads heads (attn_config sets none of its own)
        attn = f.get("attn_config", default={}) or {}
        if not isinstance(attn, dict) or attn.get("kv_n_heads") not in (None, heads):
            raise ConfigError(f"config field 'attn_config' must be an object without a kv_n_heads of its own, "
                              f"got {show_value(attn)}")
        kv_heads = heads
    elif family.layout == "dbrx":
        # modeling_dbrx.py DbrxAttention: num_key_value_heads = attn_config.kv_n_heads
        attn = f.get("attn_config", default={}) or {}
        if not isinstance(attn, dict):
            raise ConfigError(f"config field 'attn_config' must be an object, got {show_value(attn)}")
        kv_heads = check_int("attn_config.kv_n_heads", attn.get("kv_n_heads", 1))
    else:
        kv_heads = f.int("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                         default=heads)
    if heads % kv_heads:
        raise ConfigError(f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv_heads})")
    head_dim = f.int("head_dim", "kv_channels", default=None)
    if head_dim is None and family.mla and f.has("qk_nope_head_dim"):
        # MLA: a query/key head is qk_nope_head_dim + qk_rope_head_dim wide, whatever hidden / heads
        # is (GLM-4.7-Flash: hidden 2048, 20 heads, 192 + 64); the cache holds the latent instead
        head_dim = f.int("qk_nope_head_dim") + f.int("qk_rope_head_dim")
    elif head_dim is None:
        hidden = f.int("hidden_size", "n_embd", "d_model")
        if hidden % heads:
            raise ConfigError(f"hidden_size ({hidden}) is not divisible by num_attention_heads ({heads}) "
                              "and the config has no head_dim")
        head_dim = hidden // heads
    if family.layout == "nemotron_h" and f.has("attention_head_dim") and f.int("attention_head_dim") != head_dim:
        # modeling_nemotron_h.py reads head_dim; the older attention_head_dim must agree with it
        raise ConfigError(f"config field 'attention_head_dim' ({f.int('attention_head_dim')}) contradicts "
                          f"head_dim ({head_dim}) for model_type 'nemotron_h'")
    v_head_dim = head_dim if family.mla else f.int("v_head_dim", default=head_dim)
    return heads, kv_heads, head_dim, v_head_dim


# Layouts whose config classes also spell the layer map ``layers_block_type``.
_BLOCK_TYPE_LAYOUTS = ("nemotron_h", "granite_hybrid", "bamba")


def _named_kinds(f: Fields, layout: str, n_layers: int) -> list[str] | None:
    """``layer_types`` (or ``layers_block_type``) read name by name; None when absent."""
    field = "layer_types"
    given = f.get("layer_types", default=None)
    if given is None and layout in _BLOCK_TYPE_LAYOUTS:
        field, given = "layers_block_type", f.get("layers_block_type", default=None)
    if given is None:
        return None
    if not isinstance(given, list) or len(given) != n_layers:
        raise ConfigError(f"{field} must list one type per layer ({n_layers}), "
                          f"got {len(given) if isinstance(given, list) else show_value(given)}")
    kinds = []
    for i, name in enumerate(given):
        kind = LAYER_TYPE_NAMES.get(name) if isinstance(name, str) else None
        if kind is None or (kind == "hybrid") != (layout == "falcon_h1"):
            raise ConfigError(f"{field}[{i}] is {show_value(name)}: a layer type kvmem does not read for "
                              f"model_type {f.model_type!r}")
        kinds.append(kind)
    return kinds


def _layout_kinds(f: Fields, layout: str, n_layers: int) -> list[str]:
    """The family rule, for configs without ``layer_types``."""
    if layout == "nemotron_h":
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
    if layout == "jamba":
        period, offset = f.int("attn_layer_period"), f.int("attn_layer_offset", minimum=0)
        return [FULL if i % period == offset else LINEAR for i in range(n_layers)]
    if layout == "interval":
        interval = f.int("full_attention_interval")
        return [LINEAR if (i + 1) % interval else FULL for i in range(n_layers)]
    if layout == "llama4":
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
    if layout == "gemma3n":
        return [FULL if (i + 1) % 5 == 0 else SLIDING for i in range(n_layers)]
    if layout == "mimo":
        pattern = f.get("hybrid_layer_pattern", default=None)
        if pattern is None:
            return [FULL if i == 0 or not (i + 1) % 6 else SLIDING for i in range(n_layers)]
        return [SLIDING if v else FULL for v in _flags("hybrid_layer_pattern", pattern, n_layers)]
    if layout == "minimax":
        types = f.get("attn_type_list", default=None)
        if types is None:
            return [FULL if (i + 1) % 2 else LINEAR for i in range(n_layers)]
        return [FULL if v else LINEAR for v in _flags("attn_type_list", types, n_layers)]
    if layout == "kimi_linear":
        return _kimi_kinds(f, n_layers)
    if layout == "decoder" and not f.flag("is_decoder"):
        raise ConfigError(f"config field 'is_decoder' is false: a {f.model_type} encoder caches nothing (kvmem sizes "
                          "it run as a decoder, is_decoder true)")
    if layout == "cohere2_moe":
        dense = f.int("first_k_dense_replace", default=0, minimum=0)
        prefix, pattern = f.int("prefix_dense_sliding_window_pattern"), f.int("sliding_window_pattern")
        return ([SLIDING if (i + 1) % prefix else FULL for i in range(min(dense, n_layers))]
                + [SLIDING if (i + 1) % pattern else FULL for i in range(n_layers - min(dense, n_layers))])
    if layout == "granite_hybrid":
        return [LINEAR] * n_layers
    if layout == "bamba":
        attention = set(_indices("attn_layer_indices", f.get("attn_layer_indices", default=[]) or [], n_layers,
                                 first=0))
        return [FULL if i in attention else LINEAR for i in range(n_layers)]
    if layout == "falcon_h1":
        return ["hybrid"] * n_layers
    if layout == "decilm":
        return [FULL if heads else NONE for heads in _decilm_groups(f, n_layers)]
    if layout == "lfm2":
        full = f.get("full_attn_idxs", default=None)
        if full is None:
            raise ConfigError(f"model_type {f.model_type!r} needs layer_types or full_attn_idxs")
        full = set(_indices("full_attn_idxs", full, n_layers, first=0))
        return [FULL if i in full else LINEAR for i in range(n_layers)]
    if layout == "gemma4":
        return [SLIDING if (i + 1) % 6 else FULL for i in range(n_layers)]
    if f.get("sliding_window", default=None) is None:
        chunked = f.get("attention_chunk_size", default=None)
        return [CHUNKED if chunked else FULL] * n_layers
    if layout == "alternate":
        return [SLIDING if (i + 1) % 2 else FULL for i in range(n_layers)]
    if layout == "pattern":
        pattern = f.int("sliding_window_pattern", "_sliding_window_pattern", "global_attn_every_n_layers")
        return [SLIDING if (i + 1) % pattern else FULL for i in range(n_layers)]
    if layout == "qwen2":
        if not f.get("use_sliding_window", default=False):
            return [FULL] * n_layers
        first = f.int("max_window_layers", minimum=0)
        return [SLIDING if i >= first else FULL for i in range(n_layers)]
    return [SLIDING] * n_layers


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


def _decilm_groups(f: Fields, n_layers: int) -> list[int]:
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


def _kimi_kinds(f: Fields, n_layers: int) -> list[str]:
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


def _kinds(f: Fields, family: Family, n_layers: int) -> list[str]:
    kinds = _named_kinds(f, family.layout, n_layers)
    if kinds is None:
        kinds = _layout_kinds(f, family.layout, n_layers)
    if family.layout == "gemma4" and kinds[-1] != FULL:
        kinds[-1] = FULL   # Gemma4TextConfig.__post_init__: "Last layer must use full_attention"
    return kinds


def _shared_sources(f: Fields, kinds: list[str]) -> dict[int, int]:
    """Gemma-3n, Gemma 4: layer index -> the last earlier layer of the same type, whose KV it reads."""
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


_OVERRIDES = {"head_dim", "num_key_value_heads"}


def _gemma4_shapes(f: Fields, kinds: list[str], kv_heads: int, head_dim: int) -> dict[int, tuple[int, int]]:
    """Gemma 4: layer -> (KV heads, head dim) where it differs from the sliding layers'.

    configuration_gemma4.py: without ``per_layer_config`` every full layer gets head_dim =
    global_head_dim (512 by default) and, only when attention_k_eq_v, num_global_key_value_heads
    KV heads; modeling_gemma4.py Gemma4TextAttention reads config.per_layer_config[layer_idx].
    With attention_k_eq_v the V projection is the K projection, but K and V are normed
    separately and both cached (two tensors of the same shape).
    """
    given = f.get("per_layer_config", default=None)
    if given is None:
        g_dim = f.int("global_head_dim", default=512)
        g_heads = f.int("num_global_key_value_heads", default=None) if f.flag("attention_k_eq_v") else None
        return {i: (g_heads or kv_heads, g_dim) for i, kind in enumerate(kinds) if kind == FULL}
    if not isinstance(given, dict):
        raise ConfigError(f"config field 'per_layer_config' must map layer indices to overrides, "
                          f"got {show_value(given)}")
    shapes = {}
    for key, overrides in given.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else key
        if not isinstance(index, int) or not 0 <= index < len(kinds) or not isinstance(overrides, dict):
            raise ConfigError(f"per_layer_config[{show_value(key)}] must be a layer index below {len(kinds)} "
                              f"with a dict of overrides")
        unread = sorted(set(overrides) & _CACHE_OVERRIDES - _OVERRIDES)
        if unread:
            raise ConfigError(f"per_layer_config[{key}] overrides {', '.join(map(repr, unread))}, which kvmem "
                              "does not read per layer")
        shapes[index] = (check_int("num_key_value_heads", overrides.get("num_key_value_heads", kv_heads)),
                         check_int("head_dim", overrides.get("head_dim", head_dim)))
    return shapes


# per_layer_config keys that would change a layer's cache (refused unless in _OVERRIDES)
_CACHE_OVERRIDES = {"head_dim", "num_key_value_heads", "num_attention_heads", "sliding_window", "v_head_dim",
                    "attention_chunk_size", "layer_types", "kv_lora_rank", "hidden_size"}


def _mimo_shapes(f: Fields, kinds: list[str], kv_heads: int, head_dim: int,
                 v_head_dim: int) -> dict[int, tuple[int, int, int]]:
    """MiMo-V2-Flash: sliding layer -> (KV heads, K dim, V dim).

    The published config names them (swa_num_key_value_heads, swa_head_dim, swa_v_head_dim; vLLM
    and SGLang read them); transformers' modeling_mimo_v2_flash.py MiMoV2FlashAttention hard-codes
    2 x num_key_value_heads and the full layers' dims, which agree with the published file.
    """
    heads = f.int("swa_num_key_value_heads", default=2 * kv_heads)
    k_dim = f.int("swa_head_dim", default=head_dim)
    v_dim = f.int("swa_v_head_dim", default=v_head_dim)
    return {i: (heads, k_dim, v_dim) for i, kind in enumerate(kinds) if kind == SLIDING}


def _window(f: Fields, family: Family) -> int:
    """The sliding window in tokens held (0: none). MiMo-V2-Flash's sliding_window_size counts the
    tokens before the query: configuration_mimo_v2_flash.py sets sliding_window to it + 1. Gemma 4
    with use_bidirectional_attention "all" holds sliding_window // 2 + 1 (configuration_gemma4.py)."""
    if family.layout == "mimo" and f.has("sliding_window_size"):
        return f.int("sliding_window_size") + 1
    window = f.int("sliding_window", default=0, minimum=0) or 0
    if family.layout == "gemma4" and window:
        bidirectional = f.get("use_bidirectional_attention", default=None)
        if bidirectional not in (None, "all", "vision"):
            raise ConfigError(f"config field 'use_bidirectional_attention' must be null, 'vision' or 'all', "
                              f"got {show_value(bidirectional)}")
        if bidirectional == "all":
            return window // 2 + 1    # Gemma4TextConfig.__post_init__: exclusive bounds for flash attention
    return window


def _indexer_layers(f: Fields, n_layers: int) -> list[bool]:
    """Which MLA layers keep a sparse-attention indexer key (configuration_glm_moe_dsa.py)."""
    if f.get("index_topk", default=None) is None:
        return [False] * n_layers
    types = f.get("indexer_types", default=None)
    pattern = f.get("index_topk_pattern", default=None)
    if types is None and pattern is not None:
        if not isinstance(pattern, str) or set(pattern) - {"F", "S"}:
            raise ConfigError(f"config field 'index_topk_pattern' must be a string of 'F' and 'S', "
                              f"got {show_value(pattern)}")
        types = ["full" if c == "F" else "shared" for c in pattern]
    if types is None:
        freq = max(f.int("index_topk_freq", default=1), 1)
        offset = f.int("index_skip_topk_offset", default=2, minimum=0)
        return [max(i - offset + 1, 0) % freq == 0 for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers or set(types) - {"full", "shared"}:
        raise ConfigError(f"config field 'indexer_types' must list 'full' or 'shared' for each of the {n_layers} "
                          f"layers, got {show_value(types)}")
    return [t == "full" for t in types]


def _mla_layer(f: Fields, indexer: bool) -> Layer:
    """The latent of an MLA layer, with the sparse-attention indexer key where it keeps one.

    vLLM keys the indexer cache on the config's index_topk (vllm/model_executor/models/
    deepseek_v2.py: is_v32 = hasattr(config, "index_topk")); transformers' DSA families cache it
    beside the latent ([batch, seq, index_head_dim], cache_utils.py DynamicIndexedLayer).
    """
    return Layer(MLA, kv_lora_rank=f.int("kv_lora_rank"), qk_rope_head_dim=f.int("qk_rope_head_dim"),
                 index_head_dim=f.int("index_head_dim") if indexer else 0)


def layers_of(f: Fields, family: Family, n_layers: int, kv_heads: int, head_dim: int,
              v_head_dim: int) -> tuple[Layer, ...]:
    """Every layer's Layer: kind, heads and widths, window, shared source, state."""
    kinds = _kinds(f, family, n_layers)
    if family.mla:
        kinds = [MLA if k == FULL else k for k in kinds]
    shapes = {}
    if family.layout == "gemma4":
        shapes = {i: (heads, dim, dim) for i, (heads, dim) in _gemma4_shapes(f, kinds, kv_heads, head_dim).items()}
    elif family.layout == "mimo":
        shapes = _mimo_shapes(f, kinds, kv_heads, head_dim, v_head_dim)
    elif family.layout == "decilm":
        heads = f.int("num_attention_heads")
        groups = _decilm_groups(f, n_layers)
        for i, group in enumerate(groups):
            if group and heads % group:
                raise ConfigError(f"block_configs[{i}].attention.n_heads_in_group ({group}) does not divide "
                                  f"num_attention_heads ({heads})")
        shapes = {i: (heads // group, head_dim, v_head_dim) for i, group in enumerate(groups) if group}
    window = _window(f, family)
    chunk = f.int("attention_chunk_size", default=0, minimum=0) or 0
    state = recurrent_state(f, family) if LINEAR in kinds or "hybrid" in kinds else None
    if SLIDING in kinds and window < 1:
        raise ConfigError("layer_types has sliding_attention layers but sliding_window is not set")
    if CHUNKED in kinds and chunk < 1:
        raise ConfigError("layer_types has chunked_attention layers but attention_chunk_size is not set")
    sources = _shared_sources(f, kinds) if family.layout in ("gemma3n", "gemma4") else {}
    indexers = _indexer_layers(f, n_layers) if MLA in kinds else ()
    layers = []
    for i, kind in enumerate(kinds):
        if i in sources:
            layers.append(Layer(SHARED, shared_with=sources[i]))
        elif kind == MLA:
            layers.append(_mla_layer(f, indexers[i]))
        elif kind == LINEAR:
            layers.append(Layer(LINEAR, state=state))
        elif kind == "hybrid":
            layers.append(Layer(FULL, kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=v_head_dim, state=state))
        elif kind == NONE:
            layers.append(Layer(NONE))
        else:
            heads, k_dim, v_dim = shapes.get(i, (kv_heads, head_dim, v_head_dim))
            layers.append(Layer(kind, kv_heads=heads, head_dim_k=k_dim, head_dim_v=v_dim,
                                window=window if kind == SLIDING else chunk if kind == CHUNKED else 0))
    return tuple(layers)
