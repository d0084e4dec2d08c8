"""kvmem.capacity: what one device's KV budget holds under an engine's rules (its own
EngineSpec.capacity), after the checks every engine shares (family, parallelism, positions)."""

from __future__ import annotations

from ..catalog import as_model
from ..parallel import check_parallel
from ..units import parse_bytes, parse_tokens
from . import ENGINES, check_family, engine_spec, with_defaults
from .base import check_query_heads
from .positions import past_positions
from .results import Capacity, Refusal, with_note

__all__ = ["capacity"]


def capacity(model, *, engine: str = "vllm", kv_memory, kv_dtype="auto", tp: int = 1, pp: int = 1,
             max_model_len=None, **options) -> Capacity:
    """What ``kv_memory`` bytes (one device's KV budget) hold under ``engine``'s rules."""
    spec = engine_spec(engine)
    if spec.capacity is None:
        raise ValueError(f"engine {spec.name!r} has no capacity rule; engines with one: "
                         + ", ".join(name for name, s in ENGINES.items() if s.capacity))
    model = as_model(model)
    check_family(spec, model)
    kv_memory = parse_bytes(kv_memory)
    tp, pp = check_parallel(tp, pp)
    max_model_len = parse_tokens(max_model_len) if max_model_len is not None else None
    result = spec.capacity(model, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp,
                           max_model_len=max_model_len, **with_defaults(spec, options))
    check_query_heads(spec, model, tp)
    past = past_positions(model, spec, max_model_len) if max_model_len else None
    if past:
        note, refusal = past
        setting = (spec.positions.allow_with or "").partition("=")[0] if spec.positions else ""
        own = [n for n in result.notes if setting and setting in n]
        if own:                          # the engine's own refusal already says it: that note is the one
            note = own[0]
            refusal = Refusal(own[0], refusal.allow_with if refusal else None)
        result = with_note(result, note, refusal)
    return result
