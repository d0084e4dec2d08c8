"""estimate() and capacity(): SGLang's pools for a workload, and the #tokens a budget holds."""

from __future__ import annotations

from dataclasses import replace

from ...layer import SLIDING
from ...model import Model
from ...parallel import pp_stages
from ...units import cdiv
from ..results import Capacity, Refusal, assemble
from . import draft as spec_draft
from . import dsv4, inkling, mamba
from .details import SglangCapacityDetails, SglangDetails
from .pools import Layout, cell_size, index_bytes, layer_rows, make_layout, pools, stage_cell, state_parts_of


def _drafting(model: Model, spec: dict):
    """The speculative draft as SGLang sizes it: beside a Mamba hybrid, the target's own MTP head
    (draft.mamba_draft); otherwise draft.draft_layers."""
    if spec.get("speculative_algorithm") is not None and spec_draft.is_mamba_target(model):
        return spec_draft.mamba_draft(model, spec)
    algorithm = spec.get("speculative_algorithm")
    if inkling.is_inkling(model) and isinstance(algorithm, str) and algorithm.upper() in spec_draft.WITH_POOL:
        raise ValueError(spec_draft.INKLING_DRAFT)
    return spec_draft.draft_layers(model, spec)


def _model_defaults(model: Model, options: dict) -> tuple[dict, list[str]]:
    """The options with a family's own defaults where SGLang's model overrides set them (Inkling's ratios and
    extra-buffer strategy: kvmem.engines.sglang.inkling), and the notes saying so."""
    if inkling.is_inkling(model):
        return inkling.resolve_options(options)
    return mamba.resolve_extra_buffer(model.facts.architectures, options), []


def estimate(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, **options):
    """Bytes SGLang's pools hold for ``batch`` sequences of ``tokens``: the pool rows this workload occupies.
    Each sequence takes whole pages (cdiv(tokens, page_size)), plus the one padding page per layer. In
    hybrid-SWA pools a sliding layer holds its window rounded up to whole pages: SGLang frees out-of-window
    tokens lazily (sglang@v0.5.23 python/sglang/srt/managers/schedule_batch.py#L4125-L4129 _evict_swa,
    page-aligned, between steps), so the real occupancy runs up to about a window and a page above this.
    Recurrent state is ``batch`` x the per-request state (the pool's own extra slot is not counted)."""
    spec, options = spec_draft.split(options)
    drafting = _drafting(model, spec)
    if dsv4.is_dsv4(model):   # DeepSeek-V4: SGLang's DSV4PoolConfigurator and DeepSeekV4TokenToKVPool
        if drafting.layers:
            raise ValueError(f"{model.name}: a speculative draft with DeepSeek-V4: DSV4PoolConfigurator sizes it "
                             "in its own code, which kvmem does not follow")
        return dsv4.estimate(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    options, notes = _model_defaults(model, options)
    layout = make_layout(model, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    if drafting.pool:
        spec_draft.check_target(model, layout, pp, own_head=drafting.pool_layers is not None)
    page = layout.page_size
    pages = cdiv(tokens, page)
    rows = {"full": batch * pages * page}
    notes += layout.notes
    swa = {}
    if layout.swa:
        swa_pages = cdiv(min(tokens, layout.window), page)
        rows["swa"] = batch * swa_pages * page
        swa = {"swa_window": layout.window, "swa_pages_per_sequence": swa_pages, "swa_pool_tokens": rows["swa"]}
        notes.append(f"sliding layers hold their {layout.window}-token window in whole pages; SGLang frees "
                     "out-of-window tokens lazily, so between evictions they hold up to about one more "
                     "window and a page")
    if pages * page != tokens:
        notes.append(f"each sequence takes whole {page}-token pages: {tokens:,} -> {pages * page:,} tokens")
    notes.append(f"each pool layer has one extra {page}-token page (slot 0, written by padded tokens)")
    if layout.linear and not layout.states:   # Inkling's conv state says its own (kvmem.engines.sglang.inkling)
        notes.append("linear/Mamba layers keep a per-request state (conv in the model dtype, recurrent "
                     f"state in {layout.ssm_dtype.name}) instead of tokens")
    rows_per_layer = layer_rows(model, layout, tp, rows, batch)
    if drafting.draft_tokens and layout.linear:
        # a Mamba target keeps D verify states a request beside its state (kv_cache_configurator.py#L3294-L3385)
        rows_per_layer = [(k, v, st * (1 + drafting.draft_tokens)) for k, v, st in rows_per_layer]
        notes.append(f"speculative verify: each request's linear/Mamba state is kept {drafting.draft_tokens} more "
                     "times, one per draft token (SGLang's intermediate state cache)")
    if drafting.pool:   # the draft pool's rows: the same tokens, its layers shaped as the target's (draft.py)
        n = rows["full"] + page
        # a DSA draft's indexer keys on every draft layer (draft.draft_pool_of)
        draft_row = (n * layout.k_row["full"] + index_bytes(rows["full"], page, layout.index_row),
                     n * layout.v_row["full"], 0)
        rows_per_layer = list(rows_per_layer) + [draft_row] * (drafting.pool - drafting.swa_layers)
        if drafting.swa_layers:   # sliding draft layers at the SWA pool's rows (pool_configurator.py#L805-L811)
            n = rows["swa"] + page
            rows_per_layer += [(n * layout.k_row["swa"], n * layout.v_row["swa"], 0)] * drafting.swa_layers
        notes.append(f"{drafting.algorithm} draft: {drafting.pool} draft layer{'s' * (drafting.pool != 1)} hold "
                     "the same tokens in the draft worker's own pool (the last rows of per_layer)")
    details = SglangDetails(layout=layout.kind, page_size=page, pages_per_sequence=pages, pool_tokens=rows["full"],
                            padding_tokens_per_layer=page, kv_heads_per_rank=layout.heads,
                            cell_bytes_per_token=cell_size(model, kv_dtype=kv_dtype, tp=tp, pp=pp, **options), **swa)
    return assemble(model, "sglang", tokens=tokens, batch=batch, kv_dtype=layout.k_dtype.name, tp=tp,
                    pp=pp, rows=rows_per_layer, notes=notes, details=details, block_size=page)


def _split_swa(layout: Layout, stage: range, tokens: int, rest: int, ratio, draft_full: int = 0,
               draft_swa: int = 0) -> tuple[int, int]:
    """(full, swa) pool tokens from the KV bytes ``rest`` (``tokens``: rest // cell, page-aligned): full =
    int(T x (F n_f + S n_s) / (F n_f + r S n_s)), swa = int(full x r), both floored to page_size, r =
    swa_full_tokens_ratio (0.8); SGLang does these splits in float (GiB and ratios), and so does kvmem, so
    the printed counts come out the same; bytes stay exact integers (sglang@v0.5.23
    python/sglang/srt/model_executor/pool_configurator.py#L859-L893 HybridSWAPoolConfigurator._solve_pool_sizes)."""
    page = layout.page_size
    full_ids, swa_ids = set(layout.full), set(layout.swa)
    n_full = sum(i in full_ids for i in stage)
    n_swa = sum(i in swa_ids for i in stage)
    if n_swa == 0:
        return tokens, 0
    if n_full == 0:
        return 0, tokens // page * page
    # sglang@v0.5.23 python/sglang/srt/model_executor/pool_configurator.py#L786-L803 _recompute_cell_size,
    # #L907-L916 calculate_pool_sizes, #L859-L893 _solve_pool_sizes: max_total_num_tokens is
    # int(bytes // (full cell + ratio x SWA cell)) straight from the bytes (in float), full the page-aligned
    # count, swa int(full x ratio) page-aligned. (Flooring to rest // (full + SWA cell) first lost a token:
    # gpt-oss-120b on 10 GiB, SGLang 161,817 full / 129,453 SWA, kvmem had 161,816 / 129,452;
    # tests/oracles/test_hybrid_verdicts_oracle.py)
    # a speculative draft's layers price as the target's of their kind (pool_configurator.py#L771-L803)
    full_cell, swa_cell = layout.cell["full"] * (n_full + draft_full), layout.cell["swa"] * (n_swa + draft_swa)
    full = int(rest // (full_cell + ratio * swa_cell)) // page * page
    return full, int(full * ratio) // page * page


# sglang@v0.5.23 python/sglang/srt/model_executor/pool_configurator.py#L198-L216 validate_swa_pool_size (called
# by _solve_pool_sizes, #L879-L882): a ValueError at startup when the SWA pool holds no more than the window and a
# page, whatever the requests' length (gemma-4-26b-a4b on 50 MB: 216 SWA tokens, window 1,024)
def swa_pool_too_small(swa: int, window: int, page: int) -> str | None:
    if window + page < swa:
        return None
    return (f"SGLang raises ValueError: SWA pool ({swa} tokens) cannot hold even one request: the prefill admission "
            f"floor is sliding_window_size ({window}) + page_size ({page}). Increase --swa-full-tokens-ratio or "
            "the total KV budget.")


# sglang@v0.5.23 python/sglang/srt/model_executor/pool_configurator.py#L94-L99 MemoryPoolConfig.__post_init__:
# a RuntimeError when the budget holds no token (" Current value: mem_fraction_static=..." follows where set)
NOT_ENOUGH_MEMORY = "SGLang raises RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


def _refused(model: Model, kv_memory: int, layout: Layout, cell, tokens: int, notes: list, reason: str,
             state=None) -> Capacity:
    """The pool SGLang would not build: no token, no block, and SGLang's own error as the refusal (with the state
    slots SGLang had computed before it, where a hybrid's state pool came first)."""
    page = layout.page_size
    details = SglangCapacityDetails(layout=layout.kind, page_size=page, cell_bytes_per_token=int(cell),
                                    max_total_num_tokens=max(tokens, 0),
                                    **({} if state is None else {"max_mamba_cache_size": state.slots}))
    return Capacity(model=model.name, engine="sglang", kv_memory=kv_memory, blocks=0, tokens=0,
                    max_concurrency=0.0, longest_request_tokens=0, block_size=page,
                    notes=tuple(notes) + (reason,), details=details, k_dtype=layout.k_dtype.name,
                    v_dtype=layout.k_dtype.name, refusal=Refusal(reason))


def capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None,
             **options):
    """Tokens (max_total_num_tokens) and pages a KV budget (SGLang's ``rest``) holds: rest // cell_size, floored to
    a multiple of page_size (sglang@v0.5.23 python/sglang/srt/model_executor/pool_configurator.py#L637-L647
    calculate_pool_sizes). ``rest`` (kvmem's ``kv_memory``) is what the sizing step left for the cache:
    available_after_weights - free_before_weights x (1 - mem_fraction_static). Ranks of a pipeline take the
    minimum. Linear hybrids first give the Mamba pool its slots from rest x r / (1 + r) (r =
    mamba_full_memory_ratio, 0.9) less one padding slot, or from --max-mamba-cache-size /
    --max-running-requests, and cap the requests at slots // 3 (+2 with the extra buffer and overlap
    scheduling); the cells get the remainder (kvmem.engines.sglang.mamba). Hybrid SWA then splits the tokens
    (_split_swa)."""
    spec, options = spec_draft.split(options)
    drafting = _drafting(model, spec)
    if dsv4.is_dsv4(model):   # DeepSeek-V4: SGLang's DSV4PoolConfigurator and DeepSeekV4TokenToKVPool
        if drafting.layers:
            raise ValueError(f"{model.name}: a speculative draft with DeepSeek-V4: DSV4PoolConfigurator sizes it "
                             "in its own code, which kvmem does not follow")
        return dsv4.capacity(model, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp,
                             max_model_len=max_model_len, **options)
    options, notes = _model_defaults(model, options)
    layout = make_layout(model, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    if drafting.pool:
        spec_draft.check_target(model, layout, pp, own_head=drafting.pool_layers is not None)
    page = layout.page_size
    notes += layout.notes
    draft_cell = 0
    best: tuple[int, range, int, mamba.StatePool | None, int] | None = None     # (tokens, stage, cell, state, rest)
    full_layers = set(layout.full)
    requested = options.get("max_running_requests")
    if requested is None and drafting.algorithm is not None:
        # sglang@v0.5.23 python/sglang/srt/arg_groups/speculative_hook.py#L1086-L1094 (EAGLE, EAGLE3, NEXTN,
        # STANDALONE), #L1294-L1298 (NGRAM): speculative decoding sets max_running_requests to 48 unless given
        requested = spec_draft.SPECULATIVE_MAX_RUNNING_REQUESTS
        notes.append(f"speculative decoding: SGLang sets max_running_requests to {requested} unless "
                     "--max-running-requests is given")
    slot_ratio = mamba.ratio(disable_radix_cache=options.get("disable_radix_cache", False),
                             mamba_extra_buffer=options.get("mamba_extra_buffer", False),
                             disable_overlap_schedule=options.get("disable_overlap_schedule", False))
    for stage in pp_stages(model.num_layers, pp):
        cell = stage_cell(layout, stage)
        if drafting.layers and cell and not layout.swa:   # the draft's share of the cell (sglang/draft.py)
            # over the stage's attention layers (pool_configurator.py#L229-L236: a Mamba hybrid's
            # full_attention_layer_ids; every layer otherwise)
            attention = sum(1 for i in stage if i in full_layers) or len(stage)
            draft_cell = (spec_draft.dsa_draft_cell_bytes(layout, stage, cell, drafting.layers) if layout.indexed
                          else spec_draft.draft_cell_bytes(cell, drafting.layers, attention))
            cell += draft_cell
        if not cell and (layout.full or layout.swa):
            continue   # a stage without attention layers: no KV limit there (pool_configurator.py#L240-L250)
        rest, state = kv_memory, None
        linear = set(layout.linear)
        parts = [state_parts_of(model, layout, i, tp) for i in stage if i in linear]
        if parts:   # the state pool first (kvmem.engines.sglang.mamba)
            state = mamba.state_pool(kv_memory, sum(c for c, _ in parts), sum(m for _, m in parts),
                                     memory_ratio=options["mamba_full_memory_ratio"],
                                     max_mamba_cache_size=options.get("max_mamba_cache_size"),
                                     max_running_requests=requested,
                                     disable_radix_cache=options.get("disable_radix_cache", False),
                                     draft_tokens=drafting.draft_tokens, slot_ratio=slot_ratio)
            rest = state.rest_bytes
        # a pure SSM model (no attention layer): a zero-byte cell, and SGLang's token count is the context
        # length (sglang@v0.5.23 python/sglang/srt/model_executor/pool_configurator.py#L246-L250, #L641-L645;
        # utils/hf_transformers/common.py#L677-L694 get_context_length: 2048 without a length field)
        tokens = (int(rest // cell) if cell else max_model_len or model.max_position_embeddings or 2048) // page * page
        if best is None or tokens < best[0]:
            best = (tokens, stage, cell, state, rest)
    tokens, stage, cell, state, rest = best     # type: ignore[misc]  # pp_stages gives at least one stage
    if state is not None and state.slots <= 0:
        return _refused(model, kv_memory, layout, cell, tokens, notes, mamba.too_small(kv_memory, state), state)
    if tokens <= 0:
        return _refused(model, kv_memory, layout, cell, tokens, notes, NOT_ENOUGH_MEMORY, state)
    slots = state.slots if state else None
    per_request = state.per_request if state else None
    full, swa = (_split_swa(layout, stage, tokens, rest, options["swa_full_tokens_ratio"],
                            drafting.layers - drafting.swa_layers, drafting.swa_layers) if layout.swa
                 else (tokens, 0))
    if not layout.full and layout.swa:  # every layer sliding: SGLang's max_total_num_tokens is the SWA pool
        full = swa
    elif layout.swa and full > 0 and any(model.layers[i].kind == SLIDING for i in layout.swa):
        # a chunked-attention model (Llama 4) has no sliding_window_size, and SGLang skips the check
        too_small = swa_pool_too_small(swa, layout.window, page)
        if too_small is not None:
            return _refused(model, kv_memory, layout, cell, tokens, notes, too_small, state)
    concurrency = None
    if max_model_len:
        need = cdiv(max_model_len, page) * page
        concurrency = full / need
        if layout.swa:
            concurrency = min(concurrency, swa / (cdiv(min(max_model_len, layout.window), page) * page))
    requests = mamba.max_running_requests(full, max_model_len or model.max_position_embeddings or full, slots,
                                          slot_ratio, requested) if full > 0 else 0
    if slots is not None and full > 0 and requests <= 0:
        return _refused(model, kv_memory, layout, cell, tokens, notes, mamba.serves_none(slots, slot_ratio, requests),
                        state)
    if concurrency is not None and slots is not None:
        concurrency = min(concurrency, float(requests))
    extra: dict = {"max_running_requests": requests}
    if layout.swa:
        extra.update(full_layer_tokens=full, swa_layer_tokens=swa)
    if slots is not None:
        extra.update(max_mamba_cache_size=slots, mamba_bytes_per_request=per_request)
        notes.append(f"{slots:,} Mamba state slots (and a padding slot) take "
                     f"{state.conv_bytes + state.ssm_bytes:,} B of the budget first "  # type: ignore[union-attr]  # slots set: a state pool
                     f"(mamba_full_memory_ratio {options['mamba_full_memory_ratio']}); SGLang admits "
                     f"{requests:,} requests at once (max_running_requests)")
    if full > 0:
        allocated = pools(model, num_tokens=full, kv_dtype=kv_dtype, tp=tp, pp=pp,
                          swa_num_tokens=swa if layout.swa else None, **options)
        if drafting.layers and layout.swa and drafting.draft is not None:
            # a draft model beside a hybrid-SWA target: priced in the cell as the target's layers
            # (HybridSWAPoolConfigurator), while the draft worker builds its own pools from the draft's config at the
            # target's sizes: max_total_num_tokens (the full pool's) for a one-pool draft, the full and SWA counts
            # for a hybrid-SWA draft (sglang@v0.5.23 python/sglang/srt/mem_cache/kv_cache_configurator.py#L528-L545
            # _derive_pool_sizes, #L1884-L1921 _build_token_to_kv_pool)
            own = pools(drafting.draft, num_tokens=full, kv_dtype=kv_dtype, tp=tp, swa_num_tokens=swa, **options)
            own = tuple(replace(p, role="draft" if p.role == "full" else f"draft {p.role}") for p in own)
            allocated = allocated + own
            extra.update(draft_layers=drafting.layers, draft_pool_bytes=sum(p.kv_bytes for p in own))
            notes.append(f"{drafting.algorithm} draft: {drafting.layers - drafting.swa_layers} full and "
                         f"{drafting.swa_layers} sliding draft layer(s) priced in the cell as the target's "
                         "(HybridSWAPoolConfigurator); the draft worker's own pools, from the draft's config: "
                         f"{sum(p.kv_bytes for p in own):,} B a GPU")
        elif drafting.layers and layout.swa:   # the target's own MTP head: its worker's pools are not modelled
            extra.update(draft_layers=drafting.layers)
            notes.append(f"{drafting.algorithm} draft: {drafting.layers - drafting.swa_layers} full and "
                         f"{drafting.swa_layers} sliding draft layer(s) priced in the cell as the target's "
                         "(HybridSWAPoolConfigurator); the MTP head's own pools (one draft worker a depth) are not "
                         "modelled")
        elif drafting.pool:   # the draft worker's pool: the same #tokens, its layers shaped as the target's
            allocated = allocated + (spec_draft.draft_pool_of(layout, full, drafting.pool, allocated[-1].dtype),)
            extra.update(draft_layers=drafting.pool, draft_cell_bytes=draft_cell,
                         draft_pool_bytes=allocated[-1].kv_bytes)
            if drafting.layers:
                notes.append(f"{drafting.algorithm} draft: each token also takes {draft_cell:,} B in the draft's "
                             f"pool ({drafting.layers} layer{'s' * (drafting.layers != 1)}; int(cell x "
                             f"{drafting.layers} / attention layers), SGLang's pool_configurator.py): "
                             f"{allocated[-1].kv_bytes:,} B a GPU")
            else:   # a Mamba target whose config names no num_nextn_predict_layers (draft.mamba_draft)
                notes.append(f"{drafting.algorithm} draft: the target's MTP head keeps one attention layer at the "
                             f"target's #tokens, {allocated[-1].kv_bytes:,} B a GPU, which SGLang's cell does not "
                             "count (the target config has no num_nextn_predict_layers): it comes out of the memory "
                             "outside mem_fraction_static")
        if state is not None and state.intermediate_bytes:
            extra.update(mamba_verify_state_bytes=state.intermediate_bytes)
            notes.append(f"speculative verify: {state.intermediate_bytes:,} B of linear/Mamba states for "
                         f"{drafting.draft_tokens} draft tokens, reserved before the KV pool; SGLang's \"Mamba Cache "
                         "is allocated\" line then also prints intermediate_ssm_state_cache and "
                         "intermediate_conv_window_cache sizes (memory_pool.py MambaPool), which the line here "
                         "leaves out")
        extra.update(pools=[p.to_dict() for p in allocated], allocated_bytes=sum(p.kv_bytes for p in allocated),
                     log=([state.log_line()] if state else [])
                     + [p.log_line(version=options.get("version", "latest")) for p in allocated])
    details = SglangCapacityDetails(layout=layout.kind, page_size=page, cell_bytes_per_token=cell,
                                    max_total_num_tokens=tokens, **extra)
    return Capacity(model=model.name, engine="sglang", kv_memory=kv_memory, blocks=full // page, tokens=full,
                    max_concurrency=concurrency, longest_request_tokens=full, block_size=page, notes=tuple(notes),
                    details=details, log_lines=tuple(details.log or ()), k_dtype=layout.k_dtype.name,
                    v_dtype=layout.k_dtype.name)
