"""What would fit: the one answer the CLI (`kvmem fit`), the Fit page and FitError's message share.

For a workload that does not fit, each change below is tried on its own, in this order, and
named when the workload fits with it: vLLM's own budget raised to gpu_memory_utilization=0.95
(its knob, for the engine that takes it: the cheapest change), more GPUs per replica (the
fewest, tp from 1, 2, 4 ... 64, or pp for an engine that splits layers), more replicas, a smaller weight format
(the engine's serving formats, smallest first that fits), fp8 KV for a 16/32-bit cache, and
the longest context or largest batch that fits as given.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ..engines import engine_estimate
from ..parallel import divides
from ..weights import weights as _weights
from .search import replica_batch, search_max_batch, workload_fits
from .setup import Setup, SetupBudget, budget_for

RAISED_UTILIZATION = Fraction(95, 100)   # vLLM's budget raised: what users try first (and 0.9 is its default)


def _tp_candidates(s: Setup) -> list[int]:
    heads = s.model.num_attention_heads
    return [tp for tp in (1, 2, 4, 8, 16, 32, 64) if divides(tp, heads)]


def min_gpus(s: Setup) -> int | None:
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


def _raised_budget(s: Setup) -> str | None:
    """vLLM's gpu_memory_utilization raised to 0.95, when that alone makes the workload fit."""
    if not s.rules.takes_utilization or s.utilization >= RAISED_UTILIZATION:
        return None
    raised = replace(s, utilization=RAISED_UTILIZATION)
    if not workload_fits(raised):
        return None
    at_one = budget_for(raised, 1 if raised.rules.batch_dependent else replica_batch(raised))
    most = search_max_batch(raised, at_one.kv_memory) * raised.replicas
    return f"gpu_memory_utilization={float(RAISED_UTILIZATION)} (max batch {most:,})"


def what_would_fit(s: Setup, budget: SetupBudget, max_context: int, per_replica_max: int,
                   fewest_gpus: int | None) -> tuple[str, ...]:
    """The changes that each make the workload fit (the module docstring), as short phrases."""
    out = []
    raised = _raised_budget(s)      # the cheapest change first: the engine's own knob
    if raised:
        out.append(raised)
    gpus_per_replica = s.tp * s.pp
    if fewest_gpus and fewest_gpus > gpus_per_replica:
        how = f"pp={fewest_gpus}" if s.rules.layer_split or s.rules.one_device else f"tp={fewest_gpus // s.pp}"
        out.append(f"{fewest_gpus} GPUs per replica ({how})")
    if s.batch and per_replica_max:
        replicas = -(-s.batch // per_replica_max)
        if replicas > s.replicas:
            out.append(f"{replicas * gpus_per_replica} GPUs as {replicas} replicas of tp={s.tp} x pp={s.pp} "
                       f"({per_replica_max} sequences each)")
    current = budget.weights_obj.weight_dtype if budget.weights_obj else None
    if current and s.given.weights_bytes is None:
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
            here = engine_estimate(s.model, engine=s.engine, tokens=1, batch=1, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
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
    return tuple(out)
