"""MiniMax-M3 under TensorRT-LLM: MiniMaxM3KVCacheManagerV2, K/V on every layer and a paged index key on the
sparse ones (cache.py applies it).

The registry runs it: MiniMaxM3SparseForCausalLM and MiniMaxM3SparseForConditionalGeneration -> modeling_minimaxm3
(trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L77-L78). Its sparse attention config routes the cache to
the sparse managers' factory (trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L289-L291), which for M3 is
MiniMaxM3KVCacheManagerV2, a KVCacheManagerV2 subclass (#L634-L636 names it so). The manager is read at 0462117e,
the version the code index stores (its file is not stored at 065ff9e9; b4a375d8's copy lays the buffers out the
same way):
  K/V        every layer, (kv_heads + tp - 1) // tp heads x head_dim, K and V, the cache dtype (KVCacheManagerV2)
  INDEX_KEY  on the sparse layers, one head of sparse_index_dim a token in bf16 (fp16 / fp32 when the cache is),
             in the same blocks and life cycle as K/V; no index V (disable_index_value on every sparse layer)
"""

from __future__ import annotations

from ...dtypes import dtype
from ...model import Model

__all__ = ["M3_TYPES", "ARCHITECTURES", "is_m3", "check_m3", "sparse_layers", "index_row_bytes"]

M3_TYPES = ("minimax_m3", "minimax_m3_text", "minimax_m3_vl_text")
# trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L77-L78: the two MiniMax-M3 architectures it registers
ARCHITECTURES = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")
# trtllm@0462117e tensorrt_llm/_torch/attention_backend/sparse/minimax_m3/cache_manager.py#L161-L176: without
# explicit ids the sparse layers are range(3, num_layers) and the index width the sparse config's else 128; the
# layer list is not read from the checkpoint's sparse_attention_freq
FIRST_SPARSE_LAYER = 3
INDEX_DIM = 128
# trtllm@0462117e tensorrt_llm/_torch/attention_backend/sparse/minimax_m3/cache_manager.py#L253-L259
# _torch_dtype_for_index_cache: fp16 and fp32 caches keep their dtype for the index key, any other is bf16
# (bytes an element from kvmem.dtypes)
_INDEX_DTYPES = ("fp16", "fp32")


def is_m3(model: Model) -> bool:
    return model.model_type in M3_TYPES


def sparse_layers(model: Model) -> range:
    return range(FIRST_SPARSE_LAYER, model.num_layers)


def index_row_bytes(k_dtype_name: str) -> int:
    """Bytes one token's index key takes on a sparse layer.

    trtllm@0462117e tensorrt_llm/_torch/attention_backend/sparse/minimax_m3/cache_manager.py#L213-L230
    _extra_buffers_per_layer: a Role.INDEX_KEY buffer of 1 x sparse_index_dim x the element size a token, per block
    of tokens_per_block, on every local sparse layer."""
    return dtype(k_dtype_name if k_dtype_name in _INDEX_DTYPES else "bf16").row_bytes(INDEX_DIM)


def check_m3(model: Model) -> None:
    """Configs whose MiniMax-M3 cache TensorRT-LLM lays out otherwise than kvmem's reading, refused by name."""
    archs = model.config.get("architectures") or []
    if archs and archs[0] not in ARCHITECTURES:
        raise ValueError(f"architectures[0] {archs[0]!r}: TensorRT-LLM's PyTorch backend registers MiniMax-M3 as "
                         f"{' / '.join(ARCHITECTURES)} only "
                         "(trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L77-L78 MODEL_ARCH_TO_MODULE; "
                         "modeling_auto.py AutoModelForCausalLM raises 'Unknown architecture')")
    ours = [i for i, layer in enumerate(model.layers) if layer.index_head_dim]
    if ours != list(sparse_layers(model)):
        raise ValueError(f"sparse layers {ours[:4]}...: TensorRT-LLM's MiniMaxM3KVCacheManagerV2 keeps an index key on "
                         f"layers {FIRST_SPARSE_LAYER}..{model.num_layers - 1} whatever the config's "
                         "sparse_attention_freq says (sparse/minimax_m3/cache_manager.py), and this config's sparse "
                         "layers differ: kvmem does not size it as TensorRT-LLM would")
    dims = {model.layers[i].index_head_dim for i in ours}
    if dims - {INDEX_DIM}:
        raise ValueError(f"sparse_index_dim {sorted(dims)}: TensorRT-LLM's MiniMaxM3KVCacheManagerV2 takes the index "
                         f"width from the serving sparse_attention_config (MiniMaxM3SparseAttentionConfig."
                         f"sparse_index_dim, {INDEX_DIM} by default), not from the checkpoint; kvmem sizes only "
                         f"index keys of {INDEX_DIM}")
