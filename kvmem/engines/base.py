"""What every engine mode shares: results, option checks, and how tp/pp split a model.

Tensor parallelism splits KV heads: a rank holds kv_heads // tp heads, or one replicated
head when tp >= kv_heads (tp must then be a multiple of kv_heads) — vLLM
``get_num_kv_heads`` (vllm/config/model.py), SGLang and TensorRT-LLM likewise. MLA's latent
has no heads and is replicated on every rank. Pipeline parallelism gives each stage a run
of layers: n // pp each, the remainder one apiece to the stages before the last
(vLLM ``get_pp_indices``, vllm/distributed/utils.py).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from typing import Callable

from ..dtypes import DType, dtype
from ..model import MLA, Layer, Model
from ..records import Record
from ..units import parse_bytes, require_positive_int

MAX_PARALLEL = 65536  # tp and pp: far above any deployment (and any head or layer count kvmem reads)

__all__ = ["Estimate", "Capacity", "EngineSpec", "SizingRules", "Budget", "BudgetRequest", "EngineDefaults",
           "PrefixSharing", "PastPositions", "share_every_token", "share_whole_blocks", "SERVING_WEIGHT_FORMATS",
           "fraction_option", "byte_option", "kv_heads_per_rank", "pp_stages", "largest_stage", "assemble",
           "resolve_dtypes", "cdiv", "past_positions", "with_note", "check_query_heads"]


def cdiv(a: int, b: int) -> int:
    """Ceiling division of integers: cdiv(17, 16) == 2."""
    return -(-a // b)


@dataclass(frozen=True)
class Estimate:
    """Cache bytes of one workload under one engine's rules (ints, one device unless named)."""

    model: str
    engine: str
    tokens: int
    batch: int
    kv_dtype: str
    tp: int
    pp: int
    k_bytes: int
    v_bytes: int
    state_bytes: int
    per_layer: tuple[int, ...]
    kv_bytes_all_devices: int
    peak_bytes: int
    notes: tuple[str, ...] = ()
    details: dict | Record = field(default_factory=dict, compare=False)    # the engine's own, by its names
    block_size: int = field(default=1, compare=False)          # tokens per block (page) the cache is cut in
    log_lines: tuple[str, ...] = field(default=(), compare=False)   # what the engine itself prints

    @property
    def kv_bytes(self) -> int:
        """K + V bytes on one device (the largest pipeline stage)."""
        return self.k_bytes + self.v_bytes

    @property
    def total_bytes(self) -> int:
        """KV plus fixed recurrent state on one device."""
        return self.kv_bytes + self.state_bytes

    @property
    def engine_refuses(self) -> str | None:
        """Why the engine itself would refuse this workload (it would not start), or None."""
        return self.details.get("engine_refuses")

    @property
    def engine_allows_with(self) -> str | None:
        """The setting that makes the engine start anyway ("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"), or None."""
        return self.details.get("engine_allows_with")

    @property
    def bytes_per_token(self) -> float:
        """KV bytes per cached token of the batch (one device)."""
        return self.kv_bytes / (self.tokens * self.batch)

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["block_size"], data["log_lines"]      # in details too, under the engine's own names
        if isinstance(self.details, Record):
            data["details"] = self.details.to_dict()
        data["per_layer"] = list(self.per_layer)
        data["notes"] = list(self.notes)
        data.update(kv_bytes=self.kv_bytes, total_bytes=self.total_bytes)
        return data


@dataclass(frozen=True)
class Capacity:
    """What a KV memory budget holds under one engine's rules."""

    model: str
    engine: str
    kv_memory: int
    blocks: int
    tokens: int
    max_concurrency: float | None
    max_model_len: int | None
    block_size: int = 1
    notes: tuple[str, ...] = ()
    details: dict = field(default_factory=dict, compare=False)
    log_lines: tuple[str, ...] = field(default=(), compare=False)   # what the engine itself prints

    @property
    def engine_refuses(self) -> str | None:
        """Why the engine itself would refuse this budget (it would not start), or None."""
        return self.details.get("engine_refuses")

    @property
    def engine_allows_with(self) -> str | None:
        """The setting that makes the engine start anyway ("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"), or None."""
        return self.details.get("engine_allows_with")

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["log_lines"]                           # in details["log"] too
        if isinstance(self.details, Record):
            data["details"] = self.details.to_dict()
        data["notes"] = list(self.notes)
        return data


@dataclass(frozen=True)
class PastPositions:
    """What an engine does with a context past the model's max_position_embeddings (its module
    gives the source): ``what`` it does, and the setting that makes it start anyway where it
    refuses (None: it runs)."""

    what: str
    allow_with: str | None = None


def past_positions(model: Model, spec: "EngineSpec", tokens: int) -> tuple[str, dict] | None:
    """(note, details) when ``tokens`` exceed the model's max_position_embeddings, else None.

    ``details`` carries ``engine_refuses`` (the engine would not start) and
    ``engine_allows_with`` (the setting that makes it start anyway) where the engine refuses.
    """
    limit = model.max_position_embeddings
    if not limit or tokens <= limit:
        return None
    rule = spec.positions or PastPositions(f"kvmem does not know what {spec.name} does")
    note = (f"{tokens:,} tokens exceed the model's {limit:,} positions (max_position_embeddings): {rule.what}"
            + (f" unless {rule.allow_with}" if rule.allow_with else "")
            + "; positions past the trained range may lose quality")
    details = {"engine_refuses": note, "engine_allows_with": rule.allow_with} if rule.allow_with else {}
    return note, details


def check_query_heads(spec: "EngineSpec", model: Model, tp: int) -> None:
    """tp must divide the query heads where the engine's module says its engine asserts it."""
    if tp > 1 and spec.query_heads_rule and model.num_attention_heads % tp:
        raise ValueError(f"tp={tp} must divide the model's {model.num_attention_heads} query heads "
                         f"(num_attention_heads): {spec.query_heads_rule}")


def with_note(result, note: str, details: dict):
    """``result`` (an Estimate or a Capacity) with one more note and details merged in."""
    notes = result.notes if note in result.notes else result.notes + (note,)
    return replace(result, notes=notes, details={**result.details, **details})


@dataclass(frozen=True)
class PrefixSharing:
    """How an engine shares a batch's common prefix: whole units of ``unit_tokens`` tokens.

    ``refusal``: why it shares nothing here (None when it shares); ``notes``: what the count
    assumes. kvmem.strategies applies it; the engine module says what it is.
    """

    unit_tokens: int | None = 1
    unit_option: str = ""            # the engine option that sets the unit (for the error when unknown)
    refusal: str | None = None
    notes: tuple[str, ...] = ()


def share_every_token(_options: dict, _estimate: Estimate) -> PrefixSharing:
    """The default: every token of the prefix is stored once (no block granularity)."""
    return PrefixSharing()


def share_whole_blocks(option: str, options: dict, estimate: Estimate, notes=()) -> PrefixSharing:
    """Whole blocks only, of the ``option`` tokens given, else the size the Estimate was built with."""
    unit = options.get(option)
    if unit is None:
        unit = estimate.details.get(option, estimate.details.get("block_size"))
    return PrefixSharing(unit_tokens=unit, unit_option=option, notes=tuple(notes))


@dataclass(frozen=True)
class BudgetRequest:
    """What sizing asks an engine's memory-budget rule: one device of one replica (bytes).

    ``batch`` is the sequences the activations are sized for; ``engine_options`` are the
    engine options the caller gave (not their defaults), ``sizing_options`` the engine's
    sizing options with their defaults filled in; ``activation_bytes`` is None unless given.
    """

    model: Model
    gpu: object                      # kvmem.gpus.GPU
    tp: int
    pp: int
    context: int
    batch: int
    kv_dtype: object
    utilization: Fraction
    weights_bytes: int
    non_torch_bytes: int
    activation_bytes: int | None
    engine_options: dict
    sizing_options: dict


@dataclass(frozen=True)
class Budget:
    """One device's memory as an engine splits it: what it holds besides the KV, and the KV budget."""

    total: int
    weights: int
    activations: int
    overhead: int
    kv_memory: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineDefaults:
    """Engine settings that depend on the device, with the values in force and why."""

    engine: str
    values: dict
    reason: str

    def to_dict(self) -> dict:
        return {"engine": self.engine, **self.values, "reason": self.reason}


SERVING_WEIGHT_FORMATS = ("fp8", "int8", "awq", "nvfp4")


@dataclass(frozen=True)
class SizingRules:
    """What kvmem.sizing asks an engine (each engine module fills one in, with its sources).

    budget(BudgetRequest) -> Budget      its memory split, activations and compute buffers included
    options                              sizing options beside the engine's own, with defaults
    non_torch_bytes                      its default CUDA context / library overhead per device
    preallocates                         it reserves its whole KV budget at start-up
    batch_dependent                      its activations grow with the batch (re-budget per batch)
    max_sequences                        its limit on sequences per replica (None: none)
    layer_split                          it splits layers over GPUs: num_gpus becomes pp, no tp
    one_device                           one device per model copy (extra GPUs are replicas)
    fraction_option                      its own memory-fraction option (gpu_memory_utilization
                                         is taken only where ``takes_utilization``)
    weights_extra(model) -> (bytes, notes)   memory it keeps beside the checkpoint's weights
    weight_notes(weight_dtype) -> notes  what its loaders do to a weight format
    defaults(gpu, context, tp, pp, engine_options, sizing_options) -> EngineDefaults (positional)
                                         its settings that depend on the device
    fixed_options                        engine options fit sets itself, with why
    kv_smaller_dtype, weight_formats     what "would fit" suggests trying
    loads_fp32_as_fp16                   its dtype "auto" serves an fp32 checkpoint in fp16
    """

    budget: Callable
    options: dict = field(default_factory=dict)
    non_torch_bytes: int = 512 << 20
    preallocates: bool = False
    batch_dependent: bool = False
    max_sequences: int | None = None
    layer_split: bool = False
    one_device: bool = False
    fraction_option: str | None = None
    takes_utilization: bool = False
    weights_extra: Callable | None = None
    weight_notes: Callable | None = None
    defaults: Callable | None = None
    fixed_options: dict = field(default_factory=dict)
    kv_smaller_dtype: str | None = "fp8"
    weight_formats: tuple[str, ...] = SERVING_WEIGHT_FORMATS
    loads_fp32_as_fp16: bool = False


@dataclass(frozen=True)
class EngineSpec:
    """An engine mode: its name, its options with defaults, and its rules.

    ``sizing``: what kvmem.sizing needs (None: fit does not size this engine); ``prefix``:
    how it shares a common prefix (options, Estimate) -> PrefixSharing; ``positions``: what it
    does past the model's positions; ``query_heads_rule``: its assertion that tp divides the
    query heads, where it has one.
    """

    name: str
    options: dict
    estimate: Callable
    capacity: Callable | None = None
    sizing: SizingRules | None = None
    prefix: Callable = share_every_token
    positions: PastPositions | None = None       # a context past max_position_embeddings
    query_heads_rule: str | None = None          # the engine asserts tp divides the query heads (and where)
    pinned: str = ""                             # the engine release whose code the rules follow
    refusals: dict = field(default_factory=dict)  # model_type -> why this engine's pinned code cannot size it


def fraction_option(name: str, value) -> Fraction:
    """A memory fraction option in (0, 1], exact (0.9 is 9/10, not the nearest double)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    frac = Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    if not 0 < frac <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    return frac


def byte_option(name: str, value) -> int:
    """A byte-count option: 0, an int, or a string such as '512MiB'."""
    if value == 0:
        return 0
    try:
        return parse_bytes(value)
    except ValueError:
        raise ValueError(f"{name} must be a byte count (an int or a string like '512MiB'), got {value!r}") from None


def kv_heads_per_rank(kv_heads: int, tp: int) -> int:
    """KV heads one tensor-parallel rank holds: kv_heads // tp, or 1 (replicated) if tp >= kv_heads."""
    if tp >= kv_heads:
        if tp % kv_heads:
            raise ValueError(f"tp={tp} must be a multiple of the {kv_heads} KV heads when it exceeds them")
        return 1
    if kv_heads % tp:
        raise ValueError(f"tp={tp} must divide the {kv_heads} KV heads")
    return kv_heads // tp


def pp_stages(n_layers: int, pp: int) -> list[range]:
    """Layer ranges per pipeline stage: n // pp each, the remainder to the stages before the last."""
    if pp > n_layers:
        raise ValueError(f"pp={pp} exceeds the model's {n_layers} layers")
    sizes = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        sizes[-i] += 1
    stages, start = [], 0
    for size in sizes:
        stages.append(range(start, start + size))
        start += size
    return stages


def resolve_dtypes(model: Model, kv_dtype, type_k=None, type_v=None) -> tuple[DType, DType, DType]:
    """(K dtype, V dtype, state dtype): "auto" is the model's dtype; states stay in it."""
    k = dtype(type_k if type_k is not None else kv_dtype, model_dtype=model.dtype)
    v = dtype(type_v if type_v is not None else kv_dtype, model_dtype=model.dtype)
    return k, v, dtype(model.dtype)


def check_parallel(tp, pp) -> tuple[int, int]:
    return require_positive_int("tp", tp, MAX_PARALLEL), require_positive_int("pp", pp, MAX_PARALLEL)


def largest_stage(rows: list[tuple[int, int, int]], stages: list[range]) -> range:
    """The pipeline stage whose layers hold the most bytes (the device a report is about)."""
    totals = [sum(sum(rows[i]) for i in stage) for stage in stages]
    return stages[max(range(len(stages)), key=lambda s: totals[s])]


def assemble(model: Model, engine: str, *, tokens: int, batch: int, kv_dtype: str, tp: int, pp: int,
             rows: list[tuple[int, int, int]], peak_extra: int = 0, notes=(), details=None,
             stages: list[range] | None = None, block_size: int = 1, log_lines=()) -> Estimate:
    """An Estimate from per-layer (K, V, state) bytes on one rank of each layer's stage.

    The reported device is the pipeline stage holding the most bytes (``stages``: the engine's
    own split, vLLM's ``pp_stages`` by default); other stages' layers show 0 in ``per_layer``.
    ``peak_extra`` is a transient above the steady KV.
    """
    stages = stages or pp_stages(len(rows), pp)
    largest = stages[0] if len(stages) == 1 else largest_stage(rows, stages)
    ks, vs, ss = zip(*rows, strict=True) if rows else ((), (), ())  # columns, summed at C speed (a fit asks ~25 times)
    if largest == range(len(rows)):
        per_layer = tuple(map(sum, rows))
        k, v, state = sum(ks), sum(vs), sum(ss)
    else:
        per_layer = tuple(sum(rows[i]) if i in largest else 0 for i in range(len(rows)))
        k = sum(ks[i] for i in largest)
        v = sum(vs[i] for i in largest)
        state = sum(ss[i] for i in largest)
    all_devices = tp * (sum(ks) + sum(vs))
    return Estimate(model=model.name, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype,
                    tp=tp, pp=pp, k_bytes=k, v_bytes=v, state_bytes=state, per_layer=per_layer,
                    kv_bytes_all_devices=all_devices, peak_bytes=k + v + peak_extra,
                    notes=tuple(notes), details=details or {}, block_size=block_size,
                    log_lines=tuple(log_lines))


def layer_heads(layer: Layer, tp: int) -> int:
    """KV heads of ``layer`` on one rank (MLA: its single latent 'head', never split)."""
    if layer.kind == MLA or not layer.kv_heads:
        return 1
    return kv_heads_per_rank(layer.kv_heads, tp)


def state_bytes(state, model_dtype: str, tp: int = 1, *, ssm_dtype: str | None = None) -> int:
    """One sequence's recurrent state on one rank: the conv window (kernel - 1 columns) in its own
    dtype (RecurrentState.conv_dtype) else the model's, the recurrent state in ``ssm_dtype``, else
    its own (RecurrentState.ssm_dtype), else the model's."""
    conv = state_share(state.conv_channels * max(state.conv_kernel - 1, 0), state.ssm_heads, tp)
    ssm = state_share(state.ssm_elements, state.ssm_heads, tp)
    return (dtype(state.conv_dtype or model_dtype).row_bytes(conv)
            + dtype(ssm_dtype or state.ssm_dtype or model_dtype).row_bytes(ssm))


def state_share(elements: int, heads: int, tp: int) -> int:
    """A recurrent state's elements on one rank: split over its heads by tp."""
    if tp > 1 and heads % tp:
        raise ValueError(f"tp={tp} must divide the {heads} recurrent-state heads")
    return elements // tp if tp > 1 else elements

