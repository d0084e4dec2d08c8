"""The cache layer ("slot") each decoder layer gets in transformers 5.24 and the shapes it hands to it.

``slots(model)`` reads them off kvmem's layer list. What each layer hands to ``cache.update``:

    attention   K [batch, kv_heads, seq, head_dim_k], V [batch, kv_heads, seq, head_dim_v]
                Falcon with new_decoder_architecture broadcasts K/V to all query heads before
                caching: kv_heads = num_attention_heads (modeling_falcon.py, FalconAttention.forward)
    MLA         K slot: the normed latent [batch, 1, seq, kv_lora_rank]; V slot: the rope key
                [batch, 1, seq, qk_rope_head_dim] (modeling_deepseek_v3.py, DeepseekV3Attention);
                DeepSeek-V3.2 also an indexer key [batch, seq, index_head_dim] (update_indexer)
    linear/SSM  conv state [batch, conv_channels, conv_kernel] in the compute dtype (the whole
                kernel, not kernel - 1) and a recurrent state in fp32 (the torch paths compute it
                in fp32): gated DeltaNet [batch, v_heads, k_dim, v_dim], Mamba [batch, inner,
                d_state], Mamba2 [batch, heads, head_dim, d_state], Kimi's KDA [batch, heads,
                head_dim, head_dim] (transformers@v5.24.0 src/transformers/cache_utils.py#L1210-L1298
                LinearAttentionLayer); MiniMax's lightning attention keeps [batch, heads, head_dim,
                head_dim] in the compute dtype and no conv state (modeling_minimax.py); LFM2's short
                convolution a conv state only
    hybrid      Falcon-H1: attention and a Mamba2 mixer in one layer, both cached
                (cache_utils.py#L1301-L1337 LinearAttentionAndFullAttentionLayer); Inkling: attention
                (full or sliding) beside four short convolutions whose state is fp32
                (modeling_inkling.py runs them in fp32); ZAYA: attention beside a conv state of
                kernel - 1 columns (its receptive field less one, as ZayaCCAProjection pads it) and
                the last token's delayed value in the compute dtype (modeling_zaya.py)
    shared/none DummyLayer: nothing (Gemma-3n kv-sharing consumers, Nemotron-H MLP blocks;
                cache_utils.py#L1427-L1465)
    compressed  DeepSeek-V4 (modeling_deepseek_v4.py): every layer one K=V row [batch, 1, seq,
                head_dim]; a sliding_attention layer hands it as K and as V to a
                DynamicSlidingWindowLayer (two copies), DeepseekV4HCACache / CSACache keep one
                (values = keys) beside the compressor's compressed rows, buffers and overlap state
                (kvmem.layer.Compressor; the buffers pin their last projection, growth.py)
"""

from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import dtype
from ...layer import CHUNKED, COMPRESSED, FULL, LINEAR, MLA, NONE, SHARED, SLIDING, Compressor
from ...model import Model

_HF_TYPE = {FULL: "full_attention", SLIDING: "sliding_attention", CHUNKED: "chunked_attention",
            LINEAR: "linear_attention", SHARED: "dummy", NONE: "dummy"}


@dataclass(frozen=True)
class Slot:
    """What one decoder layer hands to its transformers cache layer (per sequence).

    ``kind``: "attention" (DynamicLayer / StaticLayer), "sliding" (the sliding-window classes,
    also used for chunked layers), "linear" (LinearAttentionLayer) or "dummy" (DummyLayer).
    """

    kind: str
    hf_type: str
    heads: int = 0
    k_dim: int = 0
    v_dim: int = 0
    window: int = 0
    index_dim: int = 0
    conv_channels: int = 0
    conv_kernel: int = 0
    recurrent_elements: int = 0
    recurrent_in_compute_dtype: bool = False
    conv_element_bytes: int = 0     # 0: the compute dtype's
    compressor: Compressor | None = None   # DeepSeek-V4's CSA / HCA compressor beside the window

    @property
    def has_state(self) -> bool:
        """An attention layer that also keeps a Mamba mixer's states (LinearAttentionAndFullAttentionLayer)."""
        return self.kind != "linear" and bool(self.conv_kernel or self.recurrent_elements)


# Families whose recurrent state transformers keeps in the compute dtype, not fp32: MiniMax's
# lightning attention allocates it as zeros(..., dtype=value_states.dtype) (modeling_minimax.py
# MiniMaxLightningAttention.forward).
# ZAYA's delayed-value state likewise (modeling_zaya.py: update_recurrent_state(delayed_v_state[:, -1, :]),
# a projection's output).
_STATE_IN_COMPUTE_DTYPE = {"minimax", "zaya"}

# Families whose conv state holds kernel - 1 columns where transformers' LinearAttentionLayer
# otherwise keeps the whole kernel: modeling_zaya.py ZayaCCAProjection pads the state it hands over
# to (cca_time0 - 1) + (cca_time1 - 1) columns, the receptive field of its two convolutions less one.
_CONV_KEEPS_KERNEL_LESS_ONE = {"zaya"}


def _state_fields(model: Model, state) -> dict:
    """A layer's state as Slot fields (none for a layer without one)."""
    if state is None:
        return {}
    less_one = model.model_type in _CONV_KEEPS_KERNEL_LESS_ONE
    return dict(conv_channels=state.conv_channels, conv_kernel=state.conv_kernel - less_one,
                recurrent_elements=state.ssm_elements,
                recurrent_in_compute_dtype=model.model_type in _STATE_IN_COMPUTE_DTYPE,
                conv_element_bytes=dtype(state.conv_dtype).row_bytes(1) if state.conv_dtype else 0)


def _check_windows(model: Model) -> None:
    """transformers 5.24's ExaoneMoe gives every sliding layer the one ``sliding_window``
    (cache_utils.py get_layer_types_and_kwargs); a K-EXAONE file's per-layer ``sliding_windows``
    (which the model's own reading, and vLLM, follow) that differ from it are refused here."""
    if model.model_type != "exaone_moe" or model.config.get("sliding_windows") is None:
        return
    from ...configs.fields import Fields
    scalar = Fields(model.config, model.model_type).get("sliding_window", default=None)
    differ = sorted({layer.window for layer in model.layers if layer.kind == SLIDING} - {scalar})
    if differ:
        raise ValueError(f"transformers 5.24's exaone_moe gives every sliding layer sliding_window ({scalar}); this "
                         f"config's sliding_windows lists others ({', '.join(map(str, differ[:4]))}), which the "
                         "ideal and vllm modes follow: refused in the hf modes")


def slots(model: Model) -> tuple[Slot, ...]:
    """Per layer, the K/V (or state) shapes transformers 5.24 caches for ``model``."""
    _check_windows(model)
    falcon_broadcast = model.model_type == "falcon" and model.facts.new_decoder_architecture
    out = []
    for layer in model.layers:
        if layer.kind.per_head:
            heads = model.num_attention_heads if falcon_broadcast else layer.kv_heads
            kind = "attention" if layer.kind == FULL else "sliding"
            # Falcon-H1, Inkling, ZAYA: a state beside the attention, in the same layer
            # MiniMax-M3's sparse layers: MiniMaxM3VLSparseCacheLayer keeps idx_keys [batch, 1, seq, index_dim]
            hf_type = "minimax_m3_sparse" if layer.index_head_dim else _HF_TYPE[layer.kind]
            out.append(Slot(kind, hf_type, heads, layer.head_dim_k, layer.head_dim_v, window=layer.window,
                            index_dim=layer.index_head_dim, **_state_fields(model, layer.state)))
        elif layer.kind == MLA:
            out.append(Slot("attention", "indexed_attention" if layer.index_head_dim else "full_attention",
                            1, layer.kv_lora_rank, layer.qk_rope_head_dim, index_dim=layer.index_head_dim))
        elif layer.kind == COMPRESSED and layer.compressor is None:
            # modeling_deepseek_v4.py: a sliding_attention layer hands kv as both K and V to a
            # DynamicSlidingWindowLayer, which concatenates each: two copies of the one row
            out.append(Slot("sliding", "sliding_attention", 1, layer.head_dim_k, layer.head_dim_k, window=layer.window))
        elif layer.kind == COMPRESSED:
            # DeepseekV4HCACache / DeepseekV4CSACache: one cat, values = keys, and the compressor's state
            hf_type = "compressed_sparse_attention" if layer.compressor.overlap else "heavily_compressed_attention"
            out.append(Slot("sliding", hf_type, 1, layer.head_dim_k, 0, window=layer.window,
                            compressor=layer.compressor))
        elif layer.kind == LINEAR:
            out.append(Slot("linear", "linear_attention", **_state_fields(model, layer.state)))
        else:
            out.append(Slot("dummy", "dummy"))
    return tuple(out)
