"""What would fit: the one answer the CLI (`kvmem fit`), the Fit page and the refusal message share.

For a workload that does not fit, each change below is tried on its own, in this order:
vLLM's own budget raised to gpu_memory_utilization=0.95 (its knob, for the engine that takes it:
the cheapest change), an engine setting given where kvmem plan otherwise sets it (vLLM's
max_num_seqs: the sampler's profile peak is sized for the batch then), the host RAM the engine's
placement keeps there (llama.cpp, where host_memory_bytes is given and short), more GPUs per replica
(the fewest, tp from 1, 2, 4 ... 64, or pp for an engine that splits layers), more replicas, a
smaller weight format (the engine's serving formats, smallest first that fits), fp8 KV for a
16/32-bit cache, and the longest context or largest batch that fits as given.

A change is proposed only when (1) the same search fit, sweep and plan use (search.answer) says
the changed workload fits, and (2) for an engine with a server command, kvmem.plan writes the
command for it: a lever plan would refuse (AWQ weights from a bf16 checkpoint, replicas of a
llama-server) is not made. Each is a Lever: its words, the kvmem.fit arguments it changes, and
the max batch with it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from fractions import Fraction
from importlib import import_module

from ..engines import engine_estimate
from ..parallel import divides
from ..units import cdiv, format_bytes
from ..weights import weights as _weights
from .search import answer, largest_fitting, workload_fits
from .setup import Given, Setup, make_setup

RAISED_UTILIZATION = Fraction(95, 100)   # vLLM's budget raised: what users try first (and 0.9 is its default)
MEASURED = frozenset(f.name for f in fields(Given))   # figures measured by the user: never a lever

@dataclass(frozen=True)
class Lever:
    """One change that makes the workload fit: its words, the kvmem.fit arguments it changes, the max batch with it."""

    text: str
    change: dict
    max_batch: int
    plan_refused: str | None = None     # why kvmem.plan writes no command for it (then it is not suggested)

    def to_dict(self) -> dict:
        return {"text": self.text, "change": dict(self.change), "max_batch": self.max_batch,
                "plan_refused": self.plan_refused}


def _tp_candidates(s: Setup) -> list[int]:
    heads = s.model.num_attention_heads
    return [tp for tp in (1, 2, 4, 8, 16, 32, 64) if divides(tp, heads)]


def min_gpus(s: Setup, known=None) -> int | None:
    """The fewest GPUs (one replica: tp x pp) that fit the workload; ``known``: search.answer(s) where the caller
    has it (fit), so that the placement verdict of ``s``'s own cards is not asked again."""
    wanted = s.batch or 1
    if s.rules.one_device:
        return 1 if workload_fits(replace(s, num_gpus=1, batch=wanted)) else None
    if s.rules.layer_split:
        most = min(64, s.model.num_layers)
        every = next((pp for pp in range(1, most + 1)
                      if workload_fits(replace(s, pp=pp, num_gpus=pp, batch=wanted))), None)
        if s.rules.placement_verdict is None:
            return every
        # an engine whose verdict is its placement's (llama.cpp: layers or experts in host RAM too) needs the
        # fewest cards that placement runs on, as fit's verdict says it (search.answer), not the fewest that
        # hold every layer: pp 1 first, then bisected up to the cards that hold every layer (fewer cards never
        # place more), the verdict taken as monotone in the cards
        def placed(pp: int) -> bool:
            if known is not None and pp == s.pp == s.num_gpus:      # the verdict fit has (batch None: 1 sequence)
                return known.fits
            return answer(replace(s, pp=pp, num_gpus=pp, batch=wanted), searches=False).fits
        if placed(1):
            return 1
        hi = every if every is not None else (most if placed(most) else None)
        if hi is None:
            return None
        lo = 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if placed(mid) else (mid, hi)
        return hi
    for tp in _tp_candidates(s):
        trial = replace(s, tp=tp, num_gpus=tp * s.pp, batch=wanted)
        try:
            if workload_fits(trial):
                return tp * s.pp
        except ValueError:       # tp not allowed for this model's KV heads or state
            continue
    return None


def fit_arguments(s: Setup) -> dict:
    """kvmem.fit's (and kvmem.plan's) keyword arguments that make ``s``: the options as given."""
    given = {name: value for name, value in s.sizing.items() if value != s.rules.options.get(name)}
    return dict(gpu=s.gpu, num_gpus=s.num_gpus, tp=1 if s.rules.layer_split else s.tp, pp=s.pp, context=s.context,
                batch=s.batch, weight_dtype=s.weight_dtype, kv_dtype=s.kv_dtype, engine=s.engine,
                gpu_memory_utilization=s.utilization, **s.engine_options, **given)


def plan_refusal(s: Setup) -> str | None:
    """Why kvmem.plan writes no command for ``s``; None where it writes one, or where the engine has no
    server command (there is none to write: the search alone decides)."""
    # kvmem.launch sits above sizing (its plan() calls fit()): imported when a lever is checked, never at load
    launch = import_module("kvmem.launch")
    if s.engine not in launch.launchers():
        return None
    try:
        launch.plan(s.model, **fit_arguments(s))
    except ValueError as exc:       # PlanRefused, or a setting its command cannot carry
        return str(exc)
    return None


def _checked(changed: Setup) -> tuple[int, str | None] | None:
    """The max batch of ``changed`` and plan's refusal of it where the search says it fits, else None (also
    where kvmem.fit's arguments cannot say it: llama.cpp's extra GPUs are always layer splits, never replicas)."""
    try:
        args = fit_arguments(changed)
        layout = ("num_gpus", "tp", "pp", "gpu", "engine", "context", "batch", "weight_dtype", "kv_dtype",
                  "gpu_memory_utilization")
        again, _ = make_setup(changed.model, **{k: args.pop(k) for k in layout}, options=args)
        if (again.num_gpus, again.tp, again.pp) != (changed.num_gpus, changed.tp, changed.pp):
            return None
        found = answer(changed)
    except ValueError:              # a tp the model's heads or state do not allow
        return None
    if not found.fits:
        return None
    return found.max_batch, plan_refusal(changed)


def levers(s: Setup, max_context: int, per_replica_max: int, fewest_gpus: int | None) -> tuple[Lever, ...]:
    """The changes that each make the workload fit (module docstring); those plan refuses carry why."""
    out = []

    def attempt(text: str, change: dict, **fields) -> bool:
        checked = _checked(replace(s, **fields))
        if checked is not None:
            out.append(Lever(text.format(max_batch=f"{checked[0]:,}"), change, *checked))
        return checked is not None and checked[1] is None

    if s.rules.takes_utilization and s.utilization < RAISED_UTILIZATION:   # the cheapest: the engine's own knob
        attempt(f"gpu_memory_utilization={float(RAISED_UTILIZATION)} (max batch {{max_batch}})",
                {"gpu_memory_utilization": float(RAISED_UTILIZATION)}, utilization=RAISED_UTILIZATION)
    for name, value in s.sizing.items():   # a setting given where the engine's default is kvmem's to set
        if value is not None and s.rules.options.get(name, 0) is None and name not in MEASURED:
            attempt(f"{name} as kvmem plan sets it, not {value!r}", {name: None}, sizing={**s.sizing, name: None})
    _host_lever(s, attempt)
    gpus_per_replica = s.tp * s.pp
    if fewest_gpus and fewest_gpus > gpus_per_replica:
        if s.rules.layer_split or s.rules.one_device:
            attempt(f"{fewest_gpus} GPUs per replica (pp={fewest_gpus})", {"num_gpus": fewest_gpus, "pp": fewest_gpus},
                    pp=fewest_gpus, num_gpus=fewest_gpus)
        else:
            tp = fewest_gpus // s.pp
            attempt(f"{fewest_gpus} GPUs per replica (tp={tp})", {"num_gpus": fewest_gpus, "tp": tp},
                    tp=tp, num_gpus=fewest_gpus)
    if s.batch and per_replica_max:
        replicas = cdiv(s.batch, per_replica_max)
        if replicas > s.replicas:
            gpus = replicas * gpus_per_replica
            attempt(f"{gpus} GPUs as {replicas} replicas of tp={s.tp} x pp={s.pp} ({per_replica_max} sequences each)",
                    {"num_gpus": gpus, "tp": s.tp, "pp": s.pp}, num_gpus=gpus)
    _weight_lever(s, attempt)
    kv_alt = s.rules.kv_smaller_dtype
    if kv_alt is not None:
        try:
            here = engine_estimate(s.model, engine=s.engine, tokens=1, batch=1, kv_dtype=s.kv_dtype, tp=s.tp,
                                   pp=s.pp, **s.engine_options)
        except ValueError:
            here = None
        if here is not None and here.kv_dtype in ("bf16", "fp16", "fp32", "f16"):
            attempt(f"kv_dtype={kv_alt!r}", {"kv_dtype": kv_alt}, kv_dtype=kv_alt)
    if 0 < max_context < s.context:
        attempt(f"context <= {max_context:,} tokens" + (f" at batch {s.batch:,}" if s.batch else ""),
                {"context": max_context}, context=max_context)
    max_batch = per_replica_max * s.replicas
    if s.batch and 0 < max_batch < s.batch:
        attempt(f"batch <= {max_batch} at {s.context:,} tokens", {"batch": max_batch}, batch=max_batch)
    return tuple(out)


def placed_context(s: Setup) -> int:
    """The longest context, in 256-token steps (llama.cpp pads each stream's cells to 256), shorter than the one
    asked, at which the engine's placement (GPUs and the host RAM given) runs the batch (0: not even 256 tokens;
    0 too for an engine with no placement verdict or no host_memory_bytes given)."""
    if s.rules.placement_verdict is None or s.given.host_memory_bytes is None:
        return 0
    def fits(units: int) -> bool:
        return answer(replace(s, context=units * 256), searches=False).fits
    return largest_fitting(fits, cdiv(s.context, 256) - 1, cdiv(s.context, 512)) * 256


def _host_lever(s: Setup, attempt) -> None:
    """An engine whose placement keeps layers or experts in host RAM (llama.cpp), given host_memory_bytes: the
    host RAM its placement of the workload keeps there, where that is more than given."""
    limit = s.given.host_memory_bytes
    if limit is None or s.rules.placement_verdict is None:
        return
    free = replace(s, batch=s.batch or 1, sizing={**s.sizing, "host_memory_bytes": None},
                   given=replace(s.given, host_memory_bytes=None))
    found = answer(free)
    need = found.placed.get("host_bytes") if found.fits and found.placed else None
    if need is not None and need > limit:
        attempt(f"host RAM {format_bytes(need)} ({need:,} B), not {format_bytes(limit)}", {"host_memory_bytes": need},
                sizing={**s.sizing, "host_memory_bytes": need}, given=replace(s.given, host_memory_bytes=need))


def _weight_lever(s: Setup, attempt) -> None:
    """The smallest weight format of the engine's serving formats that its command makes and that fits."""
    if s.given.weights_bytes is not None or s.model.facts.quantization_config:
        return          # given weights, or a quantised checkpoint: read in its own format, nothing to change
    try:
        current = _weights(s.model, s.weight_dtype)
    except ValueError:
        return
    for name in s.rules.weight_formats:        # plan refuses those its command cannot make (_checked)
        try:
            smaller = _weights(s.model, name).total_bytes < current.total_bytes
        except ValueError:
            continue
        if smaller and attempt(f"weight_dtype={name!r}", {"weight_dtype": name}, weight_dtype=name):
            return


def what_would_fit(s: Setup, max_context: int, per_replica_max: int, fewest_gpus: int | None) -> tuple[str, ...]:
    """The changes that each make the workload fit and plan realises, as short phrases (levers' words)."""
    return tuple(lever.text for lever in levers(s, max_context, per_replica_max, fewest_gpus)
                 if lever.plan_refused is None)
