"""estimate() and capacity(): one entry point, dispatched to each engine's own rules.

Each engine mode lives in its own module with its rules and their sources in its
docstring; this module only checks the common inputs and the options each mode takes.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..catalog import as_model
from ..units import MAX_COUNT, parse_bytes, parse_tokens, require_positive_int
from .base import Capacity, EngineSpec, Estimate, check_parallel, past_positions, with_note

__all__ = ["estimate", "capacity", "list_engines", "Estimate", "Capacity", "ENGINES"]

# Engine modules register themselves: every module in this package with a SPECS tuple.
# Listed in this order first; a new module needs no edit here.
_ORDER = ("ideal", "hf-dynamic", "hf-static", "hf-quantized", "vllm", "sglang", "llama.cpp", "trtllm")


def _discover() -> dict[str, EngineSpec]:
    specs = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        specs.extend(getattr(module, "SPECS", ()))
    rank = {name: i for i, name in enumerate(_ORDER)}
    return {spec.name: spec for spec in sorted(specs, key=lambda s: (rank.get(s.name, len(rank)), s.name))}


ENGINES: dict[str, EngineSpec] = _discover()
_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "tensorrt-llm": "trtllm",
            "trt-llm": "trtllm", "hf": "hf-dynamic", "transformers": "hf-dynamic"}


def list_engines() -> list[str]:
    """The engine modes estimate() accepts."""
    return list(ENGINES)


def _spec(engine: str) -> EngineSpec:
    key = str(engine).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
    return ENGINES[key]


def _check_query_heads(spec: EngineSpec, model, tp: int) -> None:
    """tp must divide the query heads: SGLang asserts ``total_num_heads % attn_tp_size == 0``
    (python/sglang/srt/models/llama.py and the other model files), TensorRT-LLM
    ``num_heads % tp_size == 0`` (tensorrt_llm/_torch/modules/attention.py); vLLM refuses it
    in its own words (kvmem/engines/vllm.py), hf-* and llama.cpp take no tp at all."""
    if tp > 1 and spec.name != "vllm" and model.num_attention_heads % tp:
        raise ValueError(f"tp={tp} must divide the model's {model.num_attention_heads} query heads "
                         "(num_attention_heads), as SGLang and TensorRT-LLM require")


def _options(spec: EngineSpec, options: dict) -> dict:
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        valid = ", ".join(sorted(spec.options)) or "none"
        raise ValueError(f"engine {spec.name!r} has no option {unknown[0]!r}; its options: {valid}")
    return {**spec.options, **options}


def estimate(model, *, engine: str = "ideal", tokens, batch: int = 1, kv_dtype="auto", tp: int = 1,
             pp: int = 1, eviction=None, shared_prefix=0, offload=0.0, **options) -> Estimate:
    """Cache bytes for ``batch`` sequences of ``tokens`` tokens under ``engine``'s rules.

    ``eviction``, ``shared_prefix`` and ``offload`` are applied on top of any engine's
    estimate by kvmem.strategies (see its docstring for the rules).
    """
    spec = _spec(engine)
    model = as_model(model)
    tokens = parse_tokens(tokens)
    batch = require_positive_int("batch", batch, MAX_COUNT)
    tp, pp = check_parallel(tp, pp)
    options = _options(spec, options)
    result = spec.estimate(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    _check_query_heads(spec, model, tp)  # after the engine's own KV-head check, which names its rule
    past = past_positions(model, spec.name, tokens)
    if past:
        result = with_note(result, *past)
    if eviction is None and not shared_prefix and not offload:
        return result
    from ..strategies import apply_strategies
    rerun = lambda t, b: spec.estimate(model, tokens=t, batch=b, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)  # noqa: E731
    return apply_strategies(result, model=model, rerun=rerun, engine=spec.name, options=options,
                            eviction=eviction, shared_prefix=shared_prefix, offload=offload)


def capacity(model, *, engine: str = "vllm", kv_memory, kv_dtype="auto", tp: int = 1, pp: int = 1,
             max_model_len=None, **options) -> Capacity:
    """What ``kv_memory`` bytes (one device's KV budget) hold under ``engine``'s rules."""
    spec = _spec(engine)
    if spec.capacity is None:
        raise ValueError(f"engine {spec.name!r} has no capacity rule; engines with one: "
                         + ", ".join(name for name, s in ENGINES.items() if s.capacity))
    model = as_model(model)
    kv_memory = parse_bytes(kv_memory)
    tp, pp = check_parallel(tp, pp)
    max_model_len = parse_tokens(max_model_len) if max_model_len is not None else None
    result = spec.capacity(model, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp,
                           max_model_len=max_model_len, **_options(spec, options))
    _check_query_heads(spec, model, tp)
    past = past_positions(model, spec.name, max_model_len) if max_model_len else None
    if past:
        note, details = past
        if spec.name == "vllm" and any("VLLM_ALLOW_LONG_MAX_MODEL_LEN" in n for n in result.notes):
            note = next(n for n in result.notes if "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in n)
            details = {**details, "engine_refuses": note}
        result = with_note(result, note, details)
    return result
