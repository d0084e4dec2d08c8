"""What fit() returns: the Fit, its per-device MemoryBreakdown, and FitError."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..engines.base import Capacity
from ..records import Record


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
    breakdown_batch: int = 1       # sequences per replica the breakdown's "kv" is for
    breakdown_context: int = 0     # tokens per sequence the breakdown's "kv" is for
    engine_refuses: str | None = None   # why the engine itself would not start (context past its positions)
    engine_allows_with: str | None = None  # the setting that makes it start anyway

    def to_dict(self) -> dict:
        data = asdict(self)
        data["breakdown"] = self.breakdown.to_dict()
        data["capacity"] = self.capacity.to_dict() if self.capacity else None
        data["suggestions"] = list(self.suggestions)
        data["notes"] = list(self.notes)
        return data
