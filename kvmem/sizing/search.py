"""The searches: the most sequences, the longest context, for a monotone 'it fits' (gallop, then bisect)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..engines import ENGINES, with_defaults
from ..model import Model
from ..units import cdiv
from .setup import Setup, SetupBudget, budget_for, need_bytes

SEARCH_CAP = 1 << 24                # tokens / sequences searched at most when nothing else caps


# ----------------------------------------------------------------------------- search

def largest_fitting(fits, cap: int, guess: int = 1) -> int:
    """The largest n in [0, cap] with fits(n), for a monotone ``fits`` (fits(0) is True).

    Gallops from ``guess`` (a linear extrapolation lands within a few blocks), then bisects.
    """
    if cap < 1 or not fits(1):
        return 0
    guess = min(max(guess, 1), cap)
    step = 1
    if fits(guess):
        lo, hi = guess, cap + 1
        while lo + step <= cap:
            if not fits(lo + step):
                hi = lo + step
                break
            lo, step = lo + step, step * 2
    else:
        lo, hi = 1, guess
        while hi - step > 1:
            if fits(hi - step):
                lo = hi - step
                break
            hi, step = hi - step, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def linear_guess(measure, target: int, probe: int) -> int:
    """n with measure(n) ~ target, extrapolated from measure(probe)."""
    at_probe = measure(probe)
    return probe * target // at_probe if at_probe > 0 else probe


def pools_refuse(s: Setup, tokens: int, batch: int, kv_memory: int) -> str | None:
    """Why the engine's pools would not serve ``batch`` x ``tokens`` at once from ``kv_memory``
    (SizingRules.pools_refuse; None where they do, or where the engine has no such rule)."""
    if s.rules.pools_refuse is None:
        return None
    return s.rules.pools_refuse(s.model, kv_memory=kv_memory, tokens=tokens, batch=batch, kv_dtype=s.kv_dtype,
                                tp=s.tp, pp=s.pp, **with_defaults(ENGINES[s.engine], s.engine_options))


def holds(s: Setup, tokens: int, batch: int, kv_memory: int) -> bool:
    """Whether ``batch`` x ``tokens`` fits ``kv_memory`` and the engine's pools serve it at once
    (pools_refuse); a size the engine refuses (llama.cpp's 256 sequences, a StaticCache shorter
    than the sequence) does not fit."""
    try:
        return need_bytes(s, tokens, batch) <= kv_memory and pools_refuse(s, tokens, batch, kv_memory) is None
    except ValueError:
        return False


def batch_cap(s: Setup) -> int:
    return s.rules.max_sequences or SEARCH_CAP


def search_max_batch(s: Setup, kv_memory: int) -> int:
    """Sequences of ``context`` one replica holds (``kv_memory``: the budget at batch 1)."""
    per_seq = need_bytes(s, s.context, 1)
    if kv_memory <= 0 or per_seq > kv_memory:
        return 0
    cap = batch_cap(s)
    guess = kv_memory // per_seq if per_seq else cap
    upper = largest_fitting(lambda b: holds(s, s.context, b, kv_memory), cap, guess)
    if s.rules.batch_dependent:   # the batch-1 budget bounds it; activations only shrink it further
        return largest_fitting(lambda b: holds(s, s.context, b, budget_for(s, b).kv_memory), upper, upper)
    return upper


def context_cap(model: Model) -> int:
    return model.max_position_embeddings or SEARCH_CAP


def search_max_context(s: Setup, kv_memory: int, batch: int) -> int:
    if kv_memory <= 0 or batch > batch_cap(s):
        return 0
    # up to the model's positions, or the context asked when it is longer (the engine's refusal of a
    # context past the positions, and its way out, is said apart: Fit.engine_refuses)
    cap = max(context_cap(s.model), s.context)

    def need_or_zero(n: int) -> int:
        try:
            return need_bytes(s, n, batch)
        except ValueError:
            return 0

    guess = linear_guess(need_or_zero, kv_memory, min(cap, s.context))
    upper = largest_fitting(lambda n: holds(s, n, batch, kv_memory), cap, guess)
    if s.rules.batch_dependent:
        return largest_fitting(lambda n: holds(s, n, batch, budget_for(replace(s, context=n), batch).kv_memory),
                        upper, upper)
    return upper


def replica_batch(s: Setup) -> int:
    return cdiv(s.batch or 1, s.replicas)


def workload_fits(s: Setup) -> bool:
    """Whether the workload (batch, default 1, of ``context`` tokens) fits one replica."""
    n = replica_batch(s)
    kv_memory = budget_for(s, n).kv_memory
    return kv_memory > 0 and holds(s, s.context, n, kv_memory)


@dataclass(frozen=True)
class Answer:
    """One set-up's answer, the same for fit, sweep and plan: the most sequences, the longest
    context, and the budget of the batch the answer is about (``work_batch`` per replica: the one
    asked, else the largest that fits; an engine whose activations grow with the batch sizes them
    there, so its numbers are for the settings that batch runs with)."""

    at_one: SetupBudget             # the budget at one sequence: the searches' upper bound
    per_replica_max: int
    max_batch: int
    max_context: int
    work_batch: int
    budget: SetupBudget             # the budget at work_batch
    wanted: int                     # the sequences asked (1 when none)
    placed: dict | None = None      # the engine's placement the answer comes from (SizingRules.placement_verdict)
    notes: tuple = ()               # what the engine's placement verdict says about it
    why_not: str | None = None      # the engine's placement's reason the workload does not run (fit's headline)
    unrun: dict | None = None       # that placement's host side ("host_bytes", "n_seq"): fit's host RAM line

    @property
    def fits(self) -> bool:
        return self.max_batch >= self.wanted


def answer(s: Setup, searches: bool = True) -> Answer:
    """search_max_batch and search_max_context for ``s``, and the budget of the batch answered; ``searches``
    False: an engine's placement verdict says only whether the workload fits (its own searches skipped)."""
    per_replica = replica_batch(s)
    at_one = budget_for(s, 1)
    per_replica_max = search_max_batch(s, at_one.kv_memory)
    work_batch = per_replica if s.batch is not None else max(per_replica_max, 1)
    budget = budget_for(s, work_batch) if s.rules.batch_dependent else at_one
    found = Answer(at_one=at_one, per_replica_max=per_replica_max, max_batch=per_replica_max * s.replicas,
                   max_context=search_max_context(s, at_one.kv_memory, per_replica), work_batch=work_batch,
                   budget=budget, wanted=s.batch or 1)
    if s.rules.placement_verdict is not None:
        # an engine that also places layers in host RAM (llama.cpp) answers with its best placement, also where
        # every layer fits the GPUs: the verdict, max batch and max context from one computation (the placement's)
        if not searches:
            return s.rules.placement_verdict(s, found, searches=False) or found
        return s.rules.placement_verdict(s, found) or found
    return found
