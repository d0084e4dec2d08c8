"""fit(): does a workload fit, how many sequences, how long a context, on how few GPUs, how fast
(the rules in the kvmem.sizing docstring).
"""

from __future__ import annotations

from dataclasses import replace

from ..defaults import ENGINE
from ..engines import ENGINES, capacity
from ..engines.positions import past_positions, trained_positions
from ..gpus import list_gpus
from ..host import host_memory
from ..units import format_bytes
from .decode import active_weight_bytes, crossover_tokens, group_step_bytes, kv_read_bytes, replicas_weight_reads
from .numbers import engine_numbers
from .results import Fit, MemoryBreakdown
from .search import answer, pools_refuse, replica_batch
from .setup import Setup, SetupBudget, make_setup, need_bytes, setup_estimate
from .suggest import levers as _levers
from .suggest import min_gpus as _min_gpus
from .suggest import placed_context as _placed_context

# ----------------------------------------------------------------------------- fit

def fit(model, *, gpu, num_gpus: int = 1, tp: int | None = None, pp: int = 1, context, batch: int | None = None,
        weight_dtype="auto", kv_dtype="auto", engine: str = ENGINE, gpu_memory_utilization=0.9,
        **options) -> Fit:
    """Does ``batch`` x ``context`` fit on ``num_gpus`` x ``gpu`` under ``engine``? (module docstring)"""
    s, notes = make_setup(model, gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, context=context, batch=batch,
                      weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=engine,
                      gpu_memory_utilization=gpu_memory_utilization, options=options)
    if s.gpu.usable_memory_source == "vendor_tool" and s.gpu.name in list_gpus():
        notes.append(f"{s.gpu.name}: sized from the vendor tool's total; CUDA sees a few hundred MiB less")
    per_replica = replica_batch(s)
    found = answer(s)
    per_replica_max, max_batch, max_context = found.per_replica_max, found.max_batch, found.max_context
    if found.why_not and not max_context:      # the budget's search knows no host RAM: the placement's own
        max_context = _placed_context(s)
    fits, work_batch, budget = found.fits, found.work_batch, found.budget
    notes.extend(budget.notes)
    notes.extend(found.notes)          # the engine's placement verdict, where it gave one
    limit, named = trained_positions(s.model, ENGINES[s.engine].positions)   # llama.cpp: n_ctx_train (ctx_train)
    if limit and max_context == limit:
        notes.append(f"max_context stops at the model's {named} ({max_context:,})")
    if per_replica_max == s.rules.max_sequences:
        notes.append(f"max_batch stops at {s.engine}'s limit of {per_replica_max} sequences per replica")
    min_gpus = _min_gpus(s, found if s.rules.placement_verdict is not None else None)
    kv_per_seq = need_bytes(s, s.context, 1)
    one = setup_estimate(s, s.context, 1)
    if one.peak_bytes > one.total_bytes:
        notes.append(f"sized for the engine's peak: one sequence holds up to {format_bytes(one.peak_bytes)} of KV "
                     f"while it is built, {format_bytes(one.peak_bytes - one.total_bytes)} above the "
                     f"{format_bytes(one.total_bytes)} it keeps at {s.context:,} tokens")
    kv_work = need_bytes(s, s.context, work_batch)
    shortfall = 0 if fits else max(need_bytes(s, s.context, per_replica) - budget.kv_memory, 0)
    past = past_positions(s.model, ENGINES[s.engine], s.context)
    if past:
        notes.append(past[0])
    if budget.kv_memory < 0 and found.placed is None:
        notes.append(f"no memory left for KV: weights, activations and overhead exceed the budget by "
                     f"{format_bytes(-budget.kv_memory)} per device")
    # The pool the engine holds, and what its budget leaves out (vLLM: total x (1 - utilization)),
    # drawn as they are whether the workload fits or not; the KV it lacks is its own part.
    budget_kv = max(budget.kv_memory, 0)
    kv_pool = budget_kv if s.rules.preallocates else min(kv_work, budget_kv)
    free = max(budget.total - budget.weights - kv_pool - budget.activations - budget.overhead, 0)
    breakdown = MemoryBreakdown(total_bytes=budget.total, weights_bytes=budget.weights, kv_bytes=kv_work,
                                kv_pool_bytes=kv_pool, activations_bytes=budget.activations,
                                overhead_bytes=budget.overhead, free_bytes=free, shortfall_bytes=shortfall)
    if found.placed is not None:      # the fullest GPU of the engine's placement
        breakdown = MemoryBreakdown(**found.placed["breakdown"])
    speed = speed_all = crossover = None
    # no decode bound for a workload that does not run, nor here for one partly in host RAM (its placement's)
    if s.gpu.bandwidth_bytes_per_s and fits and (found.placed is None or found.placed.get("whole")):
        groups = s.rules.kv_groups(s.engine_options) if s.rules.kv_groups else 1
        if groups > 1:    # data-parallel attention: the fullest GPU's reads bound the step (decode.group_step_bytes)
            speed = s.gpu.bandwidth_bytes_per_s / group_step_bytes(s, budget, work_batch, groups)
        else:
            shared = s.rules.moe_over_replicas and s.replicas > 1 and budget.weights_obj is not None
            weights_read = (replicas_weight_reads(s, budget, work_batch) if shared
                            else active_weight_bytes(s, budget, work_batch))
            step_bytes = weights_read + kv_read_bytes(s, s.context, work_batch)
            speed = s.gpu.bandwidth_bytes_per_s * s.tp / step_bytes
        speed_all = speed * work_batch * s.replicas
    crossover = crossover_tokens(s, budget, work_batch)
    cap = None
    if ENGINES[s.engine].capacity is not None and budget.kv_memory > 0:
        cap = capacity(s.model, engine=s.engine, kv_memory=budget.kv_memory, kv_dtype=s.kv_dtype, tp=s.tp,
                        pp=s.pp, max_model_len=s.context, **s.engine_options)
    numbers = engine_numbers(s, cap, work_batch)
    est_dtype = setup_estimate(s, 1, 1).kv_dtype
    weight_name = budget.weights_obj.weight_dtype if budget.weights_obj else "given"
    found_levers = () if fits else _levers(s, max_context, per_replica_max, min_gpus)
    result = Fit(model=s.model.name, gpu=s.gpu.name, engine=s.engine, num_gpus=s.num_gpus, tp=s.tp, pp=s.pp,
                 replicas=s.replicas, context=s.context, batch=s.batch, weight_dtype=weight_name,
                 kv_dtype=est_dtype, fits=fits, max_batch=max_batch, max_context=max_context, min_gpus=min_gpus,
                 breakdown=breakdown, kv_memory_bytes=max(budget.kv_memory, 0), kv_bytes_per_sequence=kv_per_seq,
                 shortfall_bytes=shortfall, decode_tokens_per_s=speed, decode_tokens_per_s_aggregate=speed_all,
                 kv_crossover_tokens=crossover, suggestions=tuple(lever.text for lever in found_levers
                                                                          if lever.plan_refused is None),
                 levers=found_levers, notes=tuple(dict.fromkeys(notes)),
                 capacity=cap, breakdown_batch=work_batch, breakdown_context=s.context,
                 refusal=past[1] if past else None,
                 engine_numbers=numbers, placement=found.placed)
    if not fits:      # one contract: a workload that does not fit is a Fit with .fits False and .why_not
        result = replace(result, why_not=_placement_message(s, result, found.why_not) if found.why_not
                         else _not_fitting_message(s, budget, result) if max_batch == 0
                         else _short_message(s, result))
    # host RAM as a budget (kvmem.host); a placement that does not run (found.unrun) shows what it keeps there
    host = host_memory(s, max(budget.kv_memory, 0), found.placed or found.unrun)
    if host is not None:
        result = replace(result, host=host.to_dict())
        if host.refusal:        # the placement's own headline says the host RAM already (found.why_not)
            result = replace(result, fits=False, why_not=host.refusal if result.why_not is None
                             else result.why_not if found.unrun else f"{result.why_not} And {host.refusal}")
    return result


def _placement_message(s: Setup, result: Fit, why: str) -> str:
    """Why the engine's placement (llama.cpp's: GPUs and host RAM) does not run the workload, in its own words."""
    held = (f"holds {result.max_batch:,} sequence{'s' * (result.max_batch != 1)} of {s.context:,} tokens, not "
            f"{s.batch:,}" if result.max_batch else "does not fit")
    text = f"{s.model.name} {held} on {s.num_gpus} x {s.gpu.name} ({s.engine}): {why}."
    return text + (" What would fit: " + "; ".join(result.suggestions) + "." if result.suggestions else "")


def _short_message(s: Setup, result: Fit) -> str:
    """Why a batch does not fit where fewer sequences do: the most that fit, the shortfall, what would fit."""
    # the bytes hold them, the engine's pools do not admit them at once (pools_refuse): say that, not "short by 0 B"
    pools = (pools_refuse(s, s.context, replica_batch(s), result.kv_memory_bytes)
             if result.shortfall_bytes == 0 and result.kv_memory_bytes > 0 else None)
    why = pools if pools else (f"short by {format_bytes(result.shortfall_bytes)} ({result.shortfall_bytes:,} B) "
                               "per device")
    text = (f"{s.model.name} holds {result.max_batch:,} sequence{'s' * (result.max_batch != 1)} of {s.context:,} "
            f"tokens on {s.num_gpus} x {s.gpu.name} ({s.engine}), not {s.batch:,}: {why}.")
    return text + (" What would fit: " + "; ".join(result.suggestions) + "." if result.suggestions else "")


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
    pools = pools_refuse(s, s.context, 1, budget.kv_memory) if short <= 0 else None
    if pools:   # the bytes hold it, the engine's pools do not
        text = (f"{s.model.name} does not fit on {where}: one sequence of {s.context:,} tokens needs "
                f"{format_bytes(need)} of KV per device and {why}, but {pools}.")
    else:
        text = (f"{s.model.name} does not fit on {where}: one sequence of {s.context:,} tokens needs "
                f"{format_bytes(need)} of KV per device and {why} — short by {format_bytes(short)} "
                f"({short:,} B) per device.")
    unplanned = [lever for lever in result.levers if lever.plan_refused]
    if result.suggestions:
        text += " What would fit: " + "; ".join(result.suggestions) + "."
    elif unplanned:
        text += (" Fits with " + "; ".join(lever.text for lever in unplanned) + ", but kvmem plan writes no "
                 f"command for it ({unplanned[0].plan_refused}).")
    else:
        text += " Nothing tried fits (more GPUs up to 64, smaller weight and KV formats, shorter context)."
    return text
