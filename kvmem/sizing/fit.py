"""fit(): does a workload fit, how many sequences, how long a context, on how few GPUs, how fast
(the rules in the kvmem.sizing docstring).
"""

from __future__ import annotations

from dataclasses import replace

from ..engines import ENGINES, capacity as _capacity, estimate as _estimate
from ..engines.base import past_positions
from ..gpus import list_gpus
from ..units import format_bytes
from ..weights import weights as _weights
from .decode import active_weight_bytes, crossover_tokens, kv_read_bytes
from .results import Fit, FitError, MemoryBreakdown
from .search import context_cap, replica_batch, search_max_batch, search_max_context, workload_fits
from .setup import Setup, SetupBudget, budget_for, make_setup, need_bytes


# ----------------------------------------------------------------------------- fit

def fit(model, *, gpu, num_gpus: int = 1, tp: int | None = None, pp: int = 1, context, batch: int | None = None,
        weight_dtype="auto", kv_dtype="auto", engine: str = "vllm", gpu_memory_utilization=0.9,
        **options) -> Fit:
    """Does ``batch`` x ``context`` fit on ``num_gpus`` x ``gpu`` under ``engine``? (module docstring)"""
    s, notes = make_setup(model, gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, context=context, batch=batch,
                      weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=engine,
                      gpu_memory_utilization=gpu_memory_utilization, options=options)
    if s.gpu.usable_memory_source == "vendor_tool" and s.gpu.name in list_gpus():
        notes.append(f"{s.gpu.name}: sized from the vendor tool's total; CUDA sees a few hundred MiB less")
    wanted = s.batch or 1
    per_replica = replica_batch(s)
    budget = budget_for(s, per_replica)
    notes.extend(budget.notes)
    at_one = budget_for(s, 1) if s.rules.batch_dependent else budget
    per_replica_max = search_max_batch(s, at_one.kv_memory)
    max_batch = per_replica_max * s.replicas
    fits = max_batch >= wanted
    max_context = search_max_context(s, at_one.kv_memory, per_replica)
    if max_context == context_cap(s.model) and s.model.max_position_embeddings:
        notes.append(f"max_context stops at the model's max_position_embeddings ({max_context:,})")
    if per_replica_max == s.rules.max_sequences:
        notes.append(f"max_batch stops at {s.engine}'s limit of {per_replica_max} sequences per replica")
    min_gpus = _min_gpus(s)
    kv_per_seq = need_bytes(s, s.context, 1)
    one = _estimate(s.model, engine=s.engine, tokens=s.context, batch=1, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
                    **s.engine_options)
    if one.peak_bytes > one.total_bytes:
        notes.append(f"sized for the engine's peak: one sequence holds up to {format_bytes(one.peak_bytes)} of KV "
                     f"while it is built, {format_bytes(one.peak_bytes - one.total_bytes)} above the "
                     f"{format_bytes(one.total_bytes)} it keeps at {s.context:,} tokens")
    work_batch = per_replica if s.batch is not None else max(per_replica_max, 1)
    kv_work = need_bytes(s, s.context, work_batch)
    shortfall = 0 if fits else max(need_bytes(s, s.context, per_replica) - budget.kv_memory, 0)
    past = past_positions(s.model, ENGINES[s.engine], s.context)
    if past:
        notes.append(past[0])
    if budget.kv_memory < 0:
        notes.append(f"no memory left for KV: weights, activations and overhead exceed the budget by "
                     f"{format_bytes(-budget.kv_memory)} per device")
    kv_pool = max(budget.kv_memory, 0) if s.rules.preallocates else kv_work
    free = budget.total - budget.weights - max(kv_pool, kv_work) - budget.activations - budget.overhead
    breakdown = MemoryBreakdown(total_bytes=budget.total, weights_bytes=budget.weights, kv_bytes=kv_work,
                                kv_pool_bytes=kv_pool, activations_bytes=budget.activations,
                                overhead_bytes=budget.overhead, free_bytes=free)
    speed = speed_all = crossover = None
    if s.gpu.bandwidth_bytes_per_s:
        step_bytes = (active_weight_bytes(s, budget, work_batch) + kv_read_bytes(s, s.context, work_batch))
        speed = s.gpu.bandwidth_bytes_per_s * s.tp / step_bytes
        speed_all = speed * work_batch * s.replicas
    crossover = crossover_tokens(s, budget, work_batch)
    cap = None
    if ENGINES[s.engine].capacity is not None and budget.kv_memory > 0:
        cap = _capacity(s.model, engine=s.engine, kv_memory=budget.kv_memory, kv_dtype=s.kv_dtype, tp=s.tp,
                        pp=s.pp, max_model_len=s.context, **s.engine_options)
    est_dtype = _estimate(s.model, engine=s.engine, tokens=1, batch=1, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
                          **s.engine_options).kv_dtype
    weight_name = budget.weights_obj.weight_dtype if budget.weights_obj else "given"
    suggestions = () if fits else tuple(_suggest(s, budget, max_context, per_replica_max, min_gpus))
    result = Fit(model=s.model.name, gpu=s.gpu.name, engine=s.engine, num_gpus=s.num_gpus, tp=s.tp, pp=s.pp,
                 replicas=s.replicas, context=s.context, batch=s.batch, weight_dtype=weight_name,
                 kv_dtype=est_dtype, fits=fits, max_batch=max_batch, max_context=max_context, min_gpus=min_gpus,
                 breakdown=breakdown, kv_memory_bytes=max(budget.kv_memory, 0), kv_bytes_per_sequence=kv_per_seq,
                 shortfall_bytes=shortfall, decode_tokens_per_s=speed, decode_tokens_per_s_aggregate=speed_all,
                 kv_crossover_tokens=crossover, suggestions=suggestions, notes=tuple(dict.fromkeys(notes)),
                 capacity=cap, breakdown_batch=work_batch, breakdown_context=s.context,
                 engine_refuses=past[1].get("engine_refuses") if past else None,
                 engine_allows_with=past[1].get("engine_allows_with") if past else None)
    if max_batch == 0:
        raise FitError(_not_fitting_message(s, budget, result), result)
    return result


def _tp_candidates(s: Setup) -> list[int]:
    heads = s.model.num_attention_heads
    return [tp for tp in (1, 2, 4, 8, 16, 32, 64) if heads % tp == 0]


def _min_gpus(s: Setup) -> int | None:
    """The fewest GPUs (one replica: tp x pp) that fit the workload."""
    wanted = s.batch or 1
    if s.rules.one_device:
        return 1 if workload_fits(replace(s, num_gpus=1, batch=wanted)) else None
    if s.rules.layer_split:
        for pp in range(1, min(64, s.model.num_layers) + 1):
            trial = replace(s, pp=pp, num_gpus=pp, batch=wanted)
            if workload_fits(trial):
                return pp
        return None
    for tp in _tp_candidates(s):
        trial = replace(s, tp=tp, num_gpus=tp * s.pp, batch=wanted)
        try:
            if workload_fits(trial):
                return tp * s.pp
        except ValueError:       # tp not allowed for this model's KV heads or state
            continue
    return None


def _suggest(s: Setup, budget: SetupBudget, max_context: int, per_replica_max: int,
             min_gpus: int | None) -> list[str]:
    out = []
    gpus_per_replica = s.tp * s.pp
    if min_gpus and min_gpus > gpus_per_replica:
        how = f"pp={min_gpus}" if s.rules.layer_split or s.rules.one_device else f"tp={min_gpus // s.pp}"
        out.append(f"{min_gpus} GPUs per replica ({how})")
    if s.batch and per_replica_max:
        replicas = -(-s.batch // per_replica_max)
        if replicas > s.replicas:
            out.append(f"{replicas * gpus_per_replica} GPUs as {replicas} replicas of tp={s.tp} x pp={s.pp} "
                       f"({per_replica_max} sequences each)")
    current = budget.weights_obj.weight_dtype if budget.weights_obj else None
    if current and s.sizing.get("weights_bytes") is None:
        current_bytes = budget.weights_obj.total_bytes
        for name in s.rules.weight_formats:
            try:
                smaller = _weights(s.model, name).total_bytes < current_bytes
                if smaller and workload_fits(replace(s, weight_dtype=name)):
                    out.append(f"weight_dtype={name!r}")
                    break
            except ValueError:
                continue
    kv_alt = s.rules.kv_smaller_dtype
    if kv_alt is not None:
        try:
            here = _estimate(s.model, engine=s.engine, tokens=1, batch=1, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
                             **s.engine_options)
            if here.kv_dtype in ("bf16", "fp16", "fp32", "f16") and workload_fits(replace(s, kv_dtype=kv_alt)):
                out.append(f"kv_dtype={kv_alt!r}")
        except ValueError:
            pass
    if 0 < max_context < s.context:
        out.append(f"context <= {max_context:,} tokens" + (f" at batch {s.batch}" if s.batch else ""))
    max_batch = per_replica_max * s.replicas
    if s.batch and 0 < max_batch < s.batch:
        out.append(f"batch <= {max_batch} at {s.context:,} tokens")
    return out


def _not_fitting_message(s: Setup, budget: SetupBudget, result: Fit) -> str:
    where = (f"{s.num_gpus} x {s.gpu.name} ({s.engine}, tp={s.tp}, pp={s.pp}, "
             f"weights {result.weight_dtype}, KV {result.kv_dtype})")
    need = result.kv_bytes_per_sequence
    if budget.kv_memory <= 0:
        why = (f"the weights ({format_bytes(budget.weights)} per device) and the engine's reserve leave "
               f"{format_bytes(budget.kv_memory)} for KV")
    else:
        why = f"{format_bytes(budget.kv_memory)} is left for KV per device"
    short = need - budget.kv_memory
    text = (f"{s.model.name} does not fit on {where}: one sequence of {s.context:,} tokens needs "
            f"{format_bytes(need)} of KV per device and {why} — short by {format_bytes(short)} "
            f"({short:,} B) per device.")
    if result.suggestions:
        text += " What would fit: " + "; ".join(result.suggestions) + "."
    else:
        text += " Nothing tried fits (more GPUs up to 64, smaller weight and KV formats, shorter context)."
    return text
