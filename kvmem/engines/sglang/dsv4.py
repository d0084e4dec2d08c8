"""DeepSeek-V4 under SGLang 0.5.23: DSV4PoolConfigurator's sizing and DeepSeekV4TokenToKVPool's buffers.

SGLang sizes DeepSeek-V4 with its own configurator (pool_configurator.py DSV4PoolConfigurator, picked for a
deepseek_v4 hybrid-SWA model, #L1715-L1722) and allocates DeepSeekV4TokenToKVPool
(mem_cache/deepseek_v4_memory_pool.py#L943-L1300): no "KV Cache is allocated" line, its own log lines instead.
What kvmem models is the CUDA default a DeepSeekV4ForCausalLM launch resolves to (arg_groups/model_overrides/
deepseek_v4.py, deepseek_v4_hook.py, overrides.py _deepseek_v4_kv_cache_dtype): page_size 256, kv fp8_e4m3,
--swa-full-tokens-ratio 0.1 declared by the model override (so "explicit": the request-cap mode never runs for
deepseek_v4), max_running_requests 256, the paged "v4" FlashMLA layout (SGLANG_DSV4_KV_LAYOUT="v4", environ.py
#L1754), no unified KV (HIP only), no HiSparse, no speculative decoding, fp32 compress state.

Per token and pool (all uint8 pages; a pool of ``size`` rows with pages of ``p`` rows holds
cdiv(size + 256, p) pages: the allocator's reserved logical page, _num_dsv4_physical_kv_pages #L166-L171):
    swa     every layer, pages of 256 rows of 584 B (448 fp8 nope + 64 bf16 rope + 8 B scales) padded to a
            multiple of 576 B: 149,760 B a page (kv_layout.py#L103-L105, create_buffer #L307-L327)
    c4      ratio-4 layers, pages of 64 rows: 37,440 B; its indexer (index_head_dim + index_head_dim // 128 x 4
            B a row, fp8 + fp32 scales) over c128 x 32 rows, 64-row pages (#L545-L630)
    c128    ratio-128 layers, pages of 2 rows: 1,728 B
    states  CompressStatePool (deepseek_v4_compress_state.py#L132-L181): size + ring + 1 rows padded to the
            ratio, fp32, 2 x (1 + overlap) x head_dim wide: c4 (overlap) 4 x 512 and its indexer 4 x 128 per
            ratio-4 layer over c4_state = swa // 256 x 8 rows; c128 2 x 512 per ratio-128 layer over
            (max_running_requests + 1) x 128 rows
"""

from __future__ import annotations

from ...model import Model
from ...units import cdiv
from ..results import Capacity, Refusal, assemble
from .details import SglangCapacityDetails, SglangDetails
from .pools import DEFAULTS, GB, Pool

__all__ = ["DSV4_TYPES", "is_dsv4", "dsv4_sizes", "DSV4_PAGE_SIZE", "capacity", "estimate"]

DSV4_TYPES = ("deepseek_v4",)
DSV4_PAGE_SIZE = 256        # sglang@v0.5.23 python/sglang/srt/arg_groups/model_overrides/deepseek_v4.py#L51-L61
DEFAULT_SWA_RATIO = 0.1     # sglang@v0.5.23 python/sglang/srt/arg_groups/model_overrides/deepseek_v4.py#L43-L49
DEFAULT_MAX_RUNNING = 256   # sglang@v0.5.23 python/sglang/srt/arg_groups/deepseek_v4_hook.py#L138-L146
V4_ROW = 584                # sglang@v0.5.23 python/sglang/kernels/ops/attention/dsv4/kv_layout.py#L52-L63 (576 + 8)
V4_ALIGN = 576              # sglang@v0.5.23 python/sglang/kernels/ops/attention/dsv4/kv_layout.py#L88-L95
RINGS = {4: 8, 128: 128}    # sglang@v0.5.23 python/sglang/srt/mem_cache/deepseek_v4_memory_pool.py#L60-L80 (no spec)
STATE_BYTES = 4             # sglang@v0.5.23 python/sglang/srt/environ.py#L1832 SGLANG_DSV4_COMPRESS_STATE_DTYPE fp32
KV_DTYPES = ("auto", "fp8", "fp8_e4m3")


def is_dsv4(model: Model) -> bool:
    """DeepSeek-V4, or compressed layers in another model (refused by _shape: SGLang has no such pool)."""
    return model.model_type in DSV4_TYPES or any(layer.compressor is not None for layer in model.layers)


def page_bytes(rows: int) -> int:
    """KVLayout.V4.page_bytes (sglang@v0.5.23 python/sglang/kernels/ops/attention/dsv4/kv_layout.py#L103-L105)."""
    return cdiv(rows * V4_ROW, V4_ALIGN) * V4_ALIGN


def _pages(size: int, rows: int) -> int:
    # sglang@v0.5.23 python/sglang/srt/mem_cache/deepseek_v4_memory_pool.py#L166-L171 (global page 256)
    return cdiv(size + DSV4_PAGE_SIZE, rows)


def _state_rows(size: int, ratio: int) -> int:
    # sglang@v0.5.23 python/sglang/srt/mem_cache/deepseek_v4_compress_state.py#L170-L177
    return cdiv(size + RINGS[ratio] + 1, ratio) * ratio


def _shape(model: Model) -> tuple[list[int], int, int, int, int]:
    """(ratios per layer, qk_nope, qk_rope, index_head_dim, window), refused where SGLang 0.5.23 refuses."""
    if model.model_type not in DSV4_TYPES:
        raise ValueError(f"{model.name}: SGLang 0.5.23 builds compressed-attention caches only in its DeepSeek-V4 "
                         "model (DeepSeekV4TokenToKVPool, for a deepseek_v4 config; "
                         "kv_cache_configurator.py#L1815-L1830)")
    cfg = model.config or {}
    ratios = [layer.compressor.rate if layer.compressor else 0 for layer in model.layers]
    bad = sorted({r for r in ratios if r not in (0, 4, 128)})
    if bad:
        # sglang@v0.5.23 python/sglang/srt/mem_cache/deepseek_v4_memory_pool.py#L90-L99: ratios 1 and 2 own
        # storage only on kv_source_layer_ids (DeepSeek-V4.1), other ratios raise
        raise ValueError(f"{model.name}: compress ratios {bad}: kvmem sizes SGLang 0.5.23's DeepSeek-V4 pool for "
                         "ratios 0, 4 and 128 (DeepSeek-V4's); ratios 1/2 are the V4.1 kv_source layout, not modelled")
    head = model.layers[0].head_dim_k
    rope = int(cfg.get("qk_rope_head_dim", 64))
    nope = head - rope
    if nope + 2 * rope + nope // 64 + 1 != V4_ROW:
        # sglang@v0.5.23 python/sglang/srt/mem_cache/deepseek_v4_memory_pool.py#L293-L319 (assert in create_buffer)
        raise ValueError(f"{model.name}: SGLang 0.5.23's V4 KV layout asserts 448 fp8 nope + 64 bf16 rope + scales = "
                         f"584 B a row; head_dim {head} with qk_rope_head_dim {rope} gives another row")
    index = int(cfg.get("index_head_dim", 0) or 0)
    if 4 in ratios and not index:
        raise ValueError(f"{model.name}: ratio-4 layers need index_head_dim (the indexer pool's width)")
    return ratios, nope, rope, index, model.layers[0].window


def _settings(kv_dtype, tp: int, pp: int, options: dict) -> tuple[float, int, list[str]]:
    # one K=V latent head: DeepSeekV4TokenToKVPool has no head axis, so every attention-tp rank holds all of it
    notes = [f"tp {tp}: every rank holds the whole DeepSeek-V4 pool (one latent row per token)"] if tp > 1 else []
    name = str(getattr(kv_dtype, "name", kv_dtype)).strip().lower()
    if name in ("bf16", "bfloat16"):
        raise ValueError("kv_dtype bf16 for deepseek_v4: SGLang 0.5.23's CUDA V4 pool stores uint8 pages only "
                         "(DeepSeekV4SingleKVPool.create_buffer asserts store_dtype == torch.uint8, "
                         "mem_cache/deepseek_v4_memory_pool.py#L320); bf16 runs on NPU only")
    if name not in KV_DTYPES:
        # sglang@v0.5.23 python/sglang/srt/arg_groups/overrides.py#L893-L912
        raise ValueError(f"kv_dtype {kv_dtype!r}: SGLang 0.5.23 asserts kv_cache_dtype in [fp8_e4m3, bfloat16] for "
                         "DeepseekV4ForCausalLM (arg_groups/overrides.py _deepseek_v4_kv_cache_dtype)")
    if pp != 1:
        raise ValueError("pp > 1 with deepseek_v4 under SGLang: its PP ranks sync the token count before sizing "
                         "(kv_cache_configurator.py _apply_token_constraints); kvmem models pp = 1 only here")
    if options.get("disable_hybrid_swa_memory"):
        raise ValueError("disable_hybrid_swa_memory with deepseek_v4: SGLang 0.5.23 builds the V4 pool only through "
                         "DSV4PoolConfigurator, which it picks for a hybrid-SWA V4 model (pool_configurator.py"
                         "#L1715-L1722); kvmem does not model the other path")
    page = options.get("page_size", 1)
    if page not in (1, DSV4_PAGE_SIZE):
        notes.append(f"page_size {page} ignored: SGLang sets page_size 256 for DeepseekV4ForCausalLM")
    notes.append("page_size 256 (SGLang's DeepSeek-V4 override; kv_cache_configurator.py asserts it)")
    ratio = options.get("swa_full_tokens_ratio", 0.8)
    if ratio == 0.8:
        # kvmem's default option is SGLang's generic default (0.8); for V4 the model override declares 0.1 when
        # the flag is not given (sglang@v0.5.23 python/sglang/srt/arg_groups/model_overrides/deepseek_v4.py#L43-L49),
        # and kv_cache_hook.py#L415-L420 records it as explicitly set: ratio mode, never cap mode
        ratio = DEFAULT_SWA_RATIO
        notes.append("swa_full_tokens_ratio 0.1 (SGLang's DeepSeek-V4 default; a given 0.8 is read as not given)")
    if not 0 < ratio <= 1:
        raise ValueError("SGLang raises ValueError: --swa-full-tokens-ratio should be in range (0, 1.0].")
    requests = options.get("max_running_requests")
    requests = DEFAULT_MAX_RUNNING if requests is None else int(requests)
    unknown = sorted(k for k in options if k not in DEFAULTS)
    if unknown:
        raise ValueError(f"{', '.join(unknown)} with deepseek_v4: not modelled for SGLang's DeepSeek-V4 pool")
    return ratio, requests, notes


def dsv4_sizes(model: Model, kv_memory: int, *, kv_dtype, tp: int, pp: int, **options) -> dict:
    """DSV4PoolConfigurator.calculate_pool_sizes, resolve_max_num_reqs and finalize, then the pool's buffers.
    Returns {"error"} where SGLang raises, else the pool sizes, each pool's bytes and SGLang's log lines."""
    ratios, nope, rope, index, window = _shape(model)
    swa_ratio, requests, notes = _settings(kv_dtype, tp, pp, options)
    page, n = DSV4_PAGE_SIZE, len(ratios)
    n4, n128 = ratios.count(4), ratios.count(128)
    head = nope + rope
    # sglang@v0.5.23 python/sglang/srt/model_executor/pool_configurator.py#L1353-L1370: page bytes per token (float)
    paged = {r: page_bytes(page // r if r else page) / (page // r if r else page) for r in (0, 4, 128)}
    index_bytes = index + index // 128 * 4   # deepseek_v4_memory_pool.py#L53-L57 (fp8 indexer)
    # pool_configurator.py#L1372-L1388 _get_bytes_per_swa_token: every layer's SWA slot and the c4 states
    c4_state, c4_index_state = 2 * 2 * head * STATE_BYTES, 2 * 2 * index * STATE_BYTES
    per_swa = paged[0] * n + (RINGS[4] / page) * (c4_state + c4_index_state) * n4
    # pool_configurator.py#L1390-L1404, #L1437-L1446: the compressed rows a full token adds, dict order 4, 128
    compressed = {4: 1 / 4 * paged[4] + 1 / 4 * index_bytes, 128: 1 / 128 * paged[128]}
    per_full = swa_ratio * per_swa + sum(compressed[r] * c for r, c in ((4, n4), (128, n128)) if c)
    # pool_configurator.py#L1509-L1530: the c128 state's fixed bytes for max_running_requests + 1 slots
    slots = requests + 1
    c128_fixed = (cdiv(slots * RINGS[128] + RINGS[128] + 1, 128) * 128 * 2 * head * STATE_BYTES * n128
                  if n128 else 0)
    # pool_configurator.py#L1638-L1670 calculate_pool_sizes
    available = max(kv_memory - c128_fixed, 0)
    full = int(available / per_full) // page * page
    while full > 0 and full * per_full > available:
        full -= page
    # pool_configurator.py#L1463-L1506 _compute_dsv4_sizes; with no full token the SWA pool is 0 and
    # validate_swa_pool_size (#L198-L216) raises before MemoryPoolConfig's "Not enough memory" could
    swa = int(full * swa_ratio) // page * page
    if window + page >= swa:
        return {"error": f"SGLang raises ValueError: SWA pool ({swa} tokens) cannot hold even one request: the "
                         f"prefill admission floor is sliding_window_size ({window}) + page_size ({page}). "
                         "Increase --swa-full-tokens-ratio or the total KV budget.", "notes": notes}
    c4, c128 = full // 4, full // 128
    c4_states = swa // page * RINGS[4]
    # kv_cache_configurator.py#L3119-L3132 resolve_max_num_reqs (max_running_requests is always set for V4)
    running = min(requests, full // 2)
    # pool_configurator.py#L1622-L1636 finalize; deepseek_v4_memory_pool.py#L1046-L1053: rings of every slot
    c128_states = (running + 1) * RINGS[128]
    pools = [
        Pool("swa", "dsv4", swa, page, tuple(range(n)), n * _pages(swa, page) * page_bytes(page), 0, "torch.uint8"),
    ]
    layers4 = tuple(i for i, r in enumerate(ratios) if r == 4)
    layers128 = tuple(i for i, r in enumerate(ratios) if r == 128)
    if n4:
        pools += [Pool("c4", "dsv4", c4, page // 4, layers4, n4 * _pages(c4, page // 4) * page_bytes(page // 4), 0,
                       "torch.uint8"),
                  Pool("c4_index", "dsv4", c128 * 32, page // 4, layers4,
                       n4 * _pages(c128 * 32, page // 4) * (page // 4) * index_bytes, 0, "torch.uint8"),
                  Pool("c4_state", "dsv4", c4_states, 1, layers4, n4 * _state_rows(c4_states, 4) * c4_state, 0,
                       "torch.float32"),
                  Pool("c4_index_state", "dsv4", c4_states, 1, layers4,
                       n4 * _state_rows(c4_states, 4) * c4_index_state, 0, "torch.float32")]
    if n128:
        pools += [Pool("c128", "dsv4", c128, page // 128, layers128,
                       n128 * _pages(c128, page // 128) * page_bytes(page // 128), 0, "torch.uint8"),
                  Pool("c128_state", "dsv4", c128_states, 1, layers128,
                       n128 * _state_rows(c128_states, 128) * 2 * head * STATE_BYTES, 0, "torch.float32")]
    log = [
        # pool_configurator.py#L1470-L1486, #L1672-L1686, #L1602-L1611; deepseek_v4_memory_pool.py#L1018-L1024,
        # #L1268-L1273
        f"DSV4 SWA sizing: mode=ratio (explicit), swa_tokens={swa}, swa_full_tokens_ratio={swa_ratio}",
        f"DSV4 memory calculation: unified=False, unified_fp8=False, dspark_draft_bf16=False, "
        f"bytes_per_full_token={per_full:.2f}, available_bytes={kv_memory / GB:.2f} GB, "
        f"c128_state_fixed={c128_fixed / GB:.2f} GB, c2_state_fixed=0.00 GB, swa_fixed=0.00 GB, "
        f"swa_ring_fixed=0.00 GB, c4_state_fixed=0.00 GB, full_token={full}",
        f"DSV4 pool sizes: full={full}, swa={swa}, c4={c4}, c128={c128}, c4_state={c4_states}, c128_state=0",
        f"Initialize DeepSeekV4TokenToKVPool with max_num_reqs={running} swa_size={swa} c4_size={c4} "
        f"c4_logical_size={c128 * 32} c128_size={c128} c4_state_pool_size={c4_states} "
        f"c128_state_pool_size={c128_states} unified=False unified_fp8=False",
        "DSV4 SWA storage: worker=target, storage=paged, paged_allocator=True",
    ]
    return {"error": None, "full": full, "swa": swa, "c4": c4, "c128": c128, "c4_state": c4_states,
            "c128_state": c128_states, "max_running_requests": running, "bytes_per_full_token": per_full,
            "bytes_per_swa_token": per_swa, "c128_state_fixed": c128_fixed, "pools": pools, "log": log,
            "notes": notes, "window": window, "ratios": ratios, "head": head, "index_bytes": index_bytes}


def capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None, **options):
    """The pools a KV budget (SGLang's ``rest``) makes for DeepSeek-V4: max_total_num_tokens is the full pool
    (the compressed pools follow it), the SWA pool swa_full_tokens_ratio of it."""
    sizes = dsv4_sizes(model, kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    page = DSV4_PAGE_SIZE
    notes = tuple(sizes["notes"])
    if sizes["error"]:
        details = SglangCapacityDetails(layout="dsv4", page_size=page, cell_bytes_per_token=0, max_total_num_tokens=0)
        return Capacity(model=model.name, engine="sglang", kv_memory=kv_memory, blocks=0, tokens=0,
                        max_concurrency=0.0, longest_request_tokens=0, block_size=page,
                        notes=notes + (sizes["error"],), details=details, k_dtype="fp8_e4m3", v_dtype="fp8_e4m3",
                        refusal=Refusal(sizes["error"]))
    full, swa, window = sizes["full"], sizes["swa"], sizes["window"]
    concurrency = None
    if max_model_len:
        # each request holds its tokens in whole pages of the full pool and a window's pages of the SWA pool
        concurrency = min(full / (cdiv(max_model_len, page) * page),
                          swa / (cdiv(min(max_model_len, window), page) * page), float(sizes["max_running_requests"]))
    pools = sizes["pools"]
    details = SglangCapacityDetails(
        layout="dsv4", page_size=page, cell_bytes_per_token=int(sizes["bytes_per_full_token"]),
        max_total_num_tokens=full, full_layer_tokens=full, swa_layer_tokens=swa,
        max_running_requests=sizes["max_running_requests"], pools=[p.to_dict() for p in pools],
        allocated_bytes=sum(p.kv_bytes for p in pools), log=list(sizes["log"]))
    return Capacity(model=model.name, engine="sglang", kv_memory=kv_memory, blocks=full // page, tokens=full,
                    max_concurrency=concurrency, longest_request_tokens=full, block_size=page,
                    notes=notes + (f"DeepSeek-V4 pools: {full:,} full tokens (c4 {sizes['c4']:,}, c128 "
                                   f"{sizes['c128']:,} compressed rows), {swa:,} SWA tokens, "
                                   f"{sizes['c128_state_fixed']:,} B of c128 state for "
                                   f"{sizes['max_running_requests'] + 1} request slots",),
                    details=details, log_lines=tuple(sizes["log"]), k_dtype="fp8_e4m3", v_dtype="fp8_e4m3")


def estimate(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, **options):
    """The rows of SGLang's DeepSeek-V4 pools ``batch`` sequences of ``tokens`` occupy, per layer, each pool with
    its reserved page: SWA pages of the window, c4 rows (and indexer rows) a quarter and c128 rows 1/128 of the
    page-rounded tokens, the c4 state rings of the SWA pages and a c128 ring per request."""
    ratios, nope, rope, index, window = _shape(model)
    _ratio, _requests, notes = _settings(kv_dtype, tp, pp, options)
    page, head = DSV4_PAGE_SIZE, nope + rope
    index_bytes = index + index // 128 * 4
    pages = cdiv(tokens, page)
    full = batch * pages * page
    swa_pages = batch * cdiv(min(tokens, window), page)
    rows = []
    for ratio in ratios:
        k = _pages(swa_pages * page, page) * page_bytes(page)
        state = 0
        if ratio == 4:
            k += _pages(full // 4, 64) * (page_bytes(64) + 64 * index_bytes)   # c4 and indexer pages of 64 rows
            state = (swa_pages + 1) * RINGS[4] * (4 * head + 4 * index) * STATE_BYTES
        elif ratio == 128:
            k += _pages(full // 128, 2) * page_bytes(2)
            state = batch * RINGS[128] * 2 * head * STATE_BYTES
        rows.append((k, 0, state))
    notes = list(notes) + [
        f"every layer holds its {window}-token window in 256-token SWA pages (SGLang frees out-of-window pages "
        "lazily); ratio-4 layers a compressed row and an indexer row per 4 tokens, ratio-128 layers one per 128",
        "each pool keeps the allocator's reserved 256-row page (4 pages of a c4 pool, 128 of a c128 pool)"]
    details = SglangDetails(layout="dsv4", page_size=page, pages_per_sequence=pages, pool_tokens=full,
                            padding_tokens_per_layer=page, kv_heads_per_rank=1, cell_bytes_per_token=0,
                            swa_window=window, swa_pages_per_sequence=cdiv(min(tokens, window), page),
                            swa_pool_tokens=swa_pages * page)
    return assemble(model, "sglang", tokens=tokens, batch=batch, kv_dtype="fp8_e4m3", tp=tp, pp=pp, rows=rows,
                    notes=notes, details=details, block_size=page)
