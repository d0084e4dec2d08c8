"""One sizing set-up: the inputs checked, the engine's sizing rules found, and its memory budget asked.

The engine module answers (its SizingRules): this module only gathers what the rule needs
(weights per device, what the engine keeps beside them, non-torch memory, given figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..catalog import as_model
from ..engines import ENGINES, engine_estimate, engine_spec
from ..engines.base import Budget, BudgetRequest, EngineDefaults, SizingRules, byte_option, fraction_option
from ..gpus import GPU, get_gpu
from ..host import host_memory_bytes
from ..model import Model
from ..parallel import check_pp_layers, require_divides
from ..units import parse_bytes, parse_tokens, require_positive_int
from ..weights import Weights
from ..weights import weights as _weights

DEFAULT_UTILIZATION = Fraction(9, 10)


# ----------------------------------------------------------------------------- one set-up

@dataclass(frozen=True)
class Given:
    """The measured figures a caller may give instead of kvmem's estimates (the sizing options every
    engine's SizingRules.options may take), parsed once: bytes, or None where not given."""

    weights_bytes: int | None = None       # per device, replacing the weight formula
    non_torch_bytes: int | None = None     # replacing the engine's default non-torch memory
    activation_bytes: int | None = None    # replacing the activation estimate
    host_memory_bytes: int | None = None   # the node's host RAM, bounding what the plan keeps there (kvmem.host)

    @classmethod
    def of(cls, sizing: dict) -> "Given":
        parsers = {"weights_bytes": parse_bytes, "non_torch_bytes": lambda v: byte_option("non_torch_bytes", v),
                   "activation_bytes": lambda v: byte_option("activation_bytes", v),
                   "host_memory_bytes": host_memory_bytes}     # a size or a node preset (kvmem.host)
        return cls(**{name: None if sizing.get(name) is None else parse(sizing.get(name))
                      for name, parse in parsers.items()})


@dataclass(frozen=True)
class Setup:
    model: Model
    gpu: GPU
    engine: str
    rules: SizingRules
    tp: int
    pp: int
    num_gpus: int
    context: int
    batch: int | None
    weight_dtype: str
    kv_dtype: object
    utilization: Fraction
    engine_options: dict
    sizing: dict
    given: Given

    @property
    def replicas(self) -> int:
        """Copies of the KV pool serving requests apart: model copies x the engine's KV groups per copy
        (SizingRules.kv_groups: SGLang's attention data-parallel groups)."""
        groups = self.rules.kv_groups(self.engine_options) if self.rules.kv_groups else 1
        return self.num_gpus // (self.tp * self.pp) * groups


@dataclass(frozen=True)
class SetupBudget(Budget):
    """The engine's Budget (its notes after the weights' own), with the Weights it was made from
    (None when weights_bytes was given)."""

    weights_obj: Weights | None = None


def engine_rules(engine: str) -> tuple[str, SizingRules]:
    spec = engine_spec(engine)
    if spec.sizing is None:
        raise ValueError(f"fit has no memory budget rule for engine {spec.name!r}; it sizes: "
                         + ", ".join(name for name, s in ENGINES.items() if s.sizing))
    return spec.name, spec.sizing


def setup_estimate(s: Setup, tokens: int, batch: int):
    """The engine's Estimate for ``batch`` sequences of ``tokens`` tokens under this set-up, computed
    once per workload (a 70B fit asks ~32 times for ~21 workloads). For the sizing's own use: the
    Estimate is shared, so no caller changes it."""
    key = (_Rules(ENGINES[s.engine]), s.model, s.engine, tokens, batch, s.kv_dtype, s.tp, s.pp,
           tuple(sorted(s.engine_options.items())))
    try:
        hash(key)
    except TypeError:                       # an unhashable option value: estimated each time
        return engine_estimate(s.model, engine=s.engine, tokens=tokens, batch=batch, kv_dtype=s.kv_dtype,
                               tp=s.tp, pp=s.pp, **s.engine_options)
    return _shared_estimate(*key)


class _Rules:
    """An engine's registered spec as part of a cache key: that very spec (a spec is never changed,
    only replaced: a test's toy engine under a known name keys apart from the real one)."""

    __slots__ = ("spec",)

    def __init__(self, spec):
        self.spec = spec

    def __hash__(self) -> int:
        return id(self.spec)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Rules) and other.spec is self.spec


# keyed by value (Model.__hash__ is its cached fingerprint) and the engine's rules: one estimate per workload
@lru_cache(maxsize=4096)
def _shared_estimate(_rules: _Rules, model: Model, engine: str, tokens: int, batch: int, kv_dtype, tp: int, pp: int,
                     options: tuple):
    return engine_estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp,
                           **dict(options))


def need_bytes(s: Setup, tokens: int, batch: int) -> int:
    """KV bytes one device needs for ``batch`` sequences of ``tokens`` tokens (transient peak included)."""
    est = setup_estimate(s, tokens, batch)
    return max(est.total_bytes, est.peak_bytes)


def model_weights(model: Model, weight_dtype) -> Weights:
    """kvmem.weights, remembered for the searches that re-budget a set-up many times."""
    try:
        hash(weight_dtype)
    except TypeError:                       # an unhashable weight_dtype: kvmem.weights refuses or reads it
        return _weights(model, weight_dtype)
    return _shared_weights(model, weight_dtype)


@lru_cache(maxsize=64)
def _shared_weights(model: Model, weight_dtype) -> Weights:
    return _weights(model, weight_dtype)


def budget_for(s: Setup, batch_for_activations: int) -> SetupBudget:
    opts, rules, given = s.sizing, s.rules, s.given
    notes: list[str] = []
    weights_obj = None
    if given.weights_bytes is not None:
        weights_dev = given.weights_bytes
    else:
        weights_obj = model_weights(s.model, s.weight_dtype)
        notes.extend(weights_obj.notes)
        if rules.weights_per_device is not None:
            weights_dev, parallel_notes = rules.weights_per_device(
                weights_obj, s.model, tp=s.tp, pp=s.pp, dp=s.num_gpus // (s.tp * s.pp),
                options={**opts, **s.engine_options})
            notes.extend(parallel_notes)
        else:
            weights_dev = weights_obj.per_device(tp=s.tp, pp=s.pp, replicated=rules.replicates_kv_weights)
        if rules.weights_extra is not None:
            extra, extra_notes = rules.weights_extra(s.model)
            weights_dev += extra
            notes.extend(extra_notes)
        if rules.weight_notes is not None:
            notes.extend(rules.weight_notes(weights_obj.weight_dtype))
    non_torch = rules.non_torch_bytes if given.non_torch_bytes is None else given.non_torch_bytes
    request = BudgetRequest(model=s.model, gpu=s.gpu, tp=s.tp, pp=s.pp, context=s.context,
                            batch=batch_for_activations, kv_dtype=s.kv_dtype, utilization=s.utilization,
                            weights_bytes=weights_dev, non_torch_bytes=non_torch,
                            activation_bytes=given.activation_bytes, engine_options=s.engine_options,
                            sizing_options=opts)
    budget = rules.budget(request)
    return SetupBudget(budget.total, budget.weights, budget.activations, budget.overhead, budget.kv_memory,
                       tuple(notes) + budget.notes, weights_obj)


# ----------------------------------------------------------------------------- inputs

def split_options(engine: str, rules: SizingRules, spec_options: dict, options: dict) -> tuple[dict, dict]:
    from ..engines import MAX_OPTION_CHARS, bounded_option
    from ..sources.bounded import quote
    engine_opts, sizing = {}, dict(rules.options)
    for name, value in options.items():
        if isinstance(value, str) and len(value) > MAX_OPTION_CHARS:     # echoed by the checks below: bounded first
            bounded_option(engine, quote(name, 40), value)
        if name in rules.fixed_options:
            how = ", ".join(rules.fixed_options.values())
            raise ValueError(f"fit sets {engine}'s {name} itself ({how}); give context and batch instead")
        if name in spec_options:
            engine_opts[name] = value
        elif name in sizing:
            sizing[name] = value
        else:
            valid = sorted(set(spec_options) | set(sizing))
            raise ValueError(f"engine {engine!r} has no option {quote(name)} for fit; its options: {', '.join(valid)}")
    return engine_opts, sizing


def make_setup(model, *, gpu, num_gpus, tp, pp, context, batch, weight_dtype, kv_dtype, engine,
           gpu_memory_utilization, options) -> tuple[Setup, list[str]]:
    notes = []
    model = as_model(model)
    gpu = get_gpu(gpu)
    name, rules = engine_rules(engine)
    spec = ENGINES[name]
    num_gpus = require_positive_int("num_gpus", num_gpus)
    pp = require_positive_int("pp", pp)
    context = parse_tokens(context)
    if batch is not None:
        batch = require_positive_int("batch", batch)
    utilization = fraction_option("gpu_memory_utilization", gpu_memory_utilization)
    if not rules.takes_utilization and utilization != DEFAULT_UTILIZATION:
        knob = rules.fraction_option
        raise ValueError(f"gpu_memory_utilization is vLLM's setting; engine {name!r} "
                         + (f"takes {knob}=..." if knob else "has no such fraction"))
    if rules.layer_split:
        if tp not in (None, 1):
            raise ValueError(f"{name} splits layers across GPUs (-sm layer), not tensors: use pp, got tp={tp}")
        tp = 1
        if pp == 1 and num_gpus > 1:
            pp = num_gpus
            notes.append(f"{name} splits the layers over the {num_gpus} GPUs (pp={pp})")
    elif rules.one_device and (tp not in (None, 1) or pp != 1):
        raise ValueError(f"engine {name!r} sizes one device per model copy (tp and pp 1; extra GPUs "
                         f"serve as replicas), got tp={tp}, pp={pp}")
    if tp is None:
        tp = 1 if rules.one_device else max(1, num_gpus // pp)
    tp = require_positive_int("tp", tp)
    if tp * pp > num_gpus:
        raise ValueError(f"tp={tp} x pp={pp} needs {tp * pp} GPUs, but num_gpus={num_gpus}")
    if num_gpus % (tp * pp):
        notes.append(f"{num_gpus % (tp * pp)} of the {num_gpus} GPUs stay idle: replicas need tp x pp = {tp * pp}")
    require_divides(tp, model.num_attention_heads, "attention heads", owner="model's ")
    check_pp_layers(pp, model.num_layers)
    engine_opts, sizing = split_options(name, rules, spec.options, options)
    if rules.device_options is not None:     # what the engine picks by the device, where not given
        picks, device_notes = rules.device_options(gpu, model, kv_dtype, engine_opts)
        engine_opts = {**picks, **engine_opts}
        notes.extend(device_notes)
    given = Given.of(sizing)
    auto = isinstance(weight_dtype, str) and weight_dtype.strip().lower() == "auto"
    if auto and given.weights_bytes is None and model.params_total and rules.loads_fp32_as_fp16 \
            and model.dtype == "fp32":
        weight_dtype = "fp16"
        notes.append("fp32 checkpoint: serving engines load it in fp16 (dtype 'auto')")
    s = Setup(model=model, gpu=gpu, engine=name, rules=rules, tp=tp, pp=pp, num_gpus=num_gpus, context=context,
               batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype, utilization=utilization,
               engine_options=engine_opts, sizing=sizing, given=given)
    return s, notes


def engine_defaults(engine: str, gpu, *, context, tp: int = 1, pp: int = 1, model=None,
                    **options) -> EngineDefaults | None:
    """The engine's settings in force on ``gpu`` that depend on the device, and why (None: it has none).

    ``options`` are the engine and sizing options a fit would take: a value given is the one
    in force. vLLM: max_num_batched_tokens and max_num_seqs; SGLang: mem_fraction_static.
    ``model`` (a Model or a name): the settings for that model, where its architecture moves them
    (SGLang: Inkling's prefill CUDA graph, a vision tower's factor); without it, a text model's.
    """
    name, rules = engine_rules(engine)
    if rules.defaults is None:
        return None
    engine_opts, sizing = split_options(name, rules, ENGINES[name].options, options)
    where = (get_gpu(gpu), parse_tokens(context), require_positive_int("tp", tp), require_positive_int("pp", pp),
             engine_opts, sizing)
    if model is not None and rules.model_defaults is not None:
        return rules.model_defaults(as_model(model), *where)
    return rules.defaults(*where)
