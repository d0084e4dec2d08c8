"""The decode bound: a step reads the active weights once and every sequence's KV (memory bandwidth only)."""

from __future__ import annotations

from .search import SEARCH_CAP, largest_fitting, linear_guess
from .setup import Setup, SetupBudget, budget_for, make_setup, setup_estimate

# ----------------------------------------------------------------------------- decode speed

def kv_read_bytes(s: Setup, tokens: int, batch: int) -> int:
    """KV (+ state) bytes one decode step reads, summed over the tp ranks and pp stages of a replica."""
    est = setup_estimate(s, tokens, batch)
    return est.total_bytes_all_devices


def active_weight_bytes(s: Setup, budget: SetupBudget, batch: int) -> int:
    """Weight bytes one decode step reads over a replica (tp ranks x pp stages)."""
    if budget.weights_obj is not None:
        return budget.weights_obj.active_bytes(batch)
    whole = budget.weights * s.tp * s.pp
    if s.model.params_total and s.model.params_active:
        return whole * s.model.params_active // s.model.params_total
    return whole


def replicas_weight_reads(s: Setup, budget: SetupBudget, batch: int) -> int:
    """Weight bytes one replica's GPUs read in a decode step when the replicas share the MoE layers
    (SizingRules.moe_over_replicas): dense layers and the head whole, and the experts that all replicas'
    batches touch split over the replicas (each holds 1 / replicas of them)."""
    weights, replicas = budget.weights_obj, s.num_gpus // (s.tp * s.pp)
    if weights is None:                             # weights_bytes given: no layer split to share
        return active_weight_bytes(s, budget, batch)
    fixed = weights.active_bytes(0)                 # no expert touched: dense + head
    return fixed + (weights.active_bytes(batch * replicas) - fixed) // replicas


def group_step_bytes(s: Setup, budget: SetupBudget, batch: int, groups: int) -> int:
    """Bytes the fullest GPU reads in one decode step under data-parallel attention (``groups`` attention groups
    of ``batch`` sequences each, SizingRules.kv_groups): the experts and MLPs the whole tp group's batch
    touches, split over tp; the attention and embedding it keeps beyond that share, whole (the engine's
    weights per GPU less Weights.per_device); its group's KV over the group's tp // groups GPUs."""
    shared = active_weight_bytes(s, budget, batch * groups) // s.tp
    kept = budget.weights - budget.weights_obj.per_device(tp=s.tp, pp=s.pp, replicated=True) if budget.weights_obj \
        else 0
    return shared + kept + kv_read_bytes(s, s.context, batch) // (s.tp // groups)


def kv_crossover_tokens(model, *, batch: int = 1, weight_dtype="auto", kv_dtype="auto",
                        engine: str = "ideal", tp: int = 1, pp: int = 1, **options) -> int | None:
    """The context at which ``batch`` sequences' KV reads per decode step equal the weight reads.

    None when the KV never catches up within 2**24 tokens (sliding-window or linear models).
    """
    s, _ = make_setup(model, gpu="custom:1TiB", num_gpus=tp * pp, tp=tp, pp=pp, context=1, batch=batch,
                  weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=engine, gpu_memory_utilization=0.9,
                  options=options)
    budget = budget_for(s, batch)
    return crossover_tokens(s, budget, batch)


def crossover_tokens(s: Setup, budget: SetupBudget, batch: int) -> int | None:
    weights_read = active_weight_bytes(s, budget, batch)

    def accepted(n: int) -> bool:
        try:
            kv_read_bytes(s, n, batch)
            return True
        except ValueError:        # longer than the engine takes (a StaticCache's max_cache_len)
            return False

    limit = SEARCH_CAP if accepted(SEARCH_CAP) else largest_fitting(accepted, SEARCH_CAP, s.context)
    if limit == 0 or kv_read_bytes(s, limit, batch) < weights_read:
        return None
    guess = linear_guess(lambda n: kv_read_bytes(s, n, batch), weights_read, min(4096, limit))
    below = largest_fitting(lambda n: kv_read_bytes(s, n, batch) < weights_read, limit, guess)
    return below + 1
