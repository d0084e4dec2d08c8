"""The strategies' results that were dicts: frozen records read by attribute (``row.total_bytes``),
with ``to_dict()`` for plain data under the keys the dicts had (``"bytes"``). The ones the API
contract promises as dicts (compare_strategies' StrategyRow, preallocation_waste's AllocationWaste
with its Reservation and Admitted) are DictRecords: also read-only dicts (``row["bytes"]``,
``w["paged"]["reserved_bytes"]``), equal to those dicts (no dataclass __eq__).

StrategyRow (compare_strategies), VariantRow (architecture_variants), AllocationWaste with its
Reservation and Admitted (preallocation_waste), Admission (simulate_admission), AllocationRow
(allocation_sweep), QuantRow (quantization_options); EvictionPolicies (eviction_policies) is
kvmem.strategies.eviction's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Model
from ..records import DictRecord, Record

__all__ = ["StrategyRow", "VariantRow", "Reservation", "Admitted", "AllocationWaste", "Admission", "AllocationRow",
           "QuantRow"]


@dataclass(frozen=True, eq=False)
class StrategyRow(DictRecord):
    """One row of compare_strategies, read like the dict it was (``row["bytes"]``, equal to that
    dict): ``total_bytes`` (key "bytes": KV + state on one device; None where the strategy is not
    available), its saving against the baseline, the cost in words, ``settings`` and ``quality``
    (ids of the cited measurements)."""

    strategy: str
    family: str
    total_bytes: int | None
    saving_bytes: int | None
    saving_fraction: float | None
    cost: str
    lossless: bool
    needs_retraining: bool
    settings: dict
    quality: list

    KEYS = {"strategy": "strategy", "family": "family", "bytes": "total_bytes", "saving_bytes": "saving_bytes",
            "saving_fraction": "saving_fraction", "cost": "cost", "lossless": "lossless",
            "needs_retraining": "needs_retraining", "settings": "settings", "quality": "quality"}


@dataclass(frozen=True)
class VariantRow(Record):
    """One row of architecture_variants: the variant's name (also as ``strategy``), its cache's
    ``total_bytes`` (to_dict key "bytes"; None where the engine cannot size it), the saving against
    "as is", the cost with its source, ``settings`` and the variant ``model`` itself."""

    variant: str
    strategy: str
    family: str
    total_bytes: int | None
    saving_bytes: int | None
    saving_fraction: float | None
    needs_retraining: bool
    lossless: bool
    settings: dict
    cost: str
    model: Model

    KEYS = {"variant": "variant", "strategy": "strategy", "family": "family", "bytes": "total_bytes",
            "saving_bytes": "saving_bytes", "saving_fraction": "saving_fraction",
            "needs_retraining": "needs_retraining", "lossless": "lossless", "settings": "settings", "cost": "cost",
            "model": "model"}


@dataclass(frozen=True, eq=False)
class Reservation(DictRecord):
    """What one way of allocating reserves for the requests: bytes reserved and wasted (reserved -
    used); paged allocation also its ``block_size`` and the tokens left empty in last blocks."""

    reserved_bytes: int
    waste_bytes: int
    waste_fraction: float
    block_size: int | None = None
    internal_fragmentation_tokens: int | None = None

    KEYS = {"block_size": "block_size", "reserved_bytes": "reserved_bytes", "waste_bytes": "waste_bytes",
            "waste_fraction": "waste_fraction", "internal_fragmentation_tokens": "internal_fragmentation_tokens"}
    OPTIONAL = ("block_size", "internal_fragmentation_tokens")


@dataclass(frozen=True, eq=False)
class Admitted(DictRecord):
    """Requests admitted first come first served when each reserves max_model_len (contiguous),
    its blocks (paged) or its exact bytes."""

    contiguous: int
    paged: int
    exact: int


@dataclass(frozen=True, eq=False)
class AllocationWaste(DictRecord):
    """preallocation_waste: used bytes against contiguous and paged reservations (``admitted``:
    a key only with kv_memory)."""

    model: str
    requests: int
    max_model_len: int
    mean_length: float
    used_bytes: int
    contiguous: Reservation
    paged: Reservation
    admitted: Admitted | None = None

    OPTIONAL = ("admitted",)

    def to_dict(self) -> dict:
        return {key: value.to_dict() if isinstance(value, Record) else value for key, value in self.items()}


@dataclass(frozen=True)
class Admission(Record):
    """simulate_admission: the requests ``kv_memory`` admits under each way of allocating."""

    model: str
    kv_memory: int
    requests: int
    block_size: int
    max_model_len: int
    admitted: Admitted

    def to_dict(self) -> dict:
        return {**super().to_dict(), "admitted": self.admitted.to_dict()}


@dataclass(frozen=True)
class AllocationRow(Record):
    """One row of allocation_sweep: a distribution under one allocation (``block_size`` None:
    contiguous), its used, reserved and wasted bytes and the requests admitted."""

    distribution: str
    allocation: str
    block_size: int | None
    used_bytes: int
    reserved_bytes: int
    waste_bytes: int
    waste_fraction: float
    admitted: int
    mean_length: float


@dataclass(frozen=True)
class QuantRow(Record):
    """One row of quantization_options: the K and V formats, the KV bytes in them (``kv_bytes``,
    to_dict key "bytes"; None where a format cannot store the model's rows, ``cost`` then saying
    why, without bits and residual_length), the saving against the model's own dtype and the cost
    in words."""

    k_dtype: str
    v_dtype: str
    kv_bytes: int | None
    saving_bytes: int | None
    saving_fraction: float | None
    cost: str
    bits_k: float | None = None
    bits_v: float | None = None
    residual_length: int | None = None

    KEYS = {"k_dtype": "k_dtype", "v_dtype": "v_dtype", "bits_k": "bits_k", "bits_v": "bits_v",
            "residual_length": "residual_length", "bytes": "kv_bytes", "saving_bytes": "saving_bytes",
            "saving_fraction": "saving_fraction", "cost": "cost"}
    OPTIONAL = ("bits_k", "bits_v", "residual_length")

