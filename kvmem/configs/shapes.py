"""Per-layer shapes where a family's layers differ from its config's one shape (kvmem.configs.layers
asks here; the kinds come from kvmem.configs.kinds):

    gemma4       full layers take head_dim = global_head_dim (512 by default) and, with
                 attention_k_eq_v, num_global_key_value_heads KV heads, unless per_layer_config
                 overrides them; K and V are both cached even with attention_k_eq_v
                 (configuration_gemma4.py, modeling_gemma4.py Gemma4TextAttention)
    mimo         sliding layers: swa_num_key_value_heads (modeling_mimo_v2_flash.py hard-codes
                 2 x num_key_value_heads), swa_head_dim / swa_v_head_dim, a window of
                 sliding_window_size + 1 (configuration_mimo_v2_flash.py)
    decilm       num_attention_heads // n_heads_in_group KV heads per layer (nemotron_nas.py)
    mistral_large4  MLA; a NoPE layer (no_rope_layers 0) caches the latent without the rope key, a
                 layer whose kv_source_layers entry is an earlier layer reads that layer's cache
                 (modeling_mistral_large4.py MistralLarge4Attention)
    gemma3n, gemma4  the last num_kv_shared_layers read the last earlier layer of the same type
    falcon_h1    every layer attention with a Mamba2 state beside it
    inkling      sliding ("hybrid_sliding") layers: swa_num_key_value_heads x swa_head_dim for K and V
                 (modeling_inkling.py InklingAttention), a window of sliding_window_size; every
                 layer short convolutions beside its attention (kvmem.configs.states)
    exaone_moe   a sliding layer's window is sliding_windows[i] where the file lists them (K-EXAONE)
    inkling_loop as inkling, plus a copy of the looped layers for every pass after the first
    zaya         every layer attention with ZAYA's convolution and delayed-value state beside it
    minimax_m3   sparse layers: K and V as the full layers', and one indexer key of index_head_dim
    modernbert   a window of sliding_window, else local_attention // 2 (configuration_modernbert_decoder.py)
    deepseek_v4  compressed layers: K=V rows in a sliding window, compressed rows on CSA / HCA
                 layers (kvmem.configs.compressed)
    MLA families every attention layer caches the latent; an indexer key of index_head_dim
                 where the config sets index_topk (DeepSeek sparse attention, as vLLM keys it), on
                 the layers whose indexer_types entry is "full" (configuration_glm_moe_dsa.py:
                 index_topk_pattern "F"/"S", else full where max(i - offset + 1, 0) % freq == 0;
                 HY-V4 without indexer_types: layer 0 and where (i - 1) % 4 == 0)
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError
from ..layer import FULL, SLIDING, Layer
from ..units import show_value
from .fields import Fields, check_int

__all__ = ["shared_sources", "minimax_m3_index_dim", "kv_sources", "gemma4_shapes", "mimo_shapes", "inkling_shapes",
           "layer_windows", "indexer_layers", "loop_copies"]


def shared_sources(f: Fields, kinds: Sequence[str]) -> dict[int, int]:
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


def minimax_m3_index_dim(f: Fields) -> int:
    """MiniMax-M3's indexer key width: sparse_attention_config.sparse_index_dim, else index_head_dim
    (configuration_minimax_m3_vl.py maps the legacy name over the flat one); MiniMaxM3VLIndexer
    caches one head of it per token ([batch, 1, seq, index_head_dim])."""
    sparse = f.get("sparse_attention_config", default=None) or {}
    if "sparse_index_dim" in sparse:
        return check_int("sparse_attention_config.sparse_index_dim", sparse["sparse_index_dim"])
    return f.int("index_head_dim")


def kv_sources(f: Fields, n_layers: int, indexers: list[bool]) -> dict[int, int]:
    """Mistral Large 4: layer index -> the earlier layer whose latent it reads (kv_source_layers).

    configuration_mistral_large4.py kv_sharing_modes: a layer that reads another's latent and
    runs its own indexer ("reuse_but_indexer") still caches an indexer key of its own, which
    kvmem does not size alone: refused by name.
    """
    given = f.get("kv_source_layers", default=None)
    if given is None:
        return {}
    if not isinstance(given, list) or len(given) != n_layers or any(
            isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= i or given[s] != s
            for i, s in enumerate(given)):
        raise ConfigError(f"config field 'kv_source_layers' must list, for each of the {n_layers} layers, itself or "
                          f"an earlier layer that is its own source, got {show_value(given)}")
    sources = {i: s for i, s in enumerate(given) if s != i}
    with_indexer = [i for i in sources if indexers[i]]
    if with_indexer:
        raise ConfigError(f"layer {with_indexer[0]} reads layer {sources[with_indexer[0]]}'s latent but runs its own "
                          "indexer (indexer_types 'full'): it caches an indexer key alone, which kvmem does not size")
    return sources


_OVERRIDES = {"head_dim", "num_key_value_heads"}


def gemma4_shapes(f: Fields, kinds: Sequence[str], kv_heads: int, head_dim: int) -> dict[int, tuple[int, int]]:
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


def mimo_shapes(f: Fields, kinds: Sequence[str], kv_heads: int, head_dim: int,
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


def inkling_shapes(f: Fields, kinds: Sequence[str], kv_heads: int, head_dim: int) -> dict[int, tuple[int, int, int]]:
    """Inkling: sliding layer -> (KV heads, K dim, V dim); modeling_inkling.py InklingAttention takes
    swa_num_key_value_heads and swa_head_dim for K and V where layer_types says "hybrid_sliding"."""
    heads, dim = f.int("swa_num_key_value_heads", default=kv_heads), f.int("swa_head_dim", default=head_dim)
    return {i: (heads, dim, dim) for i, kind in enumerate(kinds) if kind == "hybrid_sliding"}


def layer_windows(f: Fields, kinds: Sequence[str]) -> dict[int, int]:
    """K-EXAONE: sliding layer -> its own window from ``sliding_windows`` (one entry per layer, null on
    full layers), as the published files give them and vLLM 0.33's exaone_moe.py reads them
    (transformers 5.24's ExaoneMoe reads the one sliding_window: its modes refuse windows that differ)."""
    given = f.get("sliding_windows", default=None)
    if given is None:
        return {}
    if not isinstance(given, list) or len(given) != len(kinds):
        raise ConfigError(f"config field 'sliding_windows' must list one window per layer ({len(kinds)}), "
                          f"got {show_value(given)}")
    windows = {}
    for i, (kind, window) in enumerate(zip(kinds, given, strict=True)):
        if kind == SLIDING:
            windows[i] = check_int(f"sliding_windows[{i}]", window)
    return windows


# HY-V4's config classes fill an absent indexer_types with their own rule, not GLM-5's:
# transformers@5.24.0 models/hy_v4/configuration_hy_v4.py#L151-L155, hy_v4_vl/configuration_hy_v4_vl.py#L190-L194
HY_V4_TYPES = ("hy_v4", "hy_v4_vl_text")


def indexer_layers(f: Fields, n_layers: int) -> list[bool]:
    """Which MLA layers keep a sparse-attention indexer key: indexer_types "full", else the family's
    default (configuration_glm_moe_dsa.py; HY-V4's own rule, HY_V4_TYPES). A "shared" layer reuses an
    earlier layer's top-k and builds no indexer (transformers@5.24.0 models/hy_v4/modeling_hy_v4.py#L370-L371),
    so its cache_utils.py DynamicIndexedLayer keeps no indexer key."""
    if f.get("index_topk", default=None) is None:
        return [False] * n_layers
    types = f.get("indexer_types", default=None)
    if types is None and f.model_type in HY_V4_TYPES:
        # layer 0 and every layer with (i - 1) % 4 == 0 run their own indexer: 0, 1, 5, 9, ...
        return [i == 0 or (i - 1) % 4 == 0 for i in range(n_layers)]
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


def loop_copies(f: Fields, layers: list[Layer]) -> list[Layer]:
    """Inkling-2-Loop: each pass after the first over layers [start, end) caches in its own copies of
    them, appended after the model's layers (modeling_inkling2_loop.py Inkling2LoopTextModel.forward);
    loop_config's core_start, core_end and num_passes replace the loop_* fields
    (configuration_inkling2_loop.py)."""
    loop = f.get("loop_config", default=None) or {}
    if not isinstance(loop, dict):
        raise ConfigError(f"config field 'loop_config' must be an object, got {show_value(loop)}")
    start = check_int("loop_config.core_start", loop.get("core_start", f.int("loop_layer_index_start")))
    end = check_int("loop_config.core_end", loop.get("core_end", f.int("loop_layer_index_end")))
    passes = check_int("loop_config.num_passes", loop.get("num_passes", f.int("loop_num_passes")))
    if not 0 < start <= end:
        raise ConfigError(f"the looped layers [{start}, {end}) must start after layer 0 and not end before they "
                          "start (configuration_inkling2_loop.py)")
    # as the modeling code slices them: cache.layers[start:end], empty past the last layer
    if passes > 64:
        raise ConfigError(f"loop_num_passes ({passes}) must be at most 64")
    return layers[start:end] * (passes - 1)
