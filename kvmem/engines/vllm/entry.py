"""estimate() and capacity(): vLLM's blocks for a workload, and what a memory budget holds."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from ...model import Model
from ...records import Record
from ...units import cdiv
from ..results import Capacity, Refusal, assemble
from .layout import Plan
from .layout import make_plan as _make_plan
from .options import (
    GIB,
    HYBRID_GROUPS,
    NULL_BLOCK,
    ONE_LOG_LINE,
    TOKENS_FROM_BLOCKS,
    TOKENS_FROM_CONCURRENCY,
    VllmOptions,
    check_options,
)
from .pool import (
    check_memory,
    group_details,
    held_pages,
    in_flight_tokens,
    longest_fitting,
    owners,
    pool_page_bytes,
    request_blocks,
    request_bytes,
    stage_blocks,
    stage_group_size,
    stage_pool_bytes,
    stage_units,
)
from .v0 import capacity_v0, estimate_v0


@dataclass(frozen=True)
class VllmDetails(Record):
    """Estimate.details: what the batch's blocks are made of (keys as the fields)."""

    version: str
    block_size: int              # tokens per block
    page_bytes: list             # the distinct page sizes, bytes
    groups: list                 # per KV cache group: kind, layers, block size, page bytes, blocks per sequence
    blocks: int                  # blocks the batch holds
    pool_bytes: int              # what those blocks take of the pool, padding layers' slots included
    padding_bytes: int
    uniform_type: bool


@dataclass(frozen=True)
class VllmCapacityDetails(Record):
    """Capacity.details: the pool a budget makes and what vLLM logs for it."""

    version: str
    num_blocks: int
    blocks_per_stage: list
    blocks_per_request: int
    groups: int
    group_layers: list
    padding_layers: int
    page_bytes: list
    uniform_type: bool
    request_bytes: int           # one request of max_model_len, its worst case
    log: list


def _plan_once(model: Model, kv_dtype, tp: int, pp: int, options: VllmOptions) -> Plan:
    plan = _make_plan(model, kv_dtype, tp, pp, options)
    one: dict = {}                    # equal specs as one object, so per-spec work is done once per estimate
    return replace(plan, units=[(owner, one.setdefault(spec, spec)) for owner, spec in plan.units])


def make_plan(model: Model, kv_dtype, tp: int, pp: int, opts: VllmOptions) -> Plan:
    """The model's vLLM layout (layout.make_plan), built once per model, KV format, parallelism and
    options: a fit or a sweep asks for the same layout at many lengths and batches (a 70B fit
    built it ~35 times). A Plan is shared, so no caller changes it (estimate copies its notes)."""
    try:
        return _shared_plan(model, kv_dtype, tp, pp, opts)
    except TypeError:                       # an unhashable option value: build it each time
        return _make_plan(model, kv_dtype, tp, pp, opts)


# keyed by the model's value (Model.__hash__ is its cached fingerprint): equal models share a layout
@lru_cache(maxsize=256)
def _shared_plan(model: Model, kv_dtype, tp: int, pp: int, opts: VllmOptions) -> Plan:
    return _plan_once(model, kv_dtype, tp, pp, opts)


def estimate(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, **options):
    """Bytes of the blocks vLLM allocates for ``batch`` sequences of ``tokens`` tokens (PageSpec.held_blocks).
    Padding-layer slots of those blocks are reported in details, not per layer; draft layers follow the
    model's own in per_layer."""
    opts = check_options(options, model)
    plan = make_plan(model, kv_dtype, tp, pp, opts)
    if opts.release is None:
        return estimate_v0(model, plan, tokens=tokens, batch=batch, tp=tp, pp=pp, opts=opts)
    held = held_pages(plan, tokens, opts)
    peak = held_pages(plan, tokens, opts, peak=True)
    split: dict = {}                  # (spec, blocks) -> (K, V, state): equal layers are split once

    def part(spec, blocks):
        key = (id(spec), blocks)
        hit = split.get(key)
        if hit is None:
            hit = split[key] = spec.kv_split(blocks * batch)
        return hit

    if [owner for owner, _ in plan.units] == list(range(plan.n_layers)):
        rows = [part(spec, blocks) for (_, spec), blocks in zip(plan.units, held, strict=True)]
    else:
        rows = [(0, 0, 0)] * plan.n_layers
        for (owner, spec), blocks in zip(plan.units, held, strict=True):
            k, v, s = part(spec, blocks)
            rows[owner] = (rows[owner][0] + k, rows[owner][1] + v, rows[owner][2] + s)
    stages = stage_units(plan, pp)
    real = [sum(sum(rows[owner]) for owner in owners(plan, members)) for members in stages]
    largest = max(range(pp), key=lambda s: real[s])
    members = stages[largest]
    if plan.packed:
        pool = stage_pool_bytes(plan, held, batch, members)
        blocks = batch * sum(max(held[i] for i in group) for group in plan.groups)
    elif plan.uniform_type:
        pool = real[largest]
        blocks = batch * max(held)
    else:
        group_size = stage_group_size(plan, members)
        per_sequence = sum(held[group[0]] for group in plan.groups)
        pool = group_size * pool_page_bytes(plan) * batch * per_sequence
        blocks = batch * per_sequence
    growth = stage_pool_bytes(plan, peak, batch, members) - stage_pool_bytes(plan, held, batch, members)
    notes = list(plan.notes)
    _explain(notes, plan, tokens, opts.num_speculative_tokens, pool - real[largest])
    if growth:
        notes.append(f"on the way to {tokens:,} tokens a sequence holds up to {growth // batch:,} B more: a window "
                     "layer frees a block only when all its tokens have left the window, so the peak_bytes "
                     "(what fit sizes for) are the most any length up to this one holds")
    details = VllmDetails(version=opts.version, block_size=plan.block_size,
                          page_bytes=sorted({spec.page_bytes for _, spec in plan.units}),
                          groups=group_details(plan, held), blocks=blocks, pool_bytes=pool,
                          padding_bytes=pool - real[largest], uniform_type=plan.uniform_type)
    result = assemble(model, "vllm", tokens=tokens, batch=batch, kv_dtype=plan.fmt.name, tp=tp, pp=pp,
                      rows=rows, notes=notes, details=details, block_size=plan.block_size)
    padding = pool - real[largest]
    if growth:
        result = replace(result, peak_bytes=result.peak_bytes + growth)
    if not padding:
        return result
    # Padding layers' page slots are taken from the pool with every block: they count in this device's
    # bytes, as K, V or state as the groups they pad hold them, though no model layer in per_layer owns them.
    k, v, state = _padding_split(plan, members, padding)
    return replace(result, k_bytes=result.k_bytes + k, v_bytes=result.v_bytes + v,
                   state_bytes=result.state_bytes + state, peak_bytes=result.peak_bytes + padding,
                   kv_bytes_all_devices=result.kv_bytes_all_devices + tp * (k + v),
                   state_bytes_all_devices=result.state_bytes_all_devices + tp * state)


def _padding_split(plan: Plan, members, padding: int) -> tuple[int, int, int]:
    """``padding`` bytes as (K, V, state) in the proportions of the groups a stage holds fewer units
    of than the group size (a Mamba group's padding is state, an MLA group's the latent: K); half K,
    half V when no group is short (pages padded to the largest)."""
    if plan.packed:    # the narrower groups' share of each block: K (rows) and state as the layers hold them
        weights = [sum(plan.units[i][1].kv_split(1)[j] for i in members) for j in range(3)]
    elif plan.uniform_type:
        weights = [1, 1, 0]
    else:
        size, weights = stage_group_size(plan, members), [0, 0, 0]
        for group in plan.groups:
            short = size - sum(i in members for i in group)
            if short > 0:
                for j, part in enumerate(plan.units[group[0]][1].kv_split(1)):
                    weights[j] += short * part
        weights = weights if any(weights) else [1, 1, 0]
    parts = [padding * w // sum(weights) for w in weights]
    parts[weights.index(max(weights))] += padding - sum(parts)
    return parts[0], parts[1], parts[2]


def _explain(notes: list, plan: Plan, tokens: int, lookahead: int, padding: int) -> None:
    """Notes on where vLLM's bytes differ from the textbook count."""
    kinds = {spec.kind for _, spec in plan.units}
    bs = plan.block_size
    slots = cdiv(tokens + lookahead, bs) * bs
    if slots != tokens:
        spare = f" ({lookahead} of them lookahead slots for speculative tokens)" if lookahead else ""
        notes.append(f"whole blocks of {bs} tokens: {tokens:,} tokens take {slots:,} slots per sequence "
                     f"and full-attention layer{spare}")
    if "sliding" in kinds:
        notes.append("sliding layers keep only the blocks holding the last `window` tokens, the partly "
                     "used first block included")
    if "chunked" in kinds:
        notes.append("chunked layers keep only the blocks of the current attention chunk")
    if "mamba" in kinds:
        notes.append("Mamba/linear layers hold a fixed state page per sequence (state_bytes), not per token")
    if padding:
        notes.append(f"{padding:,} B of the blocks are the slots of padding layers")


def capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None,
             **options) -> Capacity:
    """What vLLM makes of ``kv_memory`` bytes per GPU: its block count and the lines it logs."""
    opts = check_options(options, model)
    plan = make_plan(model, kv_dtype, tp, pp, opts)
    release = opts.release
    if release is not None:
        opts = replace(opts, in_flight_tokens=in_flight_tokens(opts, pp))
    length = max_model_len or model.max_position_embeddings
    if length is None:
        raise ValueError("max_model_len is needed: the model config gives no max_position_embeddings")
    notes = list(plan.notes)
    if max_model_len is None:
        notes.append(f"max_model_len {length:,} (the model's max_position_embeddings)")
    elif model.max_position_embeddings and max_model_len > model.max_position_embeddings:
        notes.append(f"max_model_len {max_model_len:,} exceeds the model's {model.max_position_embeddings:,} "
                     "positions; vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    stages = stage_units(plan, pp)
    bs = plan.block_size
    if release is None:
        return capacity_v0(model, plan, stages, kv_memory, length, opts, notes)
    per_stage = [stage_blocks(plan, members, kv_memory) for members in stages]
    num_blocks = min(blocks for blocks in per_stage if blocks is not None)
    request = request_blocks(plan, length, opts)
    # "GPU KV cache size: N tokens" by release (the v0 engine: kvmem.engines.vllm.v0):
    #   < 0.8      "# GPU blocks: N", concurrency num_blocks x bs / L (early V1: sliding/chunked layers beside
    #              full ones are cached as full, PR #14097)
    #   0.8        N = num_blocks x bs, concurrency N / L (PR #13596)
    #   0.9-0.20   N = num_blocks // number_of_groups x smallest block size, concurrency as above; groups from
    #              the hybrid allocator (PR #17996, June 2025; kvmem applies it from 0.9, though 0.9.0 itself may
    #              predate it)
    #   >= 0.21    N = int(concurrency x L) (options.TOKENS_FROM_CONCURRENCY; vllm@v0.33.0
    #              vllm/v1/core/kv_cache_utils.py#L1120-L1128 get_kv_cache_capacity)
    if release < HYBRID_GROUPS:
        concurrency = num_blocks * bs / length
    else:
        concurrency = num_blocks / request
    if release >= TOKENS_FROM_CONCURRENCY:
        # vLLM: int(max_concurrency * max_model_len) in floats; past 2**53 floats lose whole
        # tokens, so there the same quotient is taken exactly
        tokens = int(concurrency * length)
        if tokens >= 2**53:
            tokens = num_blocks * length // request
    elif release >= HYBRID_GROUPS:
        tokens = num_blocks // len(plan.groups) * bs
    else:
        tokens = num_blocks * bs
    cap = model.max_position_embeddings
    usable = {i: check_memory(plan, m, kv_memory, release) for i, m in enumerate(stages)}
    longest = longest_fitting(lambda n: all(request_bytes(plan, m, n, opts) <= usable[i]
                                            for i, m in enumerate(stages) if m), cap)
    short = [(i, request_bytes(plan, m, length, opts)) for i, m in enumerate(stages) if m]
    short = [(i, need) for i, need in short if need > usable[i]]
    needed = max(request_bytes(plan, m, length, opts) for m in stages)
    refuses = None
    if short:
        stage, need = short[0]
        null = " (the null block left out)" if release >= NULL_BLOCK else ""
        refuses = (f"vLLM refuses to start: one request of {length:,} tokens needs {need / GIB:.2f} GiB "
                   f"of KV cache, more than the {usable[stage] / GIB:.2f} GiB available{null}; the "
                   f"longest that fits is {longest:,}")
        notes.append(refuses)
    log = pool_log_lines(release, num_blocks, tokens, concurrency, length)
    details = VllmCapacityDetails(version=opts.version, num_blocks=num_blocks, blocks_per_stage=per_stage,
                                  blocks_per_request=request, groups=len(plan.groups),
                                  group_layers=[len(g) for g in plan.groups], padding_layers=plan.padding_layers,
                                  page_bytes=sorted({spec.page_bytes for _, spec in plan.units}),
                                  uniform_type=plan.uniform_type, request_bytes=needed, log=log)
    return Capacity(model=model.name, engine="vllm", kv_memory=kv_memory, blocks=num_blocks, tokens=tokens,
                    max_concurrency=concurrency, longest_request_tokens=longest, block_size=bs,
                    notes=tuple(notes), details=details, log_lines=tuple(log), k_dtype=plan.fmt.name,
                    v_dtype=plan.fmt.name, refusal=Refusal(refuses) if refuses else None)


def pool_log_lines(release, num_blocks: int, tokens: int, concurrency: float, length: int) -> list[str]:
    """The lines vLLM prints for this pool, in the release's own format."""
    if release < TOKENS_FROM_BLOCKS:
        return [f"# GPU blocks: {num_blocks}",
                f"Maximum concurrency for {length} tokens per request: {concurrency:.2f}x"]
    size = f"GPU KV cache size: {tokens:,} tokens"
    most = f"Maximum concurrency for {length:,} tokens per request: {concurrency:.2f}x"
    return [f"{size}, {most}"] if release >= ONE_LOG_LINE else [size, most]
