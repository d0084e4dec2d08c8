"""Each layer's cache shape: KV heads, K and V widths, window, MLA latent, shared source, state.

Where a family's layers differ in shape, kvmem.configs.shapes gives each layer's (the kinds come
from kvmem.configs.kinds).

``head_dim`` from the config always wins over hidden_size / num_attention_heads.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..layer import CHUNKED, FULL, LINEAR, MLA, NONE, SHARED, SLIDING, Layer
from ..units import show_value
from .compressed import compressed_layers
from .families import Family
from .fields import Fields, check_int
from .kinds import kinds_of
from .layouts import decilm_groups, rope_layers
from .shapes import (
    HY_V4_TYPES,
    gemma4_shapes,
    indexer_layers,
    inkling_shapes,
    kv_sources,
    layer_windows,
    loop_copies,
    mimo_shapes,
    minimax_m3_index_dim,
    shared_sources,
)
from .states import hybrid_state, recurrent_state

__all__ = ["attention_shape", "layers_of"]


ATTENTION_FREE = ("mamba", "mamba2")
# Config classes that set head_dim = hidden_size // num_attention_heads whatever the file says
# (transformers@5.24.0 models/cohere2/configuration_cohere2.py#L91-L92,
# cohere_compass/configuration_cohere_compass.py#L118-L119, deepseek_ocr2/configuration_deepseek_ocr2.py#L246)
HEAD_DIM_FROM_HIDDEN = ("cohere2", "cohere_compass_text", "deepseek_ocr2_text")
INKLING = ("inkling", "inkling_loop")


def _attn_config(f: Fields) -> dict:
    """MPT's and DBRX's nested attn_config (an object, or absent)."""
    attn = f.get("attn_config", default={}) or {}
    if not isinstance(attn, dict):
        raise ConfigError(f"config field 'attn_config' must be an object, got {show_value(attn)}")
    return attn


def attention_shape(f: Fields, family: Family) -> tuple[int, int, int, int]:
    """(query heads, KV heads, K head dim, V head dim) of the model's usual attention layer
    (all 0 for an attention-free family: Mamba2's num_heads / head_dim are its SSM's)."""
    if family.layout in ATTENTION_FREE:
        return 0, 0, 0, 0
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
        if _attn_config(f).get("kv_n_heads") not in (None, heads):
            raise ConfigError(f"config field 'attn_config.kv_n_heads' is not read for model_type 'mpt' (its K and "
                              f"V have all {heads} heads), got {show_value(_attn_config(f)['kv_n_heads'])}")
        kv_heads = heads
    elif family.layout == "dbrx":
        # modeling_dbrx.py DbrxAttention: num_key_value_heads = attn_config.kv_n_heads
        kv_heads = check_int("attn_config.kv_n_heads", _attn_config(f).get("kv_n_heads", 1))
    elif family.layout == "step3p5":
        # configuration_step3p7.py attribute_map: num_attention_groups is num_key_value_heads
        # (vllm@v0.33.0 step3p5.py#L443 reads config.num_attention_groups)
        kv_heads = f.int("num_key_value_heads", "num_attention_groups")
        if f.has("num_attention_groups") and f.int("num_attention_groups") != kv_heads:
            raise ConfigError(f"num_attention_groups ({f.int('num_attention_groups')}) and num_key_value_heads "
                              f"({kv_heads}) are one field of model_type 'step3p5' and disagree")
    elif f.model_type in HY_V4_TYPES:
        # MLA: the config class sets num_key_value_heads = num_attention_heads whatever the file says
        # (transformers@5.24.0 models/hy_v4/configuration_hy_v4.py#L138-L139,
        # hy_v4_vl/configuration_hy_v4_vl.py#L177-L178), not the declared default of 32
        kv_heads = heads
    else:
        kv_heads = f.int("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                         default=heads)
    if heads % kv_heads:
        raise ConfigError(f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv_heads})")
    head_dim = None if f.model_type in HEAD_DIM_FROM_HIDDEN else f.int("head_dim", "kv_channels", default=None)
    nope = f.int("qk_nope_head_dim", default=None) if family.mla and head_dim is None else None
    if nope is not None:
        # MLA: a query/key head is qk_nope_head_dim + qk_rope_head_dim wide, whatever hidden / heads
        # is (GLM-4.7-Flash: hidden 2048, 20 heads, 192 + 64; the class default where the file has
        # none); the cache holds the latent instead
        head_dim = nope + f.int("qk_rope_head_dim")
    elif head_dim is None:
        hidden = f.int("hidden_size", "n_embd", "d_model", "embed_dim")
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


def _window(f: Fields, family: Family) -> int:
    """The sliding window in tokens held (0: none). MiMo-V2-Flash's sliding_window_size counts the
    tokens before the query: configuration_mimo_v2_flash.py sets sliding_window to it + 1. Gemma 4
    with use_bidirectional_attention "all" holds sliding_window // 2 + 1 (configuration_gemma4.py)."""
    if family.layout == "mimo" and f.has("sliding_window_size"):
        return f.int("sliding_window_size") + 1
    if family.layout in INKLING:
        # configuration_inkling.py attribute_map: sliding_window is sliding_window_size
        return f.int("sliding_window_size", "sliding_window", default=0, minimum=0) or 0
    if family.layout == "modernbert" and not f.has("sliding_window"):
        # ModernBertDecoderConfig.__post_init__ sets sliding_window = local_attention // 2, then a
        # sliding_window the file gives (a kwarg, set after it) replaces it
        local = f.int("local_attention", default=0, minimum=0) or 0
        return local // 2
    window = f.int("sliding_window", default=0, minimum=0) or 0
    if family.layout == "gemma4" and window:
        bidirectional = f.get("use_bidirectional_attention", default=None)
        if bidirectional not in (None, "all", "vision"):
            raise ConfigError(f"config field 'use_bidirectional_attention' must be null, 'vision' or 'all', "
                              f"got {show_value(bidirectional)}")
        if bidirectional == "all":
            return window // 2 + 1    # Gemma4TextConfig.__post_init__: exclusive bounds for flash attention
    return window


def _mla_layer(f: Fields, indexer: bool, rope: bool = True) -> Layer:
    """The latent of an MLA layer, with the sparse-attention indexer key where it keeps one.

    vLLM keys the indexer cache on the config's index_topk (vllm/model_executor/models/
    deepseek_v2.py: is_v32 = hasattr(config, "index_topk")); transformers' DSA families cache it
    beside the latent ([batch, seq, index_head_dim], cache_utils.py DynamicIndexedLayer).
    """
    return Layer(MLA, kv_lora_rank=f.int("kv_lora_rank"), qk_rope_head_dim=f.int("qk_rope_head_dim") if rope else 0,
                 index_head_dim=f.int("index_head_dim") if indexer else 0)


def layers_of(f: Fields, family: Family, n_layers: int, kv_heads: int, head_dim: int,
              v_head_dim: int) -> tuple[Layer, ...]:
    """Every layer's Layer: kind, heads and widths, window, shared source, state."""
    if family.layout == "deepseek_v4":
        return compressed_layers(f, n_layers)
    kinds = kinds_of(f, family, n_layers)
    if family.mla:
        kinds = [MLA if k == FULL else k for k in kinds]
    shapes = {}
    if family.layout == "gemma4":
        shapes = {i: (heads, dim, dim) for i, (heads, dim) in gemma4_shapes(f, kinds, kv_heads, head_dim).items()}
    elif family.layout == "mimo":
        shapes = mimo_shapes(f, kinds, kv_heads, head_dim, v_head_dim)
    elif family.layout in INKLING:
        shapes = inkling_shapes(f, kinds, kv_heads, head_dim)
    elif family.layout == "decilm":
        heads = f.int("num_attention_heads")
        groups = decilm_groups(f, n_layers)
        for i, group in enumerate(groups):
            if group and heads % group:
                raise ConfigError(f"block_configs[{i}].attention.n_heads_in_group ({group}) does not divide "
                                  f"num_attention_heads ({heads})")
        shapes = {i: (heads // group, head_dim, v_head_dim) for i, group in enumerate(groups) if group}
    window = _window(f, family)
    chunk = f.int("attention_chunk_size", default=0, minimum=0) or 0
    windows = layer_windows(f, kinds) if family.layout == "exaone_moe" else {}
    hybrid = {"hybrid", "hybrid_sliding"} & set(kinds)
    state = recurrent_state(f, family) if LINEAR in kinds or (hybrid and family.layout not in INKLING) else None
    if (SLIDING in kinds or "hybrid_sliding" in kinds) and window < 1:
        raise ConfigError("layer_types has sliding_attention layers but sliding_window is not set")
    if CHUNKED in kinds and chunk < 1:
        raise ConfigError("layer_types has chunked_attention layers but attention_chunk_size is not set")
    sources = shared_sources(f, kinds) if family.layout in ("gemma3n", "gemma4") else {}
    indexers = indexer_layers(f, n_layers) if MLA in kinds else [False] * n_layers
    rope = [1] * n_layers
    if family.layout == "mistral_large4":
        sources = kv_sources(f, n_layers, indexers)
        rope = rope_layers(f, n_layers)     # modeling_mistral_large4.py: a NoPE layer caches no rope key
    layers = []
    for i, kind in enumerate(kinds):
        if i in sources:
            layers.append(Layer(SHARED, shared_with=sources[i]))
        elif kind == MLA:
            layers.append(_mla_layer(f, indexers[i], bool(rope[i])))
        elif kind == LINEAR:
            layers.append(Layer(LINEAR, state=state))
        elif kind in ("hybrid", "hybrid_sliding"):
            heads, k_dim, v_dim = shapes.get(i, (kv_heads, head_dim, v_head_dim))
            sliding = kind == "hybrid_sliding"
            layers.append(Layer(SLIDING if sliding else FULL, kv_heads=heads, head_dim_k=k_dim, head_dim_v=v_dim,
                                window=window if sliding else 0,
                                state=hybrid_state(f, heads, k_dim) if family.layout in INKLING else state))
        elif kind == NONE:
            layers.append(Layer(NONE))
        elif kind == "sparse":
            layers.append(Layer(FULL, kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=v_head_dim,
                                index_head_dim=minimax_m3_index_dim(f)))
        else:
            heads, k_dim, v_dim = shapes.get(i, (kv_heads, head_dim, v_head_dim))
            layers.append(Layer(kind, kv_heads=heads, head_dim_k=k_dim, head_dim_v=v_dim,
                                window=windows.get(i, window) if kind == SLIDING else chunk if kind == CHUNKED else 0))
    if family.layout == "inkling_loop":
        layers += loop_copies(f, layers)
    return tuple(layers)
