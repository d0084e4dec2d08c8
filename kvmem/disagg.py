"""Disaggregated prefill and decode: two pools of GPUs, each sized for its own role (issue 36 item 2).

A request's prompt is prefilled on a prefill instance, its KV sent to a decode instance, and its output
decoded there. For ``request_rate`` requests a second of ``prompt_tokens`` in and ``output_tokens`` out:

decode     each instance is a fit of ``decode_gpus`` GPUs at context = prompt + output: B sequences at once
           (kvmem.fit's max_batch, each engine's own admission), decoded at s tokens a second each (kvmem's
           decode bound, weights and KV read once a step). By Little's law rate x output / s requests decode
           at once; the instances must hold them: ceil(rate x output / (B x s)), equal to ceil(concurrency / B).
prefill    an instance of ``prefill_gpus`` GPUs prefills P prompt tokens a second: given
           (``prefill_tokens_per_s``, measured), or estimated from the GPUs' dense bf16 FLOPs as
           P = gpus x FLOPs x mfu / (2 x active parameters), with ``prefill_mfu`` an assumption the answer
           states. Instances: ceil(rate x prompt / P). Each holds in its KV pool the prompts in flight:
           those being prefilled, rate / instances x prompt / P of them on average (Little's law again), at
           least one; the fit of the instance at context = prompt must hold that many.
transfer   the role's command and what the role holds beyond the plan are the engine's (its Launcher.roles):
           SGLang's --disaggregation-mode and the sliding-window tail its decode server preallocates, vLLM's
           NIXL --kv-transfer-config; their connectors register the KV pool in place, with no GPU buffer
           of their own by default (each engine's launch module cites where).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from .defaults import ENGINE
from .records import Record
from .units import parse_tokens, require_positive_int

__all__ = ["Role", "Disaggregated", "disaggregate"]

DEFAULT_PREFILL_MFU = Fraction(2, 5)   # an assumption, stated in the answer's notes: give prefill_tokens_per_s


@dataclass(frozen=True)
class Role(Record):
    """One role's pool: instances of ``gpus_per_instance`` GPUs, and one GPU's memory (bytes)."""

    role: str                        # "prefill" or "decode"
    gpus_per_instance: int
    instances: int
    context: int                     # tokens a sequence holds in this role
    sequences_needed: int            # sequences the role holds at once, all instances (Little's law, rounded up)
    sequences_per_instance: int      # what one instance holds (fit's max_batch)
    kv_tokens_per_gpu: int | None    # the engine's pool on one GPU (None: no pool count)
    weights_bytes: int
    kv_pool_bytes: int
    activations_bytes: int
    overhead_bytes: int
    total_bytes: int
    tokens_per_s: float              # decode: per sequence at full batch; prefill: prompt tokens per instance
    command: list = field(default_factory=list)
    notes: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return self.instances * self.gpus_per_instance


@dataclass(frozen=True)
class Disaggregated(Record):
    """A prefill pool and a decode pool for one workload (module docstring)."""

    model: str
    gpu: str
    engine: str
    prompt_tokens: int
    output_tokens: int
    request_rate: str                # requests a second, as given (exact)
    prefill: Role
    decode: Role
    notes: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return self.prefill.gpus + self.decode.gpus


def _rate(value) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction)):
        raise ValueError(f"request_rate must be a positive number of requests a second, got {value!r}")
    try:
        rate = Fraction(str(value)) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"request_rate must be a positive number of requests a second, got {value!r}") from None
    if rate <= 0 or rate > 10**6:
        raise ValueError(f"request_rate must be in (0, 1e6] requests a second, got {value!r}")
    return rate


def _role(name: str, fit, *, gpus: int, instances: int, needed: int, tokens_per_s: float, command: list,
          notes) -> Role:
    b = fit.breakdown
    return Role(role=name, gpus_per_instance=gpus, instances=instances, context=fit.context,
                sequences_needed=needed, sequences_per_instance=fit.max_batch,
                kv_tokens_per_gpu=fit.capacity.tokens if fit.capacity else None,
                weights_bytes=b.weights_bytes, kv_pool_bytes=b.kv_pool_bytes, activations_bytes=b.activations_bytes,
                overhead_bytes=b.overhead_bytes, total_bytes=b.total_bytes, tokens_per_s=tokens_per_s,
                command=command, notes=tuple(notes))


def _command(model, role: str, prompt_tokens: int, options: dict, **kwargs) -> tuple[list, list[str]]:
    """kvmem.plan's command for the role with the engine's role words, and the role's notes (no command: why)."""
    from .engines import engine_spec
    from .launch import PlanRefused, plan
    words, notes = engine_spec(kwargs["engine"]).launch.roles(role, model, prompt_tokens, options)
    try:
        made = plan(model, **kwargs, **options)
    except PlanRefused as exc:
        return [], [f"{role}: no command ({exc})", *notes]
    return made.argv + list(words), list(notes)


def disaggregate(model, *, gpu, prompt_tokens, output_tokens, request_rate, engine: str = ENGINE,
                 prefill_gpus: int | None = None, decode_gpus: int | None = None,
                 prefill_tokens_per_s: float | None = None, prefill_mfu=None, weight_dtype="auto",
                 kv_dtype="auto", **options) -> Disaggregated:
    """The prefill and decode pools ``request_rate`` requests a second of ``prompt_tokens`` + ``output_tokens``
    need (module docstring). ``prefill_gpus`` / ``decode_gpus``: GPUs an instance (default: the fewest that
    hold the model at one sequence, kvmem.fit's min_gpus); ``options``: engine options, for both roles."""
    from .catalog import as_model
    from .engines import ENGINES, engine_spec
    from .gpus import get_gpu
    from .sizing import fit
    launcher = engine_spec(engine).launch
    if launcher is None or launcher.roles is None:
        served = [name for name, spec in ENGINES.items() if spec.launch and spec.launch.roles]
        raise ValueError(f"kvmem writes disaggregated commands for {', '.join(served)}; got engine {engine!r}")
    model = as_model(model)
    gpu_spec = get_gpu(gpu)
    prompt, output = parse_tokens(prompt_tokens), parse_tokens(output_tokens)
    rate = _rate(request_rate)
    common = dict(gpu=gpu, engine=engine, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    notes = []

    # decode: Little's law over the decode bound at full batch
    context = prompt + output
    if decode_gpus is None:
        decode_gpus = fit(model, num_gpus=1, context=context, **common, **options).min_gpus
        if decode_gpus is None:
            raise ValueError(f"{model.name} at {context:,} tokens fits no GPU count kvmem tried; give decode_gpus")
    decode_gpus = require_positive_int("decode_gpus", decode_gpus)
    d = fit(model, num_gpus=decode_gpus, context=context, **common, **options)
    if d.max_batch == 0 or not d.decode_tokens_per_s:
        raise ValueError(f"decode: {d.why_not or 'no decode bound for this GPU (its bandwidth is unknown)'}")
    per_seq = Fraction(str(d.decode_tokens_per_s))
    concurrent = rate * output / per_seq                       # sequences decoding at once
    decode_instances = max(1, math.ceil(concurrent / d.max_batch))
    decode_cmd, decode_notes = _command(model, "decode", prompt, options, num_gpus=decode_gpus, context=context,
                                        batch=min(d.max_batch, math.ceil(concurrent / decode_instances)), **common)
    decode = _role("decode", d, gpus=decode_gpus, instances=decode_instances, needed=math.ceil(concurrent),
                   tokens_per_s=float(per_seq), command=decode_cmd, notes=decode_notes)

    # prefill: compute-bound throughput, given or from FLOPs
    if prefill_gpus is None:
        prefill_gpus = fit(model, num_gpus=1, context=prompt, **common, **options).min_gpus or decode_gpus
    prefill_gpus = require_positive_int("prefill_gpus", prefill_gpus)
    if prefill_tokens_per_s is not None:
        throughput = Fraction(str(prefill_tokens_per_s))
        if throughput <= 0:
            raise ValueError(f"prefill_tokens_per_s must be positive, got {prefill_tokens_per_s!r}")
    else:
        if not gpu_spec.bf16_dense_tflops or not model.params_active and not model.params_total:
            raise ValueError(f"no FLOPs figure for {gpu_spec.name} or no parameter count for {model.name}: "
                             "give prefill_tokens_per_s (measured prompt tokens a second per prefill instance)")
        mfu = DEFAULT_PREFILL_MFU if prefill_mfu is None else Fraction(str(prefill_mfu))
        active = model.params_active or model.params_total
        throughput = (prefill_gpus * Fraction(str(gpu_spec.bf16_dense_tflops)) * 10**12 * mfu) / (2 * active)
        notes.append(f"prefill throughput estimated: {prefill_gpus} x {gpu_spec.bf16_dense_tflops} dense bf16 TFLOPS "
                     f"x MFU {float(mfu):g} / (2 x {active:,} active parameters) = {float(throughput):,.0f} prompt "
                     "tokens/s an instance (an assumption: give prefill_tokens_per_s measured)")
    prefill_instances = max(1, math.ceil(rate * prompt / throughput))
    in_flight = max(1, math.ceil(rate / prefill_instances * prompt / throughput))   # prompts prefilling at once
    p = fit(model, num_gpus=prefill_gpus, context=prompt, batch=in_flight, **common, **options)
    prefill_cmd, prefill_notes = _command(model, "prefill", prompt, options, num_gpus=prefill_gpus, context=prompt,
                                          batch=in_flight, **common)
    if not p.fits:
        prefill_notes.insert(0, f"an instance does not hold the {in_flight} prompts in flight: {p.why_not}")
    prefill = _role("prefill", p, gpus=prefill_gpus, instances=prefill_instances, needed=in_flight * prefill_instances,
                    tokens_per_s=float(throughput), command=prefill_cmd, notes=prefill_notes)
    return Disaggregated(model=model.name, gpu=gpu_spec.name, engine=engine, prompt_tokens=prompt,
                         output_tokens=output, request_rate=str(rate), prefill=prefill, decode=decode,
                         notes=tuple(notes))
