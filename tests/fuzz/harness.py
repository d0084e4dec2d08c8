"""The fuzz suite's harness: run one call, classify what came back, count it.

Outcomes (counted in STATS, reported at the end of the run by tests/fuzz/conftest.py):
    ok        a result that passes its sanity check
    refused   a ValueError (ConfigError, SourceError) whose message names one of the fields
    unnamed   a ValueError whose message names none of them        -> the test fails
    crash     any other exception                                   -> the test fails
    nonsense  a result that fails its sanity check (negative, NaN, float bytes, K + V != KV) -> fails
    slow      a call over SLOW_SECONDS (counted, not failed: wall time depends on the machine);
              over HANG_SECONDS the test fails, as a gross hang
"""

from __future__ import annotations

import math
import time
from collections import Counter

SLOW_SECONDS = 2.0
HANG_SECONDS = 30.0
STATS: Counter = Counter()
SLOWEST: list[tuple[float, str]] = []


class Finding(AssertionError):
    """What the harness found wrong with one call."""


def _names_field(message: str, names) -> bool:
    low = message.lower()
    return any(name.lower() in low or name.lower().replace("_", " ") in low for name in names)


def call(label: str, fn, *, names, check=None):
    """Run ``fn()``; return its result, or None when it refused by name. Raise Finding otherwise."""
    started = time.perf_counter()
    try:
        result = fn()
    except ValueError as exc:
        _time(label, started)
        if not _names_field(str(exc), names):
            STATS["unnamed"] += 1
            raise Finding(f"{label}: refusal names none of {sorted(names)}: {exc}") from exc
        STATS["refused"] += 1
        return None
    except Exception as exc:  # noqa: BLE001 - the point is to catch everything
        _time(label, started)
        STATS["crash"] += 1
        raise Finding(f"{label}: crash {type(exc).__name__}: {exc}") from exc
    _time(label, started)
    if check is not None:
        problem = check(result)
        if problem:
            STATS["nonsense"] += 1
            raise Finding(f"{label}: nonsense: {problem}")
    STATS["ok"] += 1
    return result


def _time(label: str, started: float) -> None:
    seconds = time.perf_counter() - started
    STATS["calls"] += 1
    if seconds > SLOW_SECONDS:
        STATS["slow"] += 1
        SLOWEST.append((seconds, label))
        SLOWEST.sort(reverse=True)
        del SLOWEST[5:]
    if seconds > HANG_SECONDS:
        raise Finding(f"{label}: took {seconds:.1f} s (a hang)")


# ---------------------------------------------------------------------------- sanity checks

def _bytes(name: str, value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name} is {type(value).__name__} {value!r}, not an int"
    if value < 0:
        return f"{name} is negative: {value}"
    return None


def check_estimate(est) -> str | None:
    for name in ("k_bytes", "v_bytes", "state_bytes", "kv_bytes", "kv_bytes_all_devices", "peak_bytes"):
        problem = _bytes(name, getattr(est, name))
        if problem:
            return problem
    if est.kv_bytes != est.k_bytes + est.v_bytes:
        return f"kv_bytes {est.kv_bytes} != K {est.k_bytes} + V {est.v_bytes}"
    if est.kv_bytes_all_devices < est.kv_bytes:
        return f"kv_bytes_all_devices {est.kv_bytes_all_devices} < kv_bytes {est.kv_bytes}"
    if est.peak_bytes < est.kv_bytes:
        return f"peak_bytes {est.peak_bytes} < kv_bytes {est.kv_bytes}"
    if any(_bytes("per_layer", b) for b in est.per_layer):
        return f"per_layer has a bad entry: {est.per_layer[:8]}"
    padding = getattr(est.details, "padding_bytes", 0)  # vLLM: slots of padding layers, owned by no model layer
    if sum(est.per_layer) + padding < est.kv_bytes:
        return f"per_layer sums to {sum(est.per_layer)} (+ {padding} padding) < kv_bytes {est.kv_bytes}"
    return None


def check_capacity(cap) -> str | None:
    for name in ("kv_memory", "blocks", "tokens", "block_size"):
        problem = _bytes(name, getattr(cap, name))
        if problem:
            return problem
    if cap.max_concurrency is not None and not (math.isfinite(cap.max_concurrency) and cap.max_concurrency >= 0):
        return f"max_concurrency is {cap.max_concurrency!r}"
    if cap.longest_request_tokens is not None and _bytes("longest_request_tokens", cap.longest_request_tokens):
        return _bytes("longest_request_tokens", cap.longest_request_tokens)
    return None


def check_fit(result) -> str | None:
    for name in ("kv_memory_bytes", "max_batch", "max_context", "shortfall_bytes", "kv_bytes_per_sequence",
                 "breakdown_batch", "breakdown_context"):
        problem = _bytes(name, getattr(result, name))
        if problem:
            return problem
    if result.fits != (result.max_batch >= (result.batch or 1)):
        return f"fits={result.fits} but max_batch={result.max_batch} for batch {result.batch}"
    for name, value in result.breakdown.items():
        if name != "free" and _bytes(f"breakdown[{name!r}]", value):
            return _bytes(f"breakdown[{name!r}]", value)
    if result.decode_tokens_per_s is not None and not (math.isfinite(result.decode_tokens_per_s)
                                                       and result.decode_tokens_per_s > 0):
        return f"decode_tokens_per_s is {result.decode_tokens_per_s!r}"
    return None


def check_text(text) -> str | None:
    if not isinstance(text, str):
        return f"{type(text).__name__}, not text"
    if "nan" in text.lower().split() or "inf" in text.lower() or "nanB" in text:
        return f"text shows a non-number: {text!r}"
    return None


def check_positive_int(value) -> str | None:
    return _bytes("value", value) or (None if value >= 1 else f"value {value} < 1")
