"""What fit() returns: the Fit, its per-device MemoryBreakdown, and FitError."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..engines import ENGINES
from ..engines.results import Capacity, EngineVerdict, Refusal
from ..records import DictRecord
from .numbers import EngineNumbers


@dataclass(frozen=True)
class MemoryBreakdown(DictRecord):
    """One device's memory under the engine's rules (bytes): what ``Fit.breakdown`` holds, also a
    read-only dict of its parts by their plain keys (``breakdown["kv"]``), as the API contract has it.

    ``kv`` is what the workload's cache needs, ``kv_pool`` what the engine reserves for KV (the
    whole budget for an engine that pre-allocates; at most the budget for one that does not);
    ``free`` is what neither takes: for vLLM its reserve, total x (1 - gpu_memory_utilization),
    whether the workload fits or not. ``shortfall`` is the KV the workload needs beyond the
    engine's budget (0 when it fits): drawn past the device line, never taken out of ``free``.
    """

    total_bytes: int
    weights_bytes: int
    kv_bytes: int
    kv_pool_bytes: int
    activations_bytes: int
    overhead_bytes: int
    free_bytes: int
    shortfall_bytes: int = 0

    KEYS = {"total": "total_bytes", "weights": "weights_bytes", "kv": "kv_bytes", "kv_pool": "kv_pool_bytes",
            "activations": "activations_bytes", "overhead": "overhead_bytes", "free": "free_bytes",
            "shortfall": "shortfall_bytes"}


def shown_parts(breakdown: dict, fits: bool) -> dict:
    """The breakdown parts a person reads (the CLI, the report, the app's bar): the shortfall only where
    there is one, and no "free" (vLLM: its reserve outside the budget) of 0 B for a workload that does not
    fit: the weights and the engine's own needs overflow the device there, and a 0 B reserve reads false."""
    return {part: value for part, value in breakdown.items()
            if not (part == "shortfall" and not value) and not (part == "free" and not value and not fits)}


def part_names(engine: str) -> dict:
    """Each breakdown part of a Fit under ``engine``, as a person reads it ("free": what the memory
    outside its budget is, in its own words: SizingRules.startup.outside_budget)."""
    spec = ENGINES.get(engine)
    startup = spec.sizing.startup if spec and spec.sizing else None
    return {"weights": "weights", "kv": "KV this workload needs", "kv_pool": "KV pool the engine reserves",
            "activations": "activation peak", "overhead": "engine overhead (non-torch, CUDA graphs)",
            "free": startup.outside_budget if startup else "unused", "shortfall": f"short of {engine}'s KV budget"}


def decode_words(fit: dict) -> str | None:
    """The decode bound in words, saying which batch it is for (Fit.to_dict() data: the CLI, the app and
    the report say it alike). The bound is sized at the breakdown's batch: the batch asked, else the
    max batch; None for a workload with no bound (it does not fit, or the GPU has no bandwidth)."""
    if fit.get("decode_tokens_per_s") is None:
        return None
    batch = fit["breakdown_batch"]
    why = "the batch asked" if fit.get("batch") is not None else "the max batch: no batch was given"
    where = f"{batch:,} sequence{'s' * (batch != 1)}" + (" per replica" if fit.get("replicas", 1) > 1 else "")
    return (f"{fit['decode_tokens_per_s']:,.1f} tokens/s per sequence, {fit['decode_tokens_per_s_aggregate']:,.0f} "
            f"in all, at {where} of {fit['breakdown_context']:,} tokens ({why})")


class FitError(ValueError):
    """A workload that does not fit, as an exception (``.fit`` the Fit). kvmem.fit does not raise it: a
    workload that does not fit is a Fit with ``.fits`` False and ``.why_not`` (one sequence or the batch
    asked, alike); callers that want an exception raise ``FitError(fit.why_not, fit)`` themselves."""

    def __init__(self, message: str, result: "Fit"):
        super().__init__(message)
        self.fit = result


@dataclass(frozen=True)
class Fit(EngineVerdict):
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
    breakdown_batch: int = 1       # sequences per replica the breakdown's "kv" is for
    breakdown_context: int = 0     # tokens per sequence the breakdown's "kv" is for
    refusal: Refusal | None = None      # why the engine itself would not start (context past its positions)
    engine_numbers: EngineNumbers | None = field(default=None, compare=False)  # what the engine prints
    placement: dict | None = field(default=None, compare=False)   # the engine's placement the verdict is of
    levers: tuple = field(default=(), compare=False)   # kvmem.sizing.suggest.Lever: words, change, max batch
    why_not: str | None = None     # when it does not fit: the shortfall and what would fit, in words (None: fits)
    host: dict | None = field(default=None, compare=False)   # kvmem.host.HostMemory.to_dict(): the host RAM side

    @property
    def decode_text(self) -> str | None:
        """The decode bound and the batch it is for, in words (decode_words)."""
        return decode_words({"decode_tokens_per_s": self.decode_tokens_per_s, "batch": self.batch,
                             "decode_tokens_per_s_aggregate": self.decode_tokens_per_s_aggregate,
                             "breakdown_batch": self.breakdown_batch, "breakdown_context": self.breakdown_context,
                             "replicas": self.replicas})

    def to_dict(self) -> dict:
        data: dict[str, object] = {}
        for key, value in asdict(self).items():    # the refusal as the two keys Fit has always had
            data.update(self._refusal_dict() if key == "refusal" else {key: value})
        data["breakdown"] = self.breakdown.to_dict()
        data["capacity"] = self.capacity.to_dict() if self.capacity else None
        data["engine_numbers"] = self.engine_numbers.to_dict() if self.engine_numbers else None
        data["suggestions"] = list(self.suggestions)
        data["levers"] = [lever.to_dict() for lever in self.levers]
        data["notes"] = list(self.notes)
        return data
