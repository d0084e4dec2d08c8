"""From a fit to a running server: the launch command of each engine's pinned release (kvmem.plan).

(The package is ``launch``, not ``plan``: ``kvmem.plan`` is the function.)

    plan(model, gpu=..., context=..., engine="vllm", target="workload") -> Plan

``target``:  "workload"     this exact workload: ``batch`` (default 1) sequences of ``context``
             "max_batch"    the most sequences of ``context`` that fit (kvmem.fit's max_batch)
             "max_context"  the longest context for ``batch`` sequences (kvmem.fit's max_context)
The plan is the Fit of the final workload (its engine numbers are what the server will print)
and one command with every flag that realises it, each with a one-line reason, written by the
engine's Launcher (EngineSpec.launch, in kvmem/engines/<engine>/launch.py): vLLM ``vllm serve``,
SGLang ``python -m sglang.launch_server``, llama.cpp ``llama-server``, TensorRT-LLM
``trtllm-serve`` with its extra LLM API options YAML. A workload that does not fit, a setting with no flag in
that release, or an engine that has no server (transformers) raises PlanRefused naming why: no
command then. Where the engine caps the sequences per replica (Launcher.batch_option: vLLM's
max_num_seqs, SGLang's max_running_requests) the final fit pins it to the planned batch, as the
command does, so the sampler's profile peak kvmem sizes is the one the server measures.
"""

from __future__ import annotations

from ..defaults import ENGINE
from ..engines import ENGINES, engine_spec
from .base import Flag, Inputs, Plan, PlanRefused

__all__ = ["plan", "Plan", "Flag", "PlanRefused", "TARGETS", "launchers"]

TARGETS = ("workload", "max_batch", "max_context")


def launchers() -> dict:
    """Engine name -> its Launcher (kvmem.engines.base.Launcher), for every engine that has one."""
    return {name: spec.launch for name, spec in ENGINES.items() if spec.launch is not None}


def _fit_or_refuse(model, **kwargs):
    from ..sizing import fit  # kvmem.sizing is imported when a plan is made: an engine's launch.py imports
    result = fit(model, **kwargs)   # this package's base at its load, and a command that sizes nothing needs none
    if result.max_batch == 0:          # not one sequence: the fit says why (Fit.why_not)
        raise PlanRefused(f"no command: {result.why_not}", result)
    return result


def plan(model, *, gpu, num_gpus: int = 1, tp: int | None = None, pp: int = 1, context, batch: int | None = None,
         target: str = "workload", weight_dtype="auto", kv_dtype="auto", engine: str = ENGINE,
         gpu_memory_utilization=0.9, **options) -> Plan:
    """The launch command that realises ``target`` for this workload (module docstring)."""
    from ..sizing.search import replica_batch
    from ..sizing.setup import make_setup
    spec = engine_spec(engine)
    name, launcher = spec.name, spec.launch
    if launcher is None:
        raise PlanRefused(f"engine {name!r} has no server command in kvmem; plan writes one for: "
                          + ", ".join(launchers()))
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    base = dict(gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                gpu_memory_utilization=gpu_memory_utilization)
    # vLLM's activations are sized at max_num_seqs = the batch unless given (kvmem.engines.vllm.budget), as
    # --max-num-seqs will set it: the fit of the command is the fit of the workload
    first = _fit_or_refuse(model, engine=name, context=context,
                           batch=None if target == "max_batch" else (batch or 1), **base, **options)
    if not first.fits and (first.host or {}).get("refusal"):     # the host's RAM, not the GPUs (kvmem.host)
        raise PlanRefused(f"no command: {first.host['refusal']}", first)
    if not first.fits:
        raise PlanRefused(f"no command: the workload does not fit ({first.model} on {first.num_gpus} x {first.gpu}, "
                          f"{name}): short by {first.shortfall_bytes:,} B per device; what would fit: "
                          + ("; ".join(first.suggestions) or "nothing tried"), first)
    total_batch = first.max_batch if target == "max_batch" else (batch or 1)
    final_context = first.max_context if target == "max_context" else first.context
    setup, _ = make_setup(model, engine=name, context=final_context, batch=total_batch, options=options, **base)
    per_replica = replica_batch(setup)
    final_options = dict(options)
    if launcher.batch_option and options.get(launcher.batch_option) is None:
        final_options[launcher.batch_option] = per_replica   # --max-num-seqs, as fit sized it: the flags follow from it
    result = _fit_or_refuse(model, engine=name, context=final_context, batch=total_batch, **base, **final_options)
    if not result.fits:
        raise PlanRefused(f"no command: {result.model} does not fit at {final_context:,} x {total_batch}", result)
    setup, _ = make_setup(model, engine=name, context=final_context, batch=total_batch, options=final_options, **base)
    rules = spec.sizing
    where = (setup.gpu, final_context, setup.tp, setup.pp, setup.engine_options, setup.sizing)
    defaults = (rules.model_defaults(setup.model, *where).values if rules.model_defaults else
                rules.defaults(*where).values if rules.defaults else {})
    inputs = Inputs(model=setup.model, fit=result, setup=setup, options=final_options, defaults=defaults,
                    batch=per_replica)
    flags = launcher.flags(inputs)
    files = launcher.files(inputs) if launcher.files else {}
    return Plan(engine=name, release=launcher.release, program=launcher.program, flags=tuple(flags), target=target,
                context=final_context, batch=total_batch, fit=result, files=files, notes=tuple(result.notes))
