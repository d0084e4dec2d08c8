"""DeepSeek-V4 under vLLM 0.33.0: each layer's caches and the packed groups vLLM plans them into.

What one decoder layer builds (vllm@v0.33.0 vllm/models/deepseek_v4/attention.py#L201-L473
DeepseekV4Attention.__init__, compress_ratio = max(1, compress_rates[layer_types[i]])):

    swa_cache          every layer: the last sliding_window K=V rows (DeepseekV4SWACache,
                       v1/attention/backends/mla/sparse_swa.py#L76-L147): SlidingWindowMLASpec,
                       block 64, one head of head_dim
    attn               ratio > 1: the compressed rows, MLAAttentionSpec with tokens_per_state = ratio
                       at the backend's block size (attention.py#L860-L883; FLASHMLA_SPARSE_DSV4 and
                       the V4 indexer take only 256, sparse_mla.py#L60-L61, indexer.py)
    compressor state   ratio > 1: CompressorStateCache (compressor.py#L139-L192), fp32,
                       SlidingWindowMLASpec of 2 x coff x head_dim per token (kv and score state),
                       window coff x ratio, block 4 (ratio 4) or 8 (ratio 128); coff = 2 with the
                       overlap of ratio 4, else 1; ratios other than 4 and 128 fail its assert
    indexer            ratio 4 only (attention.py#L301-L318): its key cache (DeepseekV4IndexerCache,
                       #L886-L926) at tokens_per_state 4, index_head_dim + index_head_dim // 128 x 4
                       bytes (fp8 + fp32 scales, #L1016-L1026), and its own compressor state
                       (2 x 2 x index_head_dim fp32, window 8, block 4)

The fp8_ds_mla layout (FLASHMLA_SPARSE_DSV4, the CUDA default: kv "auto" becomes fp8_ds_mla,
attention.py _resolve_dsv4_kv_cache_dtype #L94-L129) stores 584 B per K=V row (448 B NoPE fp8,
128 B RoPE bf16, 8 B scales) and pads every page up to a multiple of 576 B
(kv_cache_interface.py _apply_alignment_padding); a state per tokens_per_state tokens, so a page
holds block_size // tokens_per_state rows.

Groups (v1/core/kv_cache_planning.py _get_packed_kv_cache_groups #L914-L1041, the resolved layout
being block-outermost: the V4 indexer backend supports only BLHNC / BLNHC): layers are bucketed
greedily by uniform type (equal block size, the same spec class and window); a bucket with the same
number of layers of each page size is balanced; repeats per group = _approximate_gcd of the balanced
buckets' largest page-size counts, at least the largest of those mixing page sizes; a balanced
bucket splits into cdiv(count, repeats) groups of interleaved pattern repeats, the others stay
whole; with no bucket mixing page sizes in a pattern there are no repeats, and a sliding bucket
(a state bucket) splits so that each group fits the widest bucket's block. One block holds one
page of every layer of the widest group: bytes per block = max over groups of the sum of its pages
(_get_kv_cache_bytes_per_block #L574-L605), num_blocks = memory // that; a request takes, per
group, the most pages any of its layers needs (max_memory_usage_pages).
"""

from __future__ import annotations

from collections import Counter

from ...model import Model
from ...units import cdiv
from .pages import PageSpec

__all__ = ["deepseek_v4_units", "packed_groups", "DSV4_BLOCK", "FP8_DS_MLA_ROW", "DSV4_ALIGN"]

DSV4_BLOCK = 256        # sparse_mla.py get_supported_kernel_block_sizes: [256]
SWA_BLOCK = 64          # sparse_swa.py DeepseekV4SWACache(block_size=64)
FP8_DS_MLA_ROW = 584    # attention.py: 448 B NoPE + 128 B RoPE + 8 B scales per row
DSV4_ALIGN = 576        # fp8_ds_mla pages padded to a multiple of 576 B
STATE_BLOCKS = {4: 4, 128: 8}   # compressor.py CompressorStateCache: block_size by compress ratio
INDEXER_QUANT_BLOCK = 128       # attention.py DeepseekV4Indexer.quant_block_size: one fp32 scale per 128


def _check(model: Model, kv_dtype) -> None:
    name = str(getattr(kv_dtype, "name", kv_dtype)).strip().lower().replace("-", "_")
    if name not in ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla"):
        raise ValueError(f"kv_dtype {kv_dtype!r} for deepseek_v4: vLLM 0.33.0's CUDA default backend "
                         "(FLASHMLA_SPARSE_DSV4) stores only fp8_ds_mla ('auto' and 'fp8' become it, "
                         "attention.py _resolve_dsv4_kv_cache_dtype); the bf16 rows of the FlashInfer sparse "
                         "backend are not modelled")
    for layer in model.layers:
        c = layer.compressor
        if c is not None and (c.rate not in STATE_BLOCKS or c.overlap != (c.rate == 4)
                              or bool(c.index_head_dim) != (c.rate == 4)):
            raise ValueError(f"compress rate {c.rate} on a {'CSA' if c.overlap else 'HCA'} layer: vLLM 0.33.0 "
                             "decides overlap and the indexer by the ratio (4: both, 128: neither; "
                             "attention.py#L301) and its CompressorStateCache asserts compress_ratio in [4, 128] "
                             "(compressor.py#L157)")


def deepseek_v4_units(model: Model, kv_dtype) -> list:
    """(layer index, PageSpec) for every cache of every layer, in vLLM's registration order."""
    _check(model, kv_dtype)
    units = []
    for i, layer in enumerate(model.layers):
        head = layer.head_dim_k
        units.append((i, PageSpec("sliding", SWA_BLOCK, 1, head, 0, 1, "fp8_ds_mla", layer.window,
                                  state_content=FP8_DS_MLA_ROW, align=DSV4_ALIGN)))
        c = layer.compressor
        if c is None:
            continue
        units.append((i, PageSpec("mla", DSV4_BLOCK, 1, head, 0, 1, "fp8_ds_mla", tokens_per_state=c.rate,
                                  state_content=FP8_DS_MLA_ROW, align=DSV4_ALIGN)))
        coff = 2 if c.overlap else 1
        units.append((i, _state(2 * coff * head, coff * c.rate, STATE_BLOCKS[c.rate])))
        if c.index_head_dim:
            width = c.index_head_dim + c.index_head_dim // INDEXER_QUANT_BLOCK * 4
            units.append((i, PageSpec("mla", DSV4_BLOCK, 1, width, 0, 1, "", tokens_per_state=c.rate,
                                      align=DSV4_ALIGN)))
            units.append((i, _state(2 * 2 * c.index_head_dim, 2 * c.rate, STATE_BLOCKS[c.rate])))
    return units


def _state(width: int, window: int, block: int) -> PageSpec:
    """A compressor's fp32 state: a sliding window of kv and score rows (SlidingWindowMLASpec)."""
    return PageSpec("sliding", block, 1, width, 0, 4, "", window, align=DSV4_ALIGN, role="state")


def _approximate_gcd(values: list, lower_bound: int) -> int:
    """kv_cache_planning.py _approximate_gcd: the d in [lower_bound, max] with the least upward
    padding sum((d - x % d) % d), ties to the larger d."""
    best, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def packed_groups(units: list) -> list:
    """_get_packed_kv_cache_groups over kvmem's units: lists of unit indices."""
    if len({spec for _, spec in units}) == 1:     # one spec: is_kv_cache_spec_uniform, one group
        return [list(range(len(units)))]
    buckets: list = []
    for index, (_, spec) in enumerate(units):
        for bucket in buckets:
            first = units[bucket[0]][1]
            if first.block_size == spec.block_size and first.family == spec.family:
                bucket.append(index)
                break
        else:
            buckets.append([index])
    shapes = []
    for bucket in buckets:
        by_page: dict = {}
        for index in bucket:
            by_page.setdefault(units[index][1].page_bytes, []).append(index)
        balanced = len({len(v) for v in by_page.values()}) == 1
        most = Counter(units[i][1].page_bytes for i in bucket).most_common(1)[0][1]
        shapes.append((bucket, by_page, balanced, most))
    floor = max((most for _, by_page, balanced, most in shapes if balanced and len(by_page) > 1), default=0)
    repeats = _approximate_gcd([most for *_, balanced, most in shapes if balanced], floor) if floor else None

    def split(balanced: bool, most: int) -> int:
        return cdiv(most, repeats) if balanced and repeats is not None else 1

    def widest(by_page: dict, n: int) -> int:
        return sum(cdiv(len(indices), n) * page for page, indices in by_page.items())

    # is_state_bucket: with no repeat pattern, a sliding bucket may split down to one layer per group
    state = [repeats is None and units[bucket[0]][1].kind == "sliding" for bucket, *_ in shapes]
    anchor = max(widest(by_page, len(bucket) if is_state else split(balanced, most))
                 for (bucket, by_page, balanced, most), is_state in zip(shapes, state, strict=True))
    groups = []
    for (bucket, by_page, balanced, most), is_state in zip(shapes, state, strict=True):
        n = split(balanced, most)
        if anchor and is_state:    # a state group holds no more layers than one block already fits
            n = max(n, cdiv(len(bucket), max(anchor // units[bucket[0]][1].page_bytes, 1)))
        if n == 1:
            groups.append(bucket)
            continue
        pattern = list(zip(*by_page.values(), strict=False))   # vLLM zips the page-size lists as they are
        for i in range(n):
            groups.append([index for repeat in pattern[i::n] for index in repeat])
    if sorted(i for group in groups for i in group) != list(range(len(units))):
        raise ValueError("vLLM 0.33.0's packed groups would leave some caches out for this layout: not modelled")
    return groups
