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
from typing import Callable

from ..dtypes import DType, dtype
from ..model import MLA, Layer, Model
from ..units import require_positive_int

MAX_PARALLEL = 65536  # tp and pp: far above any deployment (and any head or layer count kvmem reads)

__all__ = ["Estimate", "Capacity", "EngineSpec", "kv_heads_per_rank", "pp_stages", "largest_stage", "assemble",
           "resolve_dtypes", "cdiv"]


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
    details: dict = field(default_factory=dict, compare=False)

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
    def bytes_per_token(self) -> float:
        """KV bytes per cached token of the batch (one device)."""
        return self.kv_bytes / (self.tokens * self.batch)

    def to_dict(self) -> dict:
        data = asdict(self)
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

    @property
    def engine_refuses(self) -> str | None:
        """Why the engine itself would refuse this budget (it would not start), or None."""
        return self.details.get("engine_refuses")

    def to_dict(self) -> dict:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data


# What each engine does with a context past the model's max_position_embeddings:
# (what it does, the environment setting that lets it run anyway, or None when it runs).
_PAST_POSITIONS = {
    # vllm/config/model.py _get_and_verify_max_len: a ValueError unless the variable is set
    "vllm": ("vLLM refuses a max_model_len above it", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"),
    # python/sglang/srt/configs/model_config.py: a ValueError unless the variable is set
    "sglang": ("SGLang refuses a context_length above it", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"),
    # src/llama-context.cpp: "n_ctx_seq (N) > n_ctx_train (M) -- possible training context overflow";
    # tools/server caps each slot at n_ctx_train ("exceeds the training context ... - capping")
    "llama.cpp": ("llama.cpp warns \"possible training context overflow\" and runs; llama-server caps "
                  "each slot at the training context", None),
}


def past_positions(model: Model, engine: str, tokens: int) -> tuple[str, dict] | None:
    """(note, details) when ``tokens`` exceed the model's max_position_embeddings, else None.

    ``details`` carries ``engine_refuses`` (the engine would not start) and
    ``engine_allows_with`` (the setting that makes it start anyway) where the engine refuses.
    """
    limit = model.max_position_embeddings
    if not limit or tokens <= limit:
        return None
    family = "hf" if engine.startswith("hf-") else engine
    what, allow = _PAST_POSITIONS.get(family, (
        "transformers does not check it" if family == "hf" else f"kvmem does not know what {engine} does", None))
    note = (f"{tokens:,} tokens exceed the model's {limit:,} positions (max_position_embeddings): {what}"
            + (f" unless {allow}" if allow else "") + "; positions past the trained range may lose quality")
    details = {"engine_refuses": note, "engine_allows_with": allow} if allow else {}
    return note, details


def with_note(result, note: str, details: dict):
    """``result`` (an Estimate or a Capacity) with one more note and details merged in."""
    notes = result.notes if note in result.notes else result.notes + (note,)
    return replace(result, notes=notes, details={**result.details, **details})


@dataclass(frozen=True)
class EngineSpec:
    """An engine mode: its name, its options with defaults, and its rules."""

    name: str
    options: dict
    estimate: Callable
    capacity: Callable | None = None
    doc: str = ""


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
             stages: list[range] | None = None) -> Estimate:
    """An Estimate from per-layer (K, V, state) bytes on one rank of each layer's stage.

    The reported device is the pipeline stage holding the most bytes (``stages``: the engine's
    own split, vLLM's ``pp_stages`` by default); other stages' layers show 0 in ``per_layer``.
    ``peak_extra`` is a transient above the steady KV.
    """
    largest = largest_stage(rows, stages or pp_stages(len(rows), pp))
    per_layer = tuple(sum(rows[i]) if i in largest else 0 for i in range(len(rows)))
    k = sum(rows[i][0] for i in largest)
    v = sum(rows[i][1] for i in largest)
    state = sum(rows[i][2] for i in largest)
    all_devices = tp * sum(r[0] + r[1] for r in rows)
    return Estimate(model=model.name, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype,
                    tp=tp, pp=pp, k_bytes=k, v_bytes=v, state_bytes=state, per_layer=per_layer,
                    kv_bytes_all_devices=all_devices, peak_bytes=k + v + peak_extra,
                    notes=tuple(notes), details=details or {})


def layer_heads(layer: Layer, tp: int) -> int:
    """KV heads of ``layer`` on one rank (MLA: its single latent 'head', never split)."""
    if layer.kind == MLA or not layer.kv_heads:
        return 1
    return kv_heads_per_rank(layer.kv_heads, tp)


def state_share(elements: int, heads: int, tp: int) -> int:
    """A recurrent state's elements on one rank: split over its heads by tp."""
    if tp > 1 and heads % tp:
        raise ValueError(f"tp={tp} must divide the {heads} recurrent-state heads")
    return elements // tp if tp > 1 else elements


def finite_or_none(x: float) -> float | None:
    return None if math.isinf(x) else x
