"""What each layer hands to its cache, read from the transformers config object.

The shapes are read the way transformers' modeling files read the config (each rule names its
file), independently of kvmem's own config reader (kvmem.configs); the toy engine's come from
the kvmem Model itself. A plan is per token (attention) or per sequence (linear-attention
state); ``buffer_elements`` sizes the one input buffer the steps' K/V are views of.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..layer import FULL
from ..model import Model


@dataclass(frozen=True)
class LayerPlan:
    kind: str                      # "attention", "linear", "dummy"
    k_shape: tuple = ()            # per token: (heads, k_dim)
    v_shape: tuple = ()
    index_dim: int = 0
    conv: tuple = ()               # (channels, kernel)
    recurrent: tuple = ()          # per sequence, fp32


def _attention_shape(text) -> tuple[tuple, tuple, int]:
    """(K (heads, dim), V (heads, dim), indexer dim) as the family's attention module caches them."""
    if getattr(text, "kv_lora_rank", None):
        # modeling_deepseek_v3.py: cache.update(latent [B,1,S,kv_lora_rank], rope key [B,1,S,rope])
        return (1, text.kv_lora_rank), (1, text.qk_rope_head_dim), 0
    heads = text.num_attention_heads
    if text.model_type == "falcon":
        # modeling_falcon.py: num_kv_heads = num_heads if new_decoder_architecture else self.num_kv_heads
        multi_query = getattr(text, "multi_query", True)
        own = text.num_kv_heads if (text.new_decoder_architecture or not multi_query) else 1
        kv_heads = heads if text.new_decoder_architecture else own
    else:
        kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return (kv_heads, head_dim), (kv_heads, head_dim), 0


def _linear_shape(text) -> tuple[tuple, tuple]:
    """(conv (channels, kernel), recurrent state shape) per sequence, from the modeling files."""
    t = text.model_type
    if t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        # modeling_qwen3_next.py GatedDeltaNet: conv_dim = 2 key_dim + value_dim; state [nv, dk, dv]
        nk, nv = text.linear_num_key_heads, text.linear_num_value_heads
        dk, dv = text.linear_key_head_dim, text.linear_value_head_dim
        return (2 * nk * dk + nv * dv, text.linear_conv_kernel_dim), (nv, dk, dv)
    if t == "jamba":
        # modeling_jamba.py JambaMambaMixer: conv over intermediate_size, state [inner, d_state]
        inner = text.mamba_expand * text.hidden_size
        return (inner, text.mamba_d_conv), (inner, text.mamba_d_state)
    if t == "nemotron_h":
        # modeling_nemotron_h.py NemotronHMamba2Mixer: conv_dim = inner + 2 n_groups d_state
        inner = text.mamba_num_heads * text.mamba_head_dim
        conv = inner + 2 * text.n_groups * text.ssm_state_size
        return (conv, text.conv_kernel), (text.mamba_num_heads, text.mamba_head_dim, text.ssm_state_size)
    raise ValueError(f"measure does not know the linear-attention state layout of model_type {t!r}")


def plan(config, cache) -> list[LayerPlan]:
    """One plan per layer of a transformers cache object, in layer order."""
    from transformers.cache_utils import DummyLayer, LinearAttentionCacheLayerMixin
    text = config.get_text_config(decoder=True)
    plans = []
    for layer in cache.layers:
        if isinstance(layer, DummyLayer):
            plans.append(LayerPlan("dummy"))
        elif isinstance(layer, LinearAttentionCacheLayerMixin):
            conv, recurrent = _linear_shape(text)
            plans.append(LayerPlan("linear", conv=conv, recurrent=recurrent))
        else:
            k, v, _ = _attention_shape(text)
            index = text.index_head_dim if hasattr(layer, "update_indexer") else 0
            plans.append(LayerPlan("attention", k, v, index_dim=index))
    return plans


def toy_plan(model: Model) -> list[LayerPlan]:
    """The seed's cache: every layer full attention with the Model's per-head K/V."""
    kinds = {layer.kind for layer in model.layers}
    if kinds != {FULL}:
        raise ValueError(f"engine 'toy' is the seed's cache, every layer full attention with per-head K/V; "
                         f"{model.name} has {model.kinds}: measure it with engine='hf-dynamic'")
    return [LayerPlan("attention", (layer.kv_heads, layer.head_dim_k), (layer.kv_heads, layer.head_dim_v))
            for layer in model.layers]


def buffer_elements(plans, *, batch: int, prompt: int) -> tuple[int, int]:
    """Elements of the compute-dtype input buffer and of the fp32 state buffer (the prefill's)."""
    compute = state = 0
    for p in plans:
        if p.kind == "attention":
            need = batch * prompt * (p.k_shape[0] * p.k_shape[1] + p.v_shape[0] * p.v_shape[1] + p.index_dim)
            compute = max(compute, need)
        elif p.kind == "linear":
            compute = max(compute, batch * p.conv[0] * prompt)
            recurrent = batch
            for size in p.recurrent:
                recurrent *= size
            state = max(state, recurrent)
    return compute, state
