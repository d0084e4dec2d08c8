"""The typed results every engine mode returns: Estimate (the bytes of one workload) and
Capacity (what a KV budget holds), each with the engine's own record in ``details`` (one type per
engine), its K and V formats and its ``refusal`` (a Refusal: why the engine itself would not start
the workload, and the way out); and ``assemble``, which builds an Estimate from per-layer
(K, V, state) bytes on the device a report is about (the largest pipeline stage)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from ..model import Model
from ..parallel import largest_stage, pp_stages
from ..records import Record

__all__ = ["Refusal", "Estimate", "Capacity", "IdealDetails", "with_note", "assemble"]


@dataclass(frozen=True)
class Refusal:
    """Why the engine itself would not start a workload (its own text, or kvmem's account of its
    rule), and ``allow_with``: the setting that makes it start anyway (e.g.
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"), None where nothing does."""

    reason: str
    allow_with: str | None = None

    def to_dict(self) -> dict:
        """The plain-data keys results have always carried it under."""
        return {"engine_refuses": self.reason, "engine_allows_with": self.allow_with}


_NO_REFUSAL = {"engine_refuses": None, "engine_allows_with": None}


class EngineVerdict:
    """What the engine itself says of a result (Estimate, Capacity, Fit), from its ``refusal``:
    ``engine_refuses`` (why it would not start, or None) and ``engine_allows_with`` (the setting
    that starts it anyway, or None)."""

    refusal: Refusal | None

    @property
    def engine_refuses(self) -> str | None:
        return self.refusal.reason if self.refusal else None

    @property
    def engine_allows_with(self) -> str | None:
        return self.refusal.allow_with if self.refusal else None

    def _refusal_dict(self) -> dict:
        return self.refusal.to_dict() if self.refusal else dict(_NO_REFUSAL)


@dataclass(frozen=True)
class IdealDetails(Record):
    """Estimate.details and Capacity.details of the ideal count: nothing beyond the Estimate's own
    fields, except for a KIVI-style quantised count (kvmem.strategies.quantized_estimate): its
    full-precision residual (keys only when set)."""

    residual_length: int | None = None
    residual_dtype: str | None = None

    OPTIONAL = ("residual_length", "residual_dtype")


@dataclass(frozen=True)
class Estimate(EngineVerdict):
    """Cache bytes of one workload under one engine's rules (ints, one device unless named).

    ``kv_dtype`` names the formats in one word ("q8_0", or a K/V pair such as "q8_0/f16");
    ``k_dtype`` and ``v_dtype`` are each part's own (None given: ``kv_dtype``). ``details`` is
    the engine's own record; ``eviction``, ``shared_prefix`` and ``offload`` are what
    kvmem.estimate's strategies did to it (kvmem.strategies.records; None where not asked).
    """

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
    state_bytes_all_devices: int             # the recurrent state summed likewise (0: none)
    peak_bytes: int
    notes: tuple[str, ...] = ()
    details: Record = field(default_factory=IdealDetails, compare=False)    # the engine's own, by its names
    block_size: int = field(default=1, compare=False)          # tokens per block (page) the cache is cut in
    log_lines: tuple[str, ...] = field(default=(), compare=False)   # what the engine itself prints
    k_dtype: str | None = None
    v_dtype: str | None = None
    refusal: Refusal | None = None
    eviction: Record | None = None           # kvmem.strategies.records.EvictionApplied
    shared_prefix: Record | None = None      # kvmem.strategies.records.PrefixShared
    offload: Record | None = None            # kvmem.strategies.records.Offloaded

    def __post_init__(self):
        for name in ("k_dtype", "v_dtype"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, self.kv_dtype)

    @property
    def kv_bytes(self) -> int:
        """K + V bytes on one device (the largest pipeline stage)."""
        return self.k_bytes + self.v_bytes

    @property
    def total_bytes(self) -> int:
        """KV plus fixed recurrent state on one device."""
        return self.kv_bytes + self.state_bytes

    @property
    def total_bytes_all_devices(self) -> int:
        """KV plus recurrent state over every device."""
        return self.kv_bytes_all_devices + self.state_bytes_all_devices

    @property
    def bytes_per_token(self) -> float:
        """KV bytes per cached token of the batch (one device)."""
        return self.kv_bytes / (self.tokens * self.batch)

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("block_size", "log_lines", "refusal")}   # block_size, log: in details too
        data["details"] = self.details.to_dict()
        for name in ("eviction", "shared_prefix", "offload"):
            data[name] = data[name].to_dict() if data[name] is not None else None
        data["per_layer"] = list(self.per_layer)
        data["notes"] = list(self.notes)
        data.update(self._refusal_dict(), kv_bytes=self.kv_bytes, total_bytes=self.total_bytes)
        return data


@dataclass(frozen=True)
class Capacity(EngineVerdict):
    """What a KV memory budget holds under one engine's rules.

    ``longest_request_tokens`` is the longest single request that fits (the input ``max_model_len``
    is the requested length; to_dict keeps a ``max_model_len`` key for the scripts that read it).
    """

    model: str
    engine: str
    kv_memory: int
    blocks: int
    tokens: int
    max_concurrency: float | None
    longest_request_tokens: int | None
    block_size: int = 1
    notes: tuple[str, ...] = ()
    details: Record = field(default_factory=IdealDetails, compare=False)
    log_lines: tuple[str, ...] = field(default=(), compare=False)   # what the engine itself prints
    k_dtype: str | None = None
    v_dtype: str | None = None
    refusal: Refusal | None = None

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("log_lines", "refusal")}
        data["max_model_len"] = self.longest_request_tokens     # the key it had (scripts read it)
        data["details"] = self.details.to_dict()                 # its log: details["log"] too
        data["notes"] = list(self.notes)
        data.update(self._refusal_dict())
        return data


def with_note(result, note: str, refusal: Refusal | None = None):
    """``result`` (an Estimate or a Capacity) with one more note, and ``refusal`` where given."""
    notes = result.notes if note in result.notes else result.notes + (note,)
    return replace(result, notes=notes, refusal=refusal or result.refusal)


def assemble(model: Model, engine: str, *, tokens: int, batch: int, kv_dtype: str, tp: int, pp: int,
             rows: list[tuple[int, int, int]], peak_extra: int = 0, notes=(), details=None,
             stages: list[range] | None = None, block_size: int = 1, log_lines=(), k_dtype: str | None = None,
             v_dtype: str | None = None) -> Estimate:
    """An Estimate from per-layer (K, V, state) bytes on one rank of each layer's stage.

    The reported device is the pipeline stage holding the most bytes (``stages``: the engine's
    own split, vLLM's ``pp_stages`` by default); other stages' layers show 0 in ``per_layer``.
    ``peak_extra`` is a transient above the steady KV; ``k_dtype``/``v_dtype`` where K and V
    differ (else both are ``kv_dtype``); ``details`` the engine's record (None: IdealDetails()).
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
    all_devices = tp * (sum(ks) + sum(vs))      # every rank of every stage holds its rows
    state_all_devices = tp * sum(ss)
    return Estimate(model=model.name, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype,
                    tp=tp, pp=pp, k_bytes=k, v_bytes=v, state_bytes=state, per_layer=per_layer,
                    kv_bytes_all_devices=all_devices, state_bytes_all_devices=state_all_devices,
                    peak_bytes=k + v + peak_extra,
                    notes=tuple(notes), details=details if details is not None else IdealDetails(),
                    block_size=block_size, log_lines=tuple(log_lines), k_dtype=k_dtype, v_dtype=v_dtype)
