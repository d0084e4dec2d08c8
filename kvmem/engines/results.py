"""The typed results every engine mode returns: Estimate (the bytes of one workload) and
Capacity (what a KV budget holds), and ``assemble``, which builds an Estimate from per-layer
(K, V, state) bytes on the device a report is about (the largest pipeline stage)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ..model import Model
from ..parallel import largest_stage, pp_stages
from ..records import Record

__all__ = ["Estimate", "Capacity", "with_note", "assemble"]


class EngineVerdict:
    """What the engine itself says of a result, read from its details: ``engine_refuses`` (why it would
    not start, or None) and ``engine_allows_with`` (the setting that starts it anyway, e.g.
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", or None)."""

    @property
    def engine_refuses(self) -> str | None:
        return self.details.get("engine_refuses")

    @property
    def engine_allows_with(self) -> str | None:
        return self.details.get("engine_allows_with")


@dataclass(frozen=True)
class Estimate(EngineVerdict):
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
class Capacity(EngineVerdict):
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

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["log_lines"]                           # in details["log"] too
        if isinstance(self.details, Record):
            data["details"] = self.details.to_dict()
        data["notes"] = list(self.notes)
        return data


def with_note(result, note: str, details: dict):
    """``result`` (an Estimate or a Capacity) with one more note and details merged in."""
    notes = result.notes if note in result.notes else result.notes + (note,)
    return replace(result, notes=notes, details={**result.details, **details})


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
