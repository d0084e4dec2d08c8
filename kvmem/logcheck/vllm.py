"""vLLM's startup lines, checked (V1: vllm/v1/worker/gpu_worker.py, vllm/v1/core/kv_cache_utils.py).

    "Available KV cache memory: X GiB"    the budget (printed to 0.01 GiB: a range of +-0.005 GiB)
    "GPU KV cache size: N tokens"          (from v0.8; one line with the next from PR #50462, 2026-07-30)
    "Maximum concurrency for L tokens per request: C x"   L is max_model_len
V0 (vllm/worker/worker.py): "Memory profiling results: ... kv_cache_size=X GiB ..." and
    "# GPU blocks: B, # CPU blocks: M" (the blocks checked over the budget's range, version "v0")
With the budget and N, kvmem's capacity over the budget's range must hold N tokens. A budget below
the plan's (``expected_kv_memory``) is the activation peak, non-torch memory or CUDA graphs above
kvmem's estimate: that part is estimated, not exact. Fewer tokens than kvmem finds for the memory
mean a setting differs (KV dtype, block size, tp, a draft model, the hybrid manager); more mean a
smaller KV format or fewer layers per rank than given.
"""

from __future__ import annotations

import re

from ..engines import capacity
from ..units import format_bytes
from .base import GIB, LineCheck, logged_number, strip_prefix

# Each pattern starts with a literal and repeats only a character class a separator ends: one pass
# over a line, however long (no ".*" between two parts, no nested repetition).
AVAILABLE = re.compile(r"Available KV cache memory: ([0-9.]+) GiB")
TOKENS = re.compile(r"(?:GPU )?KV cache size: ([0-9,]+) tokens")
CONCURRENCY = re.compile(r"Maximum concurrency for ([0-9,]+) tokens per request: ([0-9.]+)x")
V0_MARKER = "Memory profiling results: "
V0_MEMORY = re.compile(r"kv_cache_size=([0-9.]+)GiB")      # searched after the first V0_MARKER only
V0_BLOCKS = re.compile(r"(?:# )?GPU blocks: (\d+)")
HALF_CENT = GIB // 200            # the printed GiB's rounding: 0.005 GiB


def read(lines: list[str]) -> dict:
    """The first of each line kvmem reads, with its numbers (a number no server prints: refused naming the line)."""
    found = {}
    for n, line in enumerate(lines, 1):
        if "available" not in found and (m := AVAILABLE.search(line)):
            found["available"] = (n, strip_prefix(line, "Available"), logged_number(m.group(1), n, line, float))
        if "tokens" not in found and (m := TOKENS.search(line)):
            found["tokens"] = (n, strip_prefix(line, "GPU KV" if "GPU KV" in line else "KV cache"),
                               logged_number(m.group(1), n, line))
        if "v0_memory" not in found and (at := line.find(V0_MARKER)) >= 0 and \
                (m := V0_MEMORY.search(line, at + len(V0_MARKER))):
            found["v0_memory"] = (n, strip_prefix(line, "Memory profiling"), logged_number(m.group(1), n, line, float))
        if "v0_blocks" not in found and (m := V0_BLOCKS.search(line)):
            found["v0_blocks"] = (n, strip_prefix(line, m.group(0)[:3]), logged_number(m.group(1), n, line))
        if "concurrency" not in found and (m := CONCURRENCY.search(line)):
            found["concurrency"] = (n, strip_prefix(line, "Maximum"), logged_number(m.group(1), n, line),
                                    logged_number(m.group(2), n, line, float))
    return found


def check(model, found: dict, *, kv_dtype, tp: int, pp: int, expected_kv_memory: int | None = None,
          **options) -> tuple[dict, list[LineCheck], list[str]]:
    settings, checks, notes = {}, [], []
    length = found["concurrency"][2] if "concurrency" in found else options.pop("max_model_len", None)
    options.pop("max_model_len", None)
    if length:
        settings["max_model_len"] = length
    if "available" in found:
        n, text, gib = found["available"]
        settings["available_kv_cache_memory_gib"] = gib
        if expected_kv_memory is not None:
            logged = round(gib * GIB)
            ok = abs(logged - expected_kv_memory) <= HALF_CENT
            diff = logged - expected_kv_memory
            cause = "" if ok else (
                f"Available KV cache memory is {format_bytes(abs(diff))} {'below' if diff < 0 else 'above'} the "
                "plan: the profile run's peak (activations, CUDA graphs, non-torch memory) was "
                f"{'higher' if diff < 0 else 'lower'} than kvmem estimated, or the weights differ")
            checks.append(LineCheck(n, text, "Available KV cache memory", f"{gib:.2f} GiB",
                                    f"{expected_kv_memory / GIB:.2f} GiB (the plan)", ok, cause))
    if "tokens" in found and "available" in found and length:
        n, text, tokens = found["tokens"]
        gib = found["available"][2]
        settings["gpu_kv_cache_tokens"] = tokens
        lo, hi, shown = _bracket(gib, "tokens", model, kv_dtype, tp, pp, length, options)
        ok = lo <= tokens <= hi
        cause = "" if ok else (
            "fewer tokens than kvmem finds for this memory: a setting differs from the ones given (KV dtype, "
            "block size, tp/pp, a draft model, the hybrid KV cache manager, prefix caching for a Mamba hybrid), "
            "or the memory printed is another rank's" if tokens < lo else
            "more tokens than kvmem finds for this memory: a smaller KV format or fewer layers per rank than given "
            "(KV dtype, tp/pp), or a window kvmem counts at full length")
        checks.append(LineCheck(n, text, "GPU KV cache size", f"{tokens:,} tokens", f"{shown} tokens", ok, cause))
    elif "v0_blocks" in found and "v0_memory" in found and length:
        n, text, blocks = found["v0_blocks"]
        gib = found["v0_memory"][2]
        settings.update(kv_cache_size_gib=gib, num_gpu_blocks=blocks)
        lo, hi, shown = _bracket(gib, "blocks", model, kv_dtype, tp, pp, length, {**options, "version": "v0"})
        ok = lo <= blocks <= hi
        cause = "" if ok else (
            "fewer blocks than kvmem finds for this memory: a setting differs (KV dtype, block size, tp/pp)"
            if blocks < lo else "more blocks than kvmem finds: a smaller KV format or fewer layers per rank than given")
        checks.append(LineCheck(n, text, "# GPU blocks (v0)", f"{blocks:,}", shown, ok, cause))
    elif "tokens" in found:
        notes.append("GPU KV cache size is logged without 'Available KV cache memory' (or max_model_len): "
                     "nothing to compare it with")
    return settings, checks, notes


def _bracket(gib: float, what: str, model, kv_dtype, tp: int, pp: int, length: int, options: dict):
    """(low, high, shown) of kvmem's ``what`` (tokens or blocks) for the memory a log prints to two
    decimals of a GiB: every value that rounds to it lies within half a hundredth either side."""
    centre = round(gib * GIB)
    lo, hi = (getattr(capacity(model, engine="vllm", kv_memory=m, kv_dtype=kv_dtype, tp=tp, pp=pp,
                                max_model_len=length, **options), what)
              for m in (centre - HALF_CENT, centre + HALF_CENT))
    return lo, hi, f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
