"""From a fit to a running server: the launch command of each engine's pinned release (kvmem.plan).

(The package is ``launch``, not ``plan``: ``kvmem.plan`` is the function.)

    plan(model, gpu=..., context=..., engine="vllm", target="workload") -> Plan

``target``:  "workload"     this exact workload: ``batch`` (default 1) sequences of ``context``
             "max_batch"    the most sequences of ``context`` that fit (kvmem.fit's max_batch)
             "max_context"  the longest context for ``batch`` sequences (kvmem.fit's max_context)
The plan is the Fit of the final workload (its engine numbers are what the server will print)
and one command with every flag that realises it, each with a one-line reason: vLLM
``vllm serve`` (launch/vllm.py), SGLang ``python -m sglang.launch_server`` (launch/sglang.py),
llama.cpp ``llama-server`` (launch/llamacpp.py), TensorRT-LLM ``trtllm-serve`` with its extra
LLM API options YAML (launch/trtllm.py). A workload that does not fit, a setting with no flag in
that release, or an engine that has no server (transformers) raises PlanRefused naming why: no
command then. For vLLM the final fit pins max_num_seqs to the planned batch, as the command does,
so the sampler's profile peak kvmem sizes is the one the server measures.
"""

from __future__ import annotations

from ..engines import ENGINES, engine_spec
from ..sizing import fit as _fit
from ..sizing.setup import make_setup
from ..sizing.search import replica_batch
from . import llamacpp, sglang, trtllm, vllm
from .base import Flag, Inputs, Plan, PlanRefused

__all__ = ["plan", "Plan", "Flag", "PlanRefused", "TARGETS", "BUILDERS"]

TARGETS = ("workload", "max_batch", "max_context")
BUILDERS = {"vllm": vllm, "sglang": sglang, "llama.cpp": llamacpp, "trtllm": trtllm}


def _fit_or_refuse(model, **kwargs):
    result = _fit(model, **kwargs)
    if result.max_batch == 0:          # not one sequence: the fit says why (Fit.why_not)
        raise PlanRefused(f"no command: {result.why_not}", result)
    return result


def plan(model, *, gpu, num_gpus: int = 1, tp: int | None = None, pp: int = 1, context, batch: int | None = None,
         target: str = "workload", weight_dtype="auto", kv_dtype="auto", engine: str = "vllm",
         gpu_memory_utilization=0.9, **options) -> Plan:
    """The launch command that realises ``target`` for this workload (module docstring)."""
    name = engine_spec(engine).name
    if name not in BUILDERS:
        raise PlanRefused(f"engine {name!r} has no server command in kvmem; plan writes one for: "
                          + ", ".join(BUILDERS))
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    base = dict(gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                gpu_memory_utilization=gpu_memory_utilization)
    # vLLM's activations are sized at max_num_seqs = the batch unless given (kvmem.engines.vllm.budget), as
    # --max-num-seqs will set it: the fit of the command is the fit of the workload
    first = _fit_or_refuse(model, engine=name, context=context,
                           batch=None if target == "max_batch" else (batch or 1), **base, **options)
    if not first.fits:
        raise PlanRefused(f"no command: the workload does not fit ({first.model} on {first.num_gpus} x {first.gpu}, "
                          f"{name}): short by {first.shortfall_bytes:,} B per device; what would fit: "
                          + ("; ".join(first.suggestions) or "nothing tried"), first)
    total_batch = first.max_batch if target == "max_batch" else (batch or 1)
    final_context = first.max_context if target == "max_context" else first.context
    setup, _ = make_setup(model, engine=name, context=final_context, batch=total_batch, options=options, **base)
    per_replica = replica_batch(setup)
    final_options = dict(options)
    if name == "vllm" and options.get("max_num_seqs") is None:
        final_options["max_num_seqs"] = per_replica   # --max-num-seqs, as fit sized it: the flags follow from it
    if name == "sglang" and options.get("max_running_requests") is None:
        final_options["max_running_requests"] = per_replica   # --max-running-requests, as the command sets it
    result = _fit_or_refuse(model, engine=name, context=final_context, batch=total_batch, **base, **final_options)
    if not result.fits:
        raise PlanRefused(f"no command: {result.model} does not fit at {final_context:,} x {total_batch}", result)
    setup, _ = make_setup(model, engine=name, context=final_context, batch=total_batch, options=final_options, **base)
    rules = ENGINES[name].sizing
    defaults = (rules.defaults(setup.gpu, final_context, setup.tp, setup.pp, setup.engine_options, setup.sizing).values
                if rules.defaults else {})
    inputs = Inputs(model=setup.model, fit=result, setup=setup, options=final_options, defaults=defaults,
                    batch=per_replica)
    module = BUILDERS[name]
    built = module.flags(inputs)
    flags, files = built if name == "trtllm" else (built, {})
    return Plan(engine=name, release=module.RELEASE, program=module.PROGRAM, flags=tuple(flags), target=target,
                context=final_context, batch=total_batch, fit=result, files=files, notes=tuple(result.notes))
