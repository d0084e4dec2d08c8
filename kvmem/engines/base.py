"""What every engine mode declares: its spec (EngineSpec), the rules kvmem.sizing asks of it
(SizingRules, BudgetRequest -> Budget, EngineDefaults), how it shares a prefix and what it
does past the model's positions, and the option parsers the engines share.

The results (Estimate, Capacity, assemble) live in results.py and the parallelism rules in
kvmem/parallel.py: each is imported from its home, not from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction

from ..dtypes import DType, dtype
from ..model import Model
from ..parallel import require_divides, state_share
from ..units import parse_bytes
from .declared import Option
from .positions import PastPositions
from .results import Estimate
from .serving import Launcher, LogReader

__all__ = ["EngineSpec", "SizingRules", "Budget", "BudgetRequest",
           "EngineDefaults", "PrefixSharing", "StartupNumbers", "CheckedFamilies", "share_every_token",
           "share_whole_blocks", "SERVING_WEIGHT_FORMATS",
           "fraction_option", "byte_option", "resolve_dtypes", "check_query_heads", "state_bytes"]


def check_query_heads(spec: "EngineSpec", model: Model, tp: int) -> None:
    """tp must divide the query heads where the engine's module says its engine asserts it."""
    if tp > 1 and spec.query_heads_rule:
        require_divides(tp, model.num_attention_heads, "query heads (num_attention_heads)", owner="model's ",
                        why=spec.query_heads_rule)


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
        unit = getattr(estimate.details, option, getattr(estimate.details, "block_size", None))   # its record's
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
class CheckedFamilies:
    """The opt-in families (kvmem.configs.families, Family.opt_in: read after the engine modes'
    rules were first checked) that an engine mode sizes, each checked against the engine's own
    code: those in ``names``, or with ``all_but`` every opt-in family except those in ``names``.
    The default sizes none of them (kvmem.engines.check_family refuses the rest by name)."""

    names: frozenset = frozenset()
    all_but: bool = False

    def sizes(self, model_type: str) -> bool:
        return (model_type in self.names) != self.all_but


@dataclass(frozen=True)
class StartupNumbers:
    """What an engine prints at start-up about its pool, in its own words (kvmem.sizing.numbers):
    the name of the token count it prints, what that count depends on, what the memory outside
    its budget is, and the line stating its KV budget where it prints one ({gib}: GiB to 2 decimals).

    Where the pool follows from the settings alone (llama.cpp: the cells -c makes),
    ``from_estimate(Estimate) -> (tokens, sequences)`` reads the count and the sequences it serves
    off the engine's estimate of the workload, and the numbers are exact. Without it the pool is
    what the memory leaves: the numbers are read off kvmem.capacity for the memory budget, and
    ``depends_on`` names what kvmem estimates of that memory."""

    tokens_label: str
    depends_on: str
    outside_budget: str = "unused"
    budget_line: str = ""
    from_estimate: Callable | None = None

    @property
    def exact(self) -> bool:
        return self.from_estimate is not None


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
    model_defaults(model, gpu, context, tp, pp, engine_options, sizing_options) -> EngineDefaults
                                         the same for one model, where its architecture moves them
    device_options(gpu, model, kv_dtype, engine_options) -> (options, notes)
                                         engine options it picks by the device (kernels by compute
                                         capability), filled in where the caller gave none
    fixed_options                        engine options fit sets itself, with why
    kv_smaller_dtype, weight_formats     what "would fit" suggests trying
    loads_fp32_as_fp16                   its dtype "auto" serves an fp32 checkpoint in fp16
    replicates_kv_weights                tp above the KV heads keeps a whole K/V head's projections
                                         on every rank, and MLA's down-projections whole (its module
                                         cites the code); else every weight splits evenly
    startup                              what it prints at start-up about its pool, sized from
                                         memory or from its settings (StartupNumbers; None: no pool)
    pools_refuse(model, kv_memory=, tokens=, batch=, kv_dtype=, tp=, pp=, **options) -> str | None
                                         why its pools would not serve the batch at once though the
                                         budget holds its bytes (SGLang's full and SWA pools, its
                                         request cap), None where they do; no rule: the bytes decide
    weights_per_device(weights, model, tp=, pp=, dp=, options=) -> (bytes, notes)
                                         its weights on one GPU of dp model copies where its parallel options
                                         (data-parallel attention, expert parallelism; engine and sizing
                                         options) change them; None: Weights.per_device
    kv_groups(options) -> int            KV pools with their own requests in one tp x pp group (SGLang's
                                         attention data-parallel groups); None: one
    moe_over_replicas                    its model copies share the MoE layers (vLLM's data-parallel
                                         replicas): a decode step reads the experts every copy's batch touches,
                                         split over all of them
    host_terms(setup, kv_memory, placement) -> [kvmem.host.HostTerm]
                                         what it keeps in host RAM per node (offload tiers, checkpoints,
                                         tensors placed on the CPU); None: nothing
    host_inputs                          the host-RAM settings the Fit page asks for (kvmem.host.HostInput)
    placement_verdict(setup, answer) -> answer | None
                                         asked when the workload does not fit with the whole model on
                                         the GPUs: the answer of its best placement over GPUs and host
                                         RAM (llama.cpp: kvmem.engines.llamacpp.verdict), None: it stands
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
    model_defaults: Callable | None = None
    device_options: Callable | None = None
    fixed_options: dict = field(default_factory=dict)
    kv_smaller_dtype: str | None = "fp8"
    weight_formats: tuple[str, ...] = SERVING_WEIGHT_FORMATS
    loads_fp32_as_fp16: bool = False
    replicates_kv_weights: bool = False
    startup: StartupNumbers | None = None
    pools_refuse: Callable | None = None
    placement_verdict: Callable | None = None
    weights_per_device: Callable | None = None
    kv_groups: Callable | None = None
    moe_over_replicas: bool = False
    host_terms: Callable | None = None
    host_inputs: tuple = ()


@dataclass(frozen=True)
class EngineSpec:
    """An engine mode: its name, its options with defaults, and its rules.

    ``declared``: options typed beyond their default (kvmem.engines.declared.Option);
    ``sizing``: what kvmem.sizing needs (None: fit does not size this engine); ``prefix``:
    how it shares a common prefix (options, Estimate) -> PrefixSharing; ``positions``: what it
    does past the model's positions; ``query_heads_rule``: its assertion that tp divides the
    query heads, where it has one; ``families``: the opt-in families it sizes (CheckedFamilies);
    ``panels``: the Fit page panels it has beside the common ones
    ("offload": layers and experts placed on the GPUs and the host); ``launch``: how kvmem.plan
    writes its server command (Launcher); ``log_reader``: how kvmem.check_log reads its startup log
    (LogReader); ``logs_kv_budget``: its
    startup log states the KV budget it computed (SizingRules.startup.budget_line), which
    check_log compares with a plan's.
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
    declared: tuple[Option, ...] = ()            # options typed beyond their default (choices, help)
    families: CheckedFamilies = CheckedFamilies()  # the opt-in families it sizes (none by default)
    panels: tuple[str, ...] = ()                 # Fit page panels of its own ("offload")
    launch: Launcher | None = None               # its server command (kvmem.plan); None: it has none
    log_reader: LogReader | None = None          # its startup log's reader (kvmem.check_log); None: none

    @property
    def logs_kv_budget(self) -> bool:
        return bool(self.sizing and self.sizing.startup and self.sizing.startup.budget_line)

    def option_specs(self) -> tuple[Option, ...]:
        """Every option of ``options``, typed: as declared (its default from ``options``), else from its default."""
        declared = {option.name: option for option in self.declared}
        unknown = sorted(set(declared) - set(self.options))
        if unknown:
            raise ValueError(f"engine {self.name!r} declares {unknown[0]!r}, which is not one of its options")
        return tuple(replace(declared[name], default=default) if name in declared else Option(name, default)
                     for name, default in self.options.items())


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


def resolve_dtypes(model: Model, kv_dtype, k_dtype=None, v_dtype=None) -> tuple[DType, DType, DType]:
    """(K dtype, V dtype, state dtype): K and V in ``kv_dtype`` unless given apart; "auto" is the
    model's dtype; states stay in it."""
    k = dtype(k_dtype if k_dtype is not None else kv_dtype, model_dtype=model.dtype)
    v = dtype(v_dtype if v_dtype is not None else kv_dtype, model_dtype=model.dtype)
    return k, v, dtype(model.dtype)


def state_bytes(state, model_dtype: str, tp: int = 1, *, ssm_dtype: str | None = None) -> int:
    """One sequence's recurrent state on one rank: the conv window (kernel - 1 columns) in its own
    dtype (RecurrentState.conv_dtype) else the model's, the recurrent state in ``ssm_dtype``, else
    its own (RecurrentState.ssm_dtype), else the model's."""
    conv = state_share(state.conv_channels * max(state.conv_kernel - 1, 0), state.ssm_heads, tp)
    ssm = state_share(state.ssm_elements, state.ssm_heads, tp)
    return (dtype(state.conv_dtype or model_dtype).row_bytes(conv)
            + dtype(ssm_dtype or state.ssm_dtype or model_dtype).row_bytes(ssm))
