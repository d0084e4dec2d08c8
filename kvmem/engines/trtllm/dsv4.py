"""DeepSeek-V4 under TensorRT-LLM: DeepseekV4CacheManager's buffers, per layer and attention type.

TensorRT-LLM runs DeepseekV4ForCausalLM with its own KVCacheManagerV2 subclass, DeepseekV4CacheManager, which
the sparse attention config (algorithm "deepseek_v4") selects: a sparse config goes to the sparse managers' factory
(trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L289-L291), get_sparse_attn_kv_cache_manager under
attention_backend/sparse/ (its stored copies with the deepseek_v4 branch carry no commit). Read at (no release tag
ties them together; docs/research/families_trtllm.md):

  CM  trtllm@015279e0 tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py#L126-L341
      (DeepseekV4CacheManager: __init__'s asserts #L159-L175, rows a block #L196, get_buffers #L271-L324,
      _get_window_size #L326-L341; the per-token sums #L68-L111; _build_cache_config, _init_indexer_dtype and
      _get_cache_quota follow) (the buffer sizes agree with the copy at trtllm@10ce7685
      tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py#L378-L446, whose
      _build_cache_config gives every attention type of a layer a manager layer of its own, _add_layer #L378-L396)
  DV  trtllm@03c233a7 tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/deepseek_v4.py#L53-L154
      (the ratio constants #L53-L54, compress_ratio_has_attention #L79-L97, get_attn_dim #L100-L118,
      get_token_bytes #L121-L154; the metadata's asserts, window_size == 128 #L198-L202, ratios #L209-L213)
  MC  trtllm@008e0af8 tensorrt_llm/_torch/model_config.py#L1081-L1173 (ModelConfig.from_pretrained's
      DeepseekV4ForCausalLM branch: the sparse config built from the checkpoint, window_size else sliding_window
      #L1108-L1131, compress_ratios 0 -> 1 #L1152-L1154; without a sparse_attention_config the indexer dtype is
      DeepSeekV4SparseAttentionConfig's default, #L997-L999)
  LA  trtllm@00043967 tensorrt_llm/llmapi/llm_args.py#L1295-L1307 DeepSeekV4SparseAttentionConfig (indexer_k_dtype
      Literal["fp8", "fp4"], default fp4; the parent's validator falls back to fp8 below SM100 unless it was set,
      #L1126-L1161)

Per layer of compress ratio r (the checkpoint's compress_ratios, 0 read as 1: MC), with H = head_dim (one K-only
latent row, SELFKONLY, num_kv_heads 1), d the cache dtype's bytes (bf16 2, fp8 1), I = index_head_dim, sf = 2
where r == 4 (the overlap compressor) else 1, and blocks of tokens_per_block (tpb) tokens (CM
_build_cache_config, _get_attn_bytes_per_block = get_token_bytes x the buffer's rows per block; DV
get_token_bytes, get_attn_dim, compress_ratio_has_attention):

  SWA                      every layer   H x d a token, tpb rows a block, sliding window_size (128)
  COMPRESS                 r > 1         H x d a compressed row, tpb // r rows a block, the whole sequence
  COMPRESSOR_KV / _SCORE   r > 1         sf x H x 4 (fp32) a token each, tpb rows a block, window sf x r
  INDEXER_COMPRESS         r == 4        I + I // 128 x 4 (fp8 + fp32 scales) or I // 2 + I // 32 (fp4 + ue8m0)
                                         a compressed row, tpb // 4 rows a block, the whole sequence
  INDEXER_COMPRESSOR_KV / _SCORE r == 4  sf x I x 4 a token each, tpb rows a block, window sf x r = 8

A buffer with a window frees the blocks that leave it (KVCacheManagerV2's life cycles: models.v2_window_blocks);
the others keep ceil(tokens / tpb) blocks a sequence.
"""

from __future__ import annotations

from fractions import Fraction

from ...dtypes import dtype
from ...model import Model
from ...units import cdiv
from ..results import assemble
from .models import v2_window_blocks

__all__ = ["is_dsv4", "check_options", "buffers", "cache_bytes_per_token", "estimate", "refuse_capacity",
           "INDEXER_K_DTYPES", "TOKENS_PER_BLOCK"]

# trtllm@015279e0 tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py#L172-L175
TOKENS_PER_BLOCK = (128, 256)   # CM DeepseekV4CacheManager.__init__: assert tokens_per_block in [128, 256]
# trtllm@03c233a7 tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/deepseek_v4.py#L209-L213 (ratios),
# #L198-L202 (window), #L53-L54 (the sparse and overlap ratios)
RATIOS = (1, 4, 128)            # DV DeepseekV4TrtllmAttentionMetadata.__post_init__ (_supported_ratios); CM
                                # _build_cache_config raises "Unsupported DeepSeek-V4 compress ratio" for others
WINDOW = 128                    # DV __post_init__: assert window_size == 128 ("Dual-pool sparse MLA requires ...")
SPARSE_RATIO = 4                # DV DEEPSEEK_V4_SPARSE_RATIO: the layers with an indexer
OVERLAP_RATIO = 4               # DV DEEPSEEK_V4_OVERLAP_COMPRESSOR_RATIO: state_factor 2
STATE_BYTES = 4                 # CM compressor_dtype DataType.FLOAT (asserted); DV get_token_bytes: 4 B
QUANT_BLOCK = {"fp8": 128, "fp4": 32}   # CM _init_indexer_dtype: one fp32 scale per 128, one ue8m0 byte per 32
INDEXER_K_DTYPES = tuple(QUANT_BLOCK)   # LA: Literal["fp8", "fp4"]
# CM __init__: assert dtype in [DataType.BF16, DataType.FP8]; bytes an element from kvmem.dtypes (2 and 1)
KV_DTYPES = {name: dtype(name).block_bytes for name in ("bf16", "fp8_e4m3")}
MANAGER = ("TensorRT-LLM's DeepseekV4CacheManager "
           "(tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py)")


def is_dsv4(model: Model) -> bool:
    """DeepSeek-V4, or compressed layers in another model (refused by _ratios)."""
    return model.model_type == "deepseek_v4" or any(layer.compressor is not None for layer in model.layers)


def check_options(*, tokens_per_block, indexer_k_dtype, max_attention_window) -> None:
    """The launch settings TRT-LLM refuses for DeepSeek-V4, and the one whose default depends on the GPU."""
    if tokens_per_block not in TOKENS_PER_BLOCK:
        # CM __init__: assert tokens_per_block in [128, 256]; KvCacheConfig's default is 32 (cache.DEFAULTS)
        raise ValueError(f"tokens_per_block {tokens_per_block}: {MANAGER} asserts tokens_per_block in [128, 256] "
                         "(\"Set kv_cache_config.tokens_per_block to 128 or 256\"); pass tokens_per_block=128 or 256")
    if indexer_k_dtype is None:
        # LA: indexer_k_dtype defaults to "fp4", and its validator falls back to "fp8" on a GPU below SM100 unless
        # the user set it; MC passes that default on when the user gives no sparse_attention_config
        raise ValueError("indexer_k_dtype: TensorRT-LLM's DeepSeek-V4 indexer key cache is fp4 on Blackwell (SM>=100) "
                         "and fp8 below unless sparse_attention_config.indexer_k_dtype is set (llmapi/llm_args.py "
                         "DeepSeekV4SparseAttentionConfig); the GPU decides, so pass indexer_k_dtype='fp8' or 'fp4'")
    if indexer_k_dtype not in INDEXER_K_DTYPES:
        raise ValueError(f"indexer_k_dtype {indexer_k_dtype!r}: TensorRT-LLM takes 'fp8' or 'fp4' "
                         "(DeepSeekV4SparseAttentionConfig.indexer_k_dtype)")
    if max_attention_window is not None:
        # CM _build_cache_config: each buffer's window is set from window_size and the compress ratio
        # (_get_window_size); KvCacheConfig.max_attention_window has no say in it
        raise ValueError(f"max_attention_window={max_attention_window!r} with DeepSeek-V4: {MANAGER} sets every "
                         "buffer's window itself (window_size on the SWA rows, 2 x ratio or ratio on the compressor "
                         "states); leave max_attention_window unset")


def _kv_bytes(k_dtype_name: str) -> int:
    if k_dtype_name not in KV_DTYPES:
        raise ValueError(f"kv_dtype {k_dtype_name}: {MANAGER} asserts dtype in [BF16, FP8] (\"only support BF16 "
                         "and FP8\")")
    return KV_DTYPES[k_dtype_name]


def _ratios(model: Model) -> list[int]:
    """Per layer, the compress ratio TRT-LLM builds (MC: checkpoint compress_ratios, 0 -> 1)."""
    if model.model_type != "deepseek_v4":
        raise ValueError(f"{model.name}: TensorRT-LLM builds compressed-attention caches only for "
                         "DeepseekV4ForCausalLM (a deepseek_v4 config: model_config.py ModelConfig.from_pretrained)")
    ratios = []
    for i, layer in enumerate(model.layers):
        c = layer.compressor
        ratio = c.rate if c is not None else 1
        if ratio not in RATIOS:
            raise ValueError(f"layer {i}: compress ratio {ratio}: TensorRT-LLM's DeepSeek-V4 supports only "
                             f"{set(RATIOS)} (deepseek_v4.py DeepseekV4TrtllmAttentionMetadata; cache_manager.py "
                             "_build_cache_config raises \"Unsupported DeepSeek-V4 compress ratio\")")
        if c is not None and (c.overlap != (ratio == OVERLAP_RATIO)
                              or bool(c.index_head_dim) != (ratio == SPARSE_RATIO)):
            # DV is_overlap_compressor / is_sparse_layer: the ratio alone decides overlap and the indexer
            raise ValueError(f"layer {i}: a ratio-{ratio} compressor with overlap={c.overlap} and index_head_dim="
                             f"{c.index_head_dim}: TensorRT-LLM decides both by the ratio (4: overlap and an indexer; "
                             "128: neither; deepseek_v4.py is_overlap_compressor, is_sparse_layer)")
        if layer.window != WINDOW:
            raise ValueError(f"layer {i}: sliding window {layer.window}: TensorRT-LLM's DeepSeek-V4 attention asserts "
                             "window_size == 128 (deepseek_v4.py DeepseekV4TrtllmAttentionMetadata: \"Dual-pool sparse "
                             "MLA requires window_size == 128\")")
        ratios.append(ratio)
    return ratios


def _index_dim(model: Model, indexer_k_dtype: str) -> int:
    dims = {layer.compressor.index_head_dim for layer in model.layers
            if layer.compressor is not None and layer.compressor.rate == SPARSE_RATIO}
    if not dims:
        return 0
    if len(dims) > 1:
        raise ValueError(f"index_head_dim {sorted(dims)}: DeepSeekV4SparseAttentionConfig has one index_head_dim")
    index = dims.pop()
    if indexer_k_dtype == "fp4" and index != 128:
        # CM _init_indexer_dtype: assert self.index_head_dim == 128 ("FP4 indexer K cache requires ...")
        raise ValueError(f"indexer_k_dtype 'fp4' with index_head_dim {index}: {MANAGER} asserts index_head_dim == 128")
    if index % QUANT_BLOCK[indexer_k_dtype]:
        # CM _init_indexer_dtype: assert index_head_dim % quant_block_size == 0
        raise ValueError(f"index_head_dim {index}: {MANAGER} asserts it divisible by {QUANT_BLOCK[indexer_k_dtype]}")
    return index


def _indexer_row(index: int, indexer_k_dtype: str) -> int:
    # DV get_token_bytes (INDEXER_COMPRESS): fp8 attn_dim + index_head_dim // 128 x 4; fp4 I // 2 + I // 32
    if indexer_k_dtype == "fp8":
        return index + index // 128 * 4
    return index // 2 + index // 32


def buffers(model: Model, *, k_dtype_name: str, indexer_k_dtype: str) -> list[list[tuple[str, int, int, int]]]:
    """Per layer, its buffers as (attention type, bytes a row, rows a token's block holds per tpb tokens as the
    divisor r (1: one row a token), window in tokens (0: the whole sequence)), in CM _build_cache_config's order."""
    d = _kv_bytes(k_dtype_name)
    ratios = _ratios(model)
    index = _index_dim(model, indexer_k_dtype)
    out = []
    for layer, r in zip(model.layers, ratios, strict=True):
        head = layer.head_dim_k            # kv_lora_rank (448) + qk_rope_head_dim (64) of V4's MLA: head_dim 512
        sf = 2 if r == OVERLAP_RATIO else 1
        row = [("SWA", head * d, 1, WINDOW)]                     # DV get_attn_dim: head_dim, cache dtype
        if r > 1:
            row += [("COMPRESS", head * d, r, 0),                 # tpb // r rows a block (compressed_block_sizes)
                    ("COMPRESSOR_KV", sf * head * STATE_BYTES, 1, sf * r),   # CM _get_window_size: sf x ratio
                    ("COMPRESSOR_SCORE", sf * head * STATE_BYTES, 1, sf * r)]
        if r == SPARSE_RATIO:
            row += [("INDEXER_COMPRESS", _indexer_row(index, indexer_k_dtype), r, 0),
                    ("INDEXER_COMPRESSOR_KV", sf * index * STATE_BYTES, 1, sf * r),
                    ("INDEXER_COMPRESSOR_SCORE", sf * index * STATE_BYTES, 1, sf * r)]
        out.append(row)
    return out


def cache_bytes_per_token(layer_buffers, layers) -> int:
    """CM get_cache_bytes_per_token (_estimate_bytes_per_token): over the rank's layers, every buffer's bytes a
    token, a compressed row's divided by the ratio with floor division (_get_attn_bytes_per_token) -- the rate
    DeepseekV4CacheManager turns max_tokens into a byte quota with (_get_cache_quota)."""
    return sum(row // per for i in layers for _, row, per, _ in layer_buffers[i])


def _blocks(tokens: int, window: int, tokens_per_block: int) -> int:
    if window:
        return v2_window_blocks(tokens, window, tokens_per_block)
    return cdiv(tokens, tokens_per_block)


def estimate(model: Model, *, tokens: int, batch: int, k_dtype_name: str, tp: int, pp: int, tokens_per_block: int,
             indexer_k_dtype, max_attention_window, stages, details_cls):
    """The blocks ``batch`` sequences of ``tokens`` hold in DeepseekV4CacheManager's buffers, on the pipeline
    stage holding the most (CM: pp_layers; every tensor-parallel rank holds the whole latent, num_kv_heads 1)."""
    _ratios(model)      # a model other than DeepSeek-V4 is refused before its options are read
    check_options(tokens_per_block=tokens_per_block, indexer_k_dtype=indexer_k_dtype,
                  max_attention_window=max_attention_window)
    layer_buffers = buffers(model, k_dtype_name=k_dtype_name, indexer_k_dtype=indexer_k_dtype)
    rows, per_sequence = [], {}
    for bufs in layer_buffers:
        cache = state = 0
        for kind, row, per, window in bufs:
            n = _blocks(tokens, window, tokens_per_block)
            per_sequence[window] = n
            size = batch * n * (tokens_per_block // per) * row
            if "COMPRESSOR" in kind:
                state += size        # the compressors' fp32 kv and score rows of the open windows
            else:
                cache += size        # SWA rows and compressed rows (and the indexer's), K only
        rows.append((cache, 0, state))
    largest = max(stages, key=lambda stage: sum(sum(rows[i]) for i in stage))
    average = cache_bytes_per_token(layer_buffers, largest)
    notes = [f"TensorRT-LLM's DeepseekV4CacheManager (KVCacheManagerV2): per layer an SWA buffer ({WINDOW}-token "
             "window), on compressed layers the compressed rows (whole sequence) and the compressors' fp32 states "
             "(window 2 x ratio or ratio); ratio-4 layers add the indexer's compressed keys "
             f"({indexer_k_dtype}) and states; a windowed buffer frees the blocks that leave its window",
             f"TensorRT-LLM prices a token at {average:,} B (get_cache_bytes_per_token) when it turns max_tokens "
             "into its byte quota",
             "MTP draft layers (num_nextn_predict_layers) add layers only with speculative decoding, which is not "
             "counted here",
             "TensorRT-LLM builds this layout on Blackwell; on Hopper later main builds ask for kv_cache_config."
             "dtype fp8_ds_mla, another layout"]
    if tp > 1:
        notes.append(f"tp {tp}: every rank holds the whole DeepSeek-V4 cache (one latent row per token)")
    details = details_cls(tokens_per_block=tokens_per_block, blocks_per_sequence=dict(sorted(per_sequence.items())),
                          blocks_by_window={w: batch * n for w, n in sorted(per_sequence.items())},
                          bytes_per_token=average, bytes_per_token_estimate=Fraction(average),
                          windows=sorted(per_sequence))
    return assemble(model, "trtllm", tokens=tokens, batch=batch, kv_dtype=k_dtype_name, tp=tp, pp=pp, rows=rows,
                    notes=notes, details=details, stages=stages, block_size=tokens_per_block)


def refuse_capacity() -> None:
    """CM _get_cache_quota and _build_cache_config: the budget becomes one KVCacheManagerV2 byte quota that its
    storage manager splits between the buffers' pool groups by a typical step (one context request and
    max_batch_size - 1 generation requests at max_seq_len) and two warm-up constraints."""
    raise ValueError("capacity: TensorRT-LLM hands DeepSeek-V4's KV budget to DeepseekV4CacheManager as one byte "
                     "quota (max_tokens x get_cache_bytes_per_token + 7 x 4 MiB, _get_cache_quota) that "
                     "KVCacheManagerV2's storage manager splits between the SWA, compressed and state pool groups by "
                     "a typical batch of max_batch_size requests; kvmem sizes what a workload holds (estimate), "
                     "not how many tokens a quota holds")
