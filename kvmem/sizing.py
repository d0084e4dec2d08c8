"""Hardware sizing: does a workload fit, how many sequences and tokens, on how many GPUs, how fast.

    fit(model, gpu=..., context=..., engine="vllm") -> Fit

Per device, each engine splits memory its own way, and its module says how with its sources
(``SizingRules`` in kvmem.engines.base, filled in by each engine module): its memory budget
(of total or of free memory, and what it subtracts), its activation and compute-buffer model,
its batch defaults by device, its sequence limit and how it splits over GPUs. This module asks
them and searches; it names no engine. ``total`` = GPU.usable_memory_bytes (the CUDA total
where known), ``weights`` = kvmem.weights per device (plus what the engine keeps beside them),
KV bytes from the engine's own module through kvmem.estimate.

Options, beside each engine module's own (passed to kvmem.estimate / capacity), are the
engine's sizing options: weights_bytes, activation_bytes, non_torch_bytes (per device; replace
the engine's models with measured figures) and the engine's own (vLLM max_num_seqs,
cudagraph_bytes, kv_cache_memory_bytes; SGLang mem_fraction_static, chunked_prefill_size,
cuda_graph_max_bs; TensorRT-LLM free_gpu_memory_fraction, max_num_tokens).
gpu_memory_utilization is vLLM's alone. ``engine_defaults(engine, gpu, ...)`` tells the
settings in force that depend on the device, and why; the Fit's notes say it too. Under the
engines' own defaults more memory can fit less: vLLM's batch defaults step up at 70 GiB
(3.4 GiB of sampler peak for a 128k vocabulary) and SGLang's reserve jumps to 10 GiB above
60 GiB. Pin those options to compare GPUs on equal terms.

Parallelism: tp x pp GPUs per replica; num_gpus / (tp x pp) data-parallel replicas, each with
its own copy of the weights; max_batch counts all replicas. tp must divide the attention heads.
An engine that splits layers (llama.cpp, -sm layer) takes num_gpus as pp; one that sizes one
device per copy (transformers, hf-*) takes tp = pp = 1 and more GPUs as replicas.
A workload fits when the engine's estimate() for batch x context (its transient peak included:
for vLLM the padding-layer slots and the most blocks a window layer holds while the sequence
grows to ``context``) is within the KV budget; for vLLM and full attention that is its
"Maximum concurrency" rounded down.

The results:
    max_batch    sequences of ``context`` tokens that fit at once (all replicas, at most the
                 engine's sequence limit: llama.cpp's LLAMA_MAX_SEQ 256)
    max_context  the longest context for ``batch`` sequences (1 when batch is None), capped
                 at the model's max_position_embeddings
    min_gpus     the fewest GPUs (tp x pp, tp from 1, 2, 4, ... 64) that fit the workload
    decode bound a step reads the active weights once (MoE: the experts the batch touches)
                 and every sequence's KV (at ``context`` tokens: the last, slowest step):
                 tokens/s per sequence = bandwidth / (active weights / tp + KV read / tp);
                 pipeline stages run one after another for a token, so pp does not raise it;
                 the bound ignores compute, kernels' efficiency and communication.
    kv_crossover_tokens  the context at which the batch's KV reads equal the weight reads
fit() raises FitError (a ValueError) when not one sequence of ``context`` fits; its message
says by how much per device and what would fit, and its ``.fit`` holds the result.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction

from .catalog import as_model
from .engines import ENGINES, capacity as _capacity, engine_spec, estimate as _estimate
from .engines.base import Budget, BudgetRequest, Capacity, EngineDefaults, SizingRules, byte_option, fraction_option
from .gpus import GPU, get_gpu, list_gpus
from .model import Model
from .records import Record
from .units import format_bytes, parse_bytes, parse_tokens, require_positive_int
from .weights import Weights, weights as _weights

__all__ = ["Fit", "FitError", "fit", "kv_crossover_tokens", "engine_defaults", "MemoryBreakdown"]

_SEARCH_CAP = 1 << 24                # tokens / sequences searched at most when nothing else caps
_COMMON_OPTIONS = ("weights_bytes", "activation_bytes", "non_torch_bytes")
_DEFAULT_UTILIZATION = Fraction(9, 10)


@dataclass(frozen=True)
class MemoryBreakdown(Record):
    """One device's memory under the engine's rules (bytes): what ``Fit.breakdown`` holds.

    ``kv`` is what the workload's cache needs, ``kv_pool`` what the engine reserves for KV (the
    whole budget for an engine that pre-allocates); ``free`` is what neither takes.
    """

    total_bytes: int
    weights_bytes: int
    kv_bytes: int
    kv_pool_bytes: int
    activations_bytes: int
    overhead_bytes: int
    free_bytes: int

    KEYS = {"total": "total_bytes", "weights": "weights_bytes", "kv": "kv_bytes", "kv_pool": "kv_pool_bytes",
            "activations": "activations_bytes", "overhead": "overhead_bytes", "free": "free_bytes"}


class FitError(ValueError):
    """The workload does not fit at all; ``.fit`` is the (not fitting) result."""

    def __init__(self, message: str, result: "Fit"):
        super().__init__(message)
        self.fit = result


@dataclass(frozen=True)
class Fit:
    """Whether a workload fits on a set of GPUs under one engine's rules (bytes per device)."""

    model: str
    gpu: str
    engine: str
    num_gpus: int
    tp: int
    pp: int
    replicas: int
    context: int
    batch: int | None
    weight_dtype: str
    kv_dtype: str
    fits: bool
    max_batch: int
    max_context: int
    min_gpus: int | None
    breakdown: MemoryBreakdown
    kv_memory_bytes: int
    kv_bytes_per_sequence: int
    shortfall_bytes: int
    decode_tokens_per_s: float | None
    decode_tokens_per_s_aggregate: float | None
    kv_crossover_tokens: int | None
    suggestions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    capacity: Capacity | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["breakdown"] = self.breakdown.to_dict()
        data["capacity"] = self.capacity.to_dict() if self.capacity else None
        data["suggestions"] = list(self.suggestions)
        data["notes"] = list(self.notes)
        return data


# ----------------------------------------------------------------------------- one set-up

@dataclass(frozen=True)
class _Setup:
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

    @property
    def replicas(self) -> int:
        return self.num_gpus // (self.tp * self.pp)


@dataclass(frozen=True)
class _Budget:
    """The engine's Budget, with the Weights it was made from (None when weights_bytes was given)."""

    budget: Budget
    weights_obj: Weights | None
    notes: tuple[str, ...]

    def __getattr__(self, name):          # total, weights, activations, overhead, kv_memory
        return getattr(self.budget, name)


def _rules(engine: str) -> tuple[str, SizingRules]:
    spec = engine_spec(engine)
    if spec.sizing is None:
        raise ValueError(f"fit has no memory budget rule for engine {spec.name!r}; it sizes: "
                         + ", ".join(name for name, s in ENGINES.items() if s.sizing))
    return spec.name, spec.sizing


def _need(s: _Setup, tokens: int, batch: int) -> int:
    """KV bytes one device needs for ``batch`` sequences of ``tokens`` tokens (transient peak included)."""
    est = _estimate(s.model, engine=s.engine, tokens=tokens, batch=batch, kv_dtype=s.kv_dtype,
                    tp=s.tp, pp=s.pp, **s.engine_options)
    return max(est.total_bytes, est.peak_bytes)


_WEIGHTS_CACHE: dict = {}


def _model_weights(model: Model, weight_dtype) -> Weights:
    """kvmem.weights, remembered for the searches that re-budget a set-up many times."""
    key = (id(model), weight_dtype)
    hit = _WEIGHTS_CACHE.get(key)
    if hit is None or hit[0] is not model:
        if len(_WEIGHTS_CACHE) > 64:
            _WEIGHTS_CACHE.clear()
        hit = _WEIGHTS_CACHE[key] = (model, _weights(model, weight_dtype))
    return hit[1]


def _budget(s: _Setup, batch_for_activations: int) -> _Budget:
    opts, notes, rules = s.sizing, [], s.rules
    weights_obj = None
    if opts.get("weights_bytes") is not None:
        weights_dev = parse_bytes(opts["weights_bytes"])
    else:
        weights_obj = _model_weights(s.model, s.weight_dtype)
        notes.extend(weights_obj.notes)
        weights_dev = weights_obj.per_device(tp=s.tp, pp=s.pp)
        if rules.weights_extra is not None:
            extra, extra_notes = rules.weights_extra(s.model)
            weights_dev += extra
            notes.extend(extra_notes)
        if rules.weight_notes is not None:
            notes.extend(rules.weight_notes(weights_obj.weight_dtype))
    non_torch = opts.get("non_torch_bytes")
    non_torch = rules.non_torch_bytes if non_torch is None else byte_option("non_torch_bytes", non_torch)
    act = opts.get("activation_bytes")
    act = None if act is None else byte_option("activation_bytes", act)
    request = BudgetRequest(model=s.model, gpu=s.gpu, tp=s.tp, pp=s.pp, context=s.context,
                            batch=batch_for_activations, kv_dtype=s.kv_dtype, utilization=s.utilization,
                            weights_bytes=weights_dev, non_torch_bytes=non_torch, activation_bytes=act,
                            engine_options=s.engine_options, sizing_options=opts)
    budget = rules.budget(request)
    return _Budget(budget, weights_obj, tuple(notes) + budget.notes)


# ----------------------------------------------------------------------------- inputs

def _split_options(engine: str, rules: SizingRules, spec_options: dict, options: dict) -> tuple[dict, dict]:
    engine_opts, sizing = {}, dict(rules.options)
    for name, value in options.items():
        if name in rules.fixed_options:
            how = ", ".join(rules.fixed_options.values())
            raise ValueError(f"fit sets {engine}'s {name} itself ({how}); give context and batch instead")
        if name in spec_options:
            engine_opts[name] = value
        elif name in sizing:
            sizing[name] = value
        else:
            valid = sorted(set(spec_options) | set(sizing))
            raise ValueError(f"engine {engine!r} has no option {name!r} for fit; its options: {', '.join(valid)}")
    return engine_opts, sizing


def _setup(model, *, gpu, num_gpus, tp, pp, context, batch, weight_dtype, kv_dtype, engine,
           gpu_memory_utilization, options) -> tuple[_Setup, list[str]]:
    notes = []
    model = as_model(model)
    gpu = get_gpu(gpu)
    name, rules = _rules(engine)
    spec = ENGINES[name]
    num_gpus = require_positive_int("num_gpus", num_gpus)
    pp = require_positive_int("pp", pp)
    context = parse_tokens(context)
    if batch is not None:
        batch = require_positive_int("batch", batch)
    utilization = fraction_option("gpu_memory_utilization", gpu_memory_utilization)
    if not rules.takes_utilization and utilization != _DEFAULT_UTILIZATION:
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
    if model.num_attention_heads % tp:
        raise ValueError(f"tp={tp} must divide the model's {model.num_attention_heads} attention heads")
    if pp > model.num_layers:
        raise ValueError(f"pp={pp} exceeds the model's {model.num_layers} layers")
    engine_opts, sizing = _split_options(name, rules, spec.options, options)
    auto = isinstance(weight_dtype, str) and weight_dtype.strip().lower() == "auto"
    if auto and sizing.get("weights_bytes") is None and model.params_total and rules.loads_fp32_as_fp16 \
            and model.dtype == "fp32":
        weight_dtype = "fp16"
        notes.append("fp32 checkpoint: serving engines load it in fp16 (dtype 'auto')")
    s = _Setup(model=model, gpu=gpu, engine=name, rules=rules, tp=tp, pp=pp, num_gpus=num_gpus, context=context,
               batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype, utilization=utilization,
               engine_options=engine_opts, sizing=sizing)
    return s, notes


def engine_defaults(engine: str, gpu, *, context, tp: int = 1, pp: int = 1, **options) -> EngineDefaults | None:
    """The engine's settings in force on ``gpu`` that depend on the device, and why (None: it has none).

    ``options`` are the engine and sizing options a fit would take: a value given is the one
    in force. vLLM: max_num_batched_tokens and max_num_seqs; SGLang: mem_fraction_static.
    """
    name, rules = _rules(engine)
    if rules.defaults is None:
        return None
    engine_opts, sizing = _split_options(name, rules, ENGINES[name].options, options)
    return rules.defaults(get_gpu(gpu), parse_tokens(context), require_positive_int("tp", tp),
                          require_positive_int("pp", pp), engine_opts, sizing)


# ----------------------------------------------------------------------------- search

def _largest(fits, cap: int, guess: int = 1) -> int:
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


def _linear_guess(measure, target: int, probe: int) -> int:
    """n with measure(n) ~ target, extrapolated from measure(probe)."""
    at_probe = measure(probe)
    return probe * target // at_probe if at_probe > 0 else probe


def _holds(s: _Setup, tokens: int, batch: int, kv_memory: int) -> bool:
    """Whether ``batch`` x ``tokens`` fits ``kv_memory``; a size the engine refuses (llama.cpp's
    256 sequences, a StaticCache shorter than the sequence) does not fit."""
    try:
        return _need(s, tokens, batch) <= kv_memory
    except ValueError:
        return False


def _batch_cap(s: _Setup) -> int:
    return s.rules.max_sequences or _SEARCH_CAP


def _max_batch(s: _Setup, kv_memory: int) -> int:
    """Sequences of ``context`` one replica holds (``kv_memory``: the budget at batch 1)."""
    per_seq = _need(s, s.context, 1)
    if kv_memory <= 0 or per_seq > kv_memory:
        return 0
    cap = _batch_cap(s)
    guess = kv_memory // per_seq if per_seq else cap
    upper = _largest(lambda b: _holds(s, s.context, b, kv_memory), cap, guess)
    if s.rules.batch_dependent:   # the batch-1 budget bounds it; activations only shrink it further
        return _largest(lambda b: _holds(s, s.context, b, _budget(s, b).kv_memory), upper, upper)
    return upper


def _context_cap(model: Model) -> int:
    return model.max_position_embeddings or _SEARCH_CAP


def _max_context(s: _Setup, kv_memory: int, batch: int) -> int:
    if kv_memory <= 0 or batch > _batch_cap(s):
        return 0
    cap = _context_cap(s.model)

    def need_or_zero(n: int) -> int:
        try:
            return _need(s, n, batch)
        except ValueError:
            return 0

    guess = _linear_guess(need_or_zero, kv_memory, min(cap, s.context))
    upper = _largest(lambda n: _holds(s, n, batch, kv_memory), cap, guess)
    if s.rules.batch_dependent:
        return _largest(lambda n: _holds(s, n, batch, _budget(replace(s, context=n), batch).kv_memory),
                        upper, upper)
    return upper


def _per_replica(s: _Setup) -> int:
    return -(-(s.batch or 1) // s.replicas)


def _fits(s: _Setup) -> bool:
    """Whether the workload (batch, default 1, of ``context`` tokens) fits one replica."""
    n = _per_replica(s)
    kv_memory = _budget(s, n).kv_memory
    return kv_memory > 0 and _holds(s, s.context, n, kv_memory)


# ----------------------------------------------------------------------------- decode speed

def _kv_read_bytes(s: _Setup, tokens: int, batch: int) -> int:
    """KV (+ state) bytes one decode step reads, summed over the tp ranks and pp stages of a replica."""
    est = _estimate(s.model, engine=s.engine, tokens=tokens, batch=batch, kv_dtype=s.kv_dtype,
                    tp=s.tp, pp=s.pp, **s.engine_options)
    return est.kv_bytes_all_devices + est.state_bytes * s.tp * s.pp


def _active_weight_bytes(s: _Setup, budget: _Budget, batch: int) -> int:
    """Weight bytes one decode step reads over a replica (tp ranks x pp stages)."""
    if budget.weights_obj is not None:
        return budget.weights_obj.active_bytes(batch)
    whole = budget.weights * s.tp * s.pp
    if s.model.params_total and s.model.params_active:
        return whole * s.model.params_active // s.model.params_total
    return whole


def kv_crossover_tokens(model, *, batch: int = 1, weight_dtype="auto", kv_dtype="auto",
                        engine: str = "ideal", tp: int = 1, pp: int = 1, **options) -> int | None:
    """The context at which ``batch`` sequences' KV reads per decode step equal the weight reads.

    None when the KV never catches up within 2**24 tokens (sliding-window or linear models).
    """
    s, _ = _setup(model, gpu="custom:1TiB", num_gpus=tp * pp, tp=tp, pp=pp, context=1, batch=batch,
                  weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=engine, gpu_memory_utilization=0.9,
                  options=options)
    budget = _budget(s, batch)
    return _crossover(s, budget, batch)


def _crossover(s: _Setup, budget: _Budget, batch: int) -> int | None:
    weights_read = _active_weight_bytes(s, budget, batch)

    def accepted(n: int) -> bool:
        try:
            _kv_read_bytes(s, n, batch)
            return True
        except ValueError:        # longer than the engine takes (a StaticCache's max_cache_len)
            return False

    limit = _SEARCH_CAP if accepted(_SEARCH_CAP) else _largest(accepted, _SEARCH_CAP, s.context)
    if limit == 0 or _kv_read_bytes(s, limit, batch) < weights_read:
        return None
    guess = _linear_guess(lambda n: _kv_read_bytes(s, n, batch), weights_read, min(4096, limit))
    below = _largest(lambda n: _kv_read_bytes(s, n, batch) < weights_read, limit, guess)
    return below + 1


# ----------------------------------------------------------------------------- fit

def fit(model, *, gpu, num_gpus: int = 1, tp: int | None = None, pp: int = 1, context, batch: int | None = None,
        weight_dtype="auto", kv_dtype="auto", engine: str = "vllm", gpu_memory_utilization=0.9,
        **options) -> Fit:
    """Does ``batch`` x ``context`` fit on ``num_gpus`` x ``gpu`` under ``engine``? (module docstring)"""
    s, notes = _setup(model, gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, context=context, batch=batch,
                      weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=engine,
                      gpu_memory_utilization=gpu_memory_utilization, options=options)
    if s.gpu.usable_memory_source == "vendor_tool" and s.gpu.name in list_gpus():
        notes.append(f"{s.gpu.name}: sized from the vendor tool's total; CUDA sees a few hundred MiB less")
    wanted = s.batch or 1
    per_replica = _per_replica(s)
    budget = _budget(s, per_replica)
    notes.extend(budget.notes)
    at_one = _budget(s, 1) if s.rules.batch_dependent else budget
    per_replica_max = _max_batch(s, at_one.kv_memory)
    max_batch = per_replica_max * s.replicas
    fits = max_batch >= wanted
    max_context = _max_context(s, at_one.kv_memory, per_replica)
    if max_context == _context_cap(s.model) and s.model.max_position_embeddings:
        notes.append(f"max_context stops at the model's max_position_embeddings ({max_context:,})")
    if per_replica_max == s.rules.max_sequences:
        notes.append(f"max_batch stops at {s.engine}'s limit of {per_replica_max} sequences per replica")
    min_gpus = _min_gpus(s)
    kv_per_seq = _need(s, s.context, 1)
    one = _estimate(s.model, engine=s.engine, tokens=s.context, batch=1, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
                    **s.engine_options)
    if one.peak_bytes > one.total_bytes:
        notes.append(f"sized for the engine's peak: one sequence holds up to {format_bytes(one.peak_bytes)} of KV "
                     f"while it is built, {format_bytes(one.peak_bytes - one.total_bytes)} above the "
                     f"{format_bytes(one.total_bytes)} it keeps at {s.context:,} tokens")
    work_batch = per_replica if s.batch is not None else max(per_replica_max, 1)
    kv_work = _need(s, s.context, work_batch)
    shortfall = 0 if fits else max(_need(s, s.context, per_replica) - budget.kv_memory, 0)
    kv_pool = max(budget.kv_memory, 0) if s.rules.preallocates else kv_work
    free = budget.total - budget.weights - max(kv_pool, kv_work) - budget.activations - budget.overhead
    breakdown = MemoryBreakdown(total_bytes=budget.total, weights_bytes=budget.weights, kv_bytes=kv_work,
                                kv_pool_bytes=kv_pool, activations_bytes=budget.activations,
                                overhead_bytes=budget.overhead, free_bytes=free)
    speed = speed_all = crossover = None
    if s.gpu.bandwidth_bytes_per_s:
        step_bytes = (_active_weight_bytes(s, budget, work_batch) + _kv_read_bytes(s, s.context, work_batch))
        speed = s.gpu.bandwidth_bytes_per_s * s.tp / step_bytes
        speed_all = speed * work_batch * s.replicas
    crossover = _crossover(s, budget, work_batch)
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
                 breakdown=breakdown, kv_memory_bytes=budget.kv_memory, kv_bytes_per_sequence=kv_per_seq,
                 shortfall_bytes=shortfall, decode_tokens_per_s=speed, decode_tokens_per_s_aggregate=speed_all,
                 kv_crossover_tokens=crossover, suggestions=suggestions, notes=tuple(dict.fromkeys(notes)),
                 capacity=cap)
    if max_batch == 0:
        raise FitError(_not_fitting_message(s, budget, result), result)
    return result


def _tp_candidates(s: _Setup) -> list[int]:
    heads = s.model.num_attention_heads
    return [tp for tp in (1, 2, 4, 8, 16, 32, 64) if heads % tp == 0]


def _min_gpus(s: _Setup) -> int | None:
    """The fewest GPUs (one replica: tp x pp) that fit the workload."""
    wanted = s.batch or 1
    if s.rules.one_device:
        return 1 if _fits(replace(s, num_gpus=1, batch=wanted)) else None
    if s.rules.layer_split:
        for pp in range(1, min(64, s.model.num_layers) + 1):
            trial = replace(s, pp=pp, num_gpus=pp, batch=wanted)
            if _fits(trial):
                return pp
        return None
    for tp in _tp_candidates(s):
        trial = replace(s, tp=tp, num_gpus=tp * s.pp, batch=wanted)
        try:
            if _fits(trial):
                return tp * s.pp
        except ValueError:       # tp not allowed for this model's KV heads or state
            continue
    return None


def _suggest(s: _Setup, budget: _Budget, max_context: int, per_replica_max: int,
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
                if smaller and _fits(replace(s, weight_dtype=name)):
                    out.append(f"weight_dtype={name!r}")
                    break
            except ValueError:
                continue
    kv_alt = s.rules.kv_smaller_dtype
    if kv_alt is not None:
        try:
            here = _estimate(s.model, engine=s.engine, tokens=1, batch=1, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
                             **s.engine_options)
            if here.kv_dtype in ("bf16", "fp16", "fp32", "f16") and _fits(replace(s, kv_dtype=kv_alt)):
                out.append(f"kv_dtype={kv_alt!r}")
        except ValueError:
            pass
    if 0 < max_context < s.context:
        out.append(f"context <= {max_context:,} tokens" + (f" at batch {s.batch}" if s.batch else ""))
    max_batch = per_replica_max * s.replicas
    if s.batch and 0 < max_batch < s.batch:
        out.append(f"batch <= {max_batch} at {s.context:,} tokens")
    return out


def _not_fitting_message(s: _Setup, budget: _Budget, result: Fit) -> str:
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
