"""Pool arithmetic: pages per stage, a request's worst case, the pages a sequence holds."""

from __future__ import annotations

from ...parallel import pp_stages
from .layout import Plan
from .options import IN_FLIGHT_BATCHES, NULL_BLOCK, VllmOptions


def stage_units(plan: Plan, pp: int) -> list[set]:
    """Unit indices each pipeline stage holds (draft layers are refused with pp > 1: where vLLM puts them is not
    modelled): a rank holds its stage's layers (vllm@v0.33.0 vllm/distributed/utils.py#L198-L241 get_pp_indices)."""
    return [{i for i, (owner, _) in enumerate(plan.units) if owner in stage} for stage in pp_stages(plan.n_layers, pp)]


def stage_group_size(plan: Plan, members: set) -> int:
    """The most units of one group a stage holds: the pages one block takes on this rank."""
    return max(sum(i in members for i in group) for group in plan.groups)


def pool_page_bytes(plan: Plan) -> int:
    return plan.units[plan.groups[0][0]][1].page_bytes


def packed_block_bytes(plan: Plan, members: set) -> int:
    """A packed plan's block: one page of every layer of its widest group on this rank
    (vllm@v0.33.0 vllm/v1/core/kv_cache_planning.py#L574-L605 _get_kv_cache_bytes_per_block, block-outermost)."""
    return max(sum(plan.units[i][1].page_bytes for i in group if i in members) for group in plan.groups)


def _packed_pages(plan: Plan, pages: list[int]) -> int:
    """Blocks one sequence takes in a packed plan: per group, the most pages any of its layers needs
    (UniformTypeKVCacheSpecs.max_memory_usage_pages), summed over the groups."""
    return sum(max(pages[i] for i in group) for group in plan.groups)


def stage_blocks(plan: Plan, members: set, kv_memory: int) -> int | None:
    """num_blocks one rank's memory gives (get_kv_cache_config_from_groups); None without layers."""
    if not members:
        return None
    if plan.packed:
        return kv_memory // packed_block_bytes(plan, members)
    if plan.uniform_type:
        pages = sum(plan.units[i][1].page_bytes for i in members)
        return kv_memory // pages
    group_size = stage_group_size(plan, members)
    return max(kv_memory // pool_page_bytes(plan) // group_size, 0)


def in_flight_tokens(opts: VllmOptions, pp: int) -> int:
    """Tokens scheduled but not yet settled that a window reserves (VllmConfig.max_in_flight_tokens).

    From v0.26: max_concurrent_batches x max_num_batched_tokens, with max_concurrent_batches =
    pp + 1 under async scheduling (the default; model runner V2, the CUDA default), else pp
    (vllm@v0.33.0 vllm/config/vllm.py#L600-L609; PR #47728, vllm#49878 saw the jump from v0.25.1 to v0.26).
    Before: max_num_batched_tokens.
    """
    batched = opts.max_num_batched_tokens
    if opts.release < IN_FLIGHT_BATCHES:
        return batched
    return (pp + 1 if opts.async_scheduling else pp) * batched


def _worst_args(max_model_len: int, opts: VllmOptions) -> tuple:
    return (max_model_len, opts.in_flight_tokens, opts.mamba_cache_mode,
            opts.num_speculative_tokens)


def request_blocks(plan: Plan, max_model_len: int, opts: VllmOptions) -> int:
    """Pages one request of max_model_len needs: "Maximum concurrency for L tokens per request: X x" = num_blocks /
    the sum over groups of these (UniformType: the largest per layer), vllm@v0.33.0
    vllm/v1/core/kv_cache_utils.py#L1061-L1093 get_max_concurrency_for_kv_cache_config."""
    args = _worst_args(max_model_len, opts)
    if plan.packed:
        return _packed_pages(plan, [spec.worst_blocks(*args) for _, spec in plan.units])
    if plan.uniform_type:
        return max(spec.worst_blocks(*args) for _, spec in plan.units)
    return sum(plan.units[group[0]][1].worst_blocks(*args) for group in plan.groups)


def request_bytes(plan: Plan, members: set, max_model_len: int, opts: VllmOptions) -> int:
    """One request's worst case on one rank, padding included (vllm@v0.33.0
    vllm/v1/core/kv_cache_planning.py#L1253-L1285 _max_memory_usage_bytes_from_groups)."""
    args = _worst_args(max_model_len, opts)
    if plan.packed:     # _max_memory_usage_bytes_from_groups: bytes_per_block x the blocks of every group
        return packed_block_bytes(plan, members) * request_blocks(plan, max_model_len, opts)
    if plan.uniform_type:
        return sum(plan.units[i][1].worst_blocks(*args) * plan.units[i][1].page_bytes for i in members)
    group_size = stage_group_size(plan, members)
    return group_size * pool_page_bytes(plan) * request_blocks(plan, max_model_len, opts)


def block_bytes(plan: Plan, members: set) -> int:
    """_pool_bytes_per_block on one rank: one block of every layer it holds, padding layers included."""
    if plan.packed:
        return packed_block_bytes(plan, members)
    if plan.uniform_type:
        return sum(plan.units[i][1].page_bytes for i in members)
    group_size = stage_group_size(plan, members)
    return group_size * pool_page_bytes(plan)


def check_memory(plan: Plan, members: set, kv_memory: int, release) -> int:
    """The memory vLLM's admission check and auto-fit plan against: less the null block from v0.28.

    BlockPool holds one block back for good (vllm@v0.33.0 vllm/v1/core/block_pool.py#L189-L192), so auto-fit,
    the refusal ("To serve at least one request ...") and the longest request that fits are checked against
    available - bytes_per_block (one block of every layer of the rank, padding included); the pool itself
    still gets available // bytes_per_block blocks (vllm@v0.33.0 vllm/v1/core/kv_cache_planning.py#L151-L184
    check_enough_kv_cache_memory, #L1461-L1604 get_kv_cache_configs; PR #47272, merged 2026-08-20, taken as
    from v0.28: the first release after it is not pinned here)."""
    if release < NULL_BLOCK or not members:
        return kv_memory
    return kv_memory - block_bytes(plan, members)


# The longest request that fits: vLLM's binary search over the worst case, padding layers included
# (vllm@v0.33.0 vllm/v1/core/kv_cache_planning.py#L1288-L1334 _estimate_max_model_len_from_groups)
def longest_fitting(fits, cap: int | None) -> int:
    """The largest L >= 0 with fits(L), searched up to cap (or 2**40 without one)."""
    high = cap or 1 << 40
    if not fits(1):
        return 0
    if fits(high):
        return high
    low = 1
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


def held_pages(plan: Plan, tokens: int, opts: VllmOptions, *, peak: bool = False) -> list[int]:
    """Pages each unit holds for one sequence of ``tokens`` tokens (``peak``: the most on the way there)."""
    spec_tokens, mode = opts.num_speculative_tokens, opts.mamba_cache_mode
    blocks: dict[int, int] = {}      # per spec object: a plan's equal specs are one object (entry.make_plan)
    out = []
    for _, spec in plan.units:
        held = blocks.get(id(spec))
        if held is None:
            held = blocks[id(spec)] = (spec.peak_blocks if peak else spec.held_blocks)(tokens, spec_tokens, mode,
                                                                                       spec_tokens)
        out.append(held)
    return out


def stage_pool_bytes(plan: Plan, held: list[int], batch: int, members: set) -> int:
    """Pool bytes of one stage's units for ``batch`` sequences holding ``held`` pages each."""
    if plan.packed:
        return packed_block_bytes(plan, members) * batch * _packed_pages(plan, held)
    if plan.uniform_type:
        return sum(held[i] * batch * plan.units[i][1].page_bytes for i in members)
    group_size = stage_group_size(plan, members)
    return group_size * pool_page_bytes(plan) * batch * sum(held[group[0]] for group in plan.groups)


def owners(plan: Plan, members: set) -> set:
    return {plan.units[i][0] for i in members}


def group_details(plan: Plan, held: list[int]) -> list[dict]:
    shapes = []
    for group in plan.groups:
        specs = [plan.units[i][1] for i in group]
        shapes.append({"kind": "+".join(sorted({s.kind for s in specs})), "layers": len(group),
                       "block_size": specs[0].block_size,
                       "page_bytes": (sum(s.page_bytes for s in specs) if plan.uniform_type or plan.packed
                                      else specs[0].page_bytes),
                       "blocks_per_sequence": max(held[i] for i in group)})
    return shapes
