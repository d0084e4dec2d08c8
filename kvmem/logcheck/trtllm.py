"""TensorRT-LLM's KV-cache lines, checked (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp,
tensorrt_llm/_torch/pyexecutor/resource_manager.py; kvmem.engines.trtllm).

    "Memory usage when calculating max tokens in paged kv cache: total: T GiB, available: A GiB"
    "Number of blocks in KV cache primary pool: N"       checked over A +- 0.005 GiB x
                                                         free_gpu_memory_fraction (0.9 unless given)
    "[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N)."
                                                         X checked as N x kvmem's bytes per token (exact)
Fewer blocks, or other bytes for the same tokens, mean another KV dtype, tokens_per_block, tp/pp or
fraction than given.
"""

from __future__ import annotations

import re

from ..engines import capacity
from ..engines.trtllm import bytes_per_token
from .base import GIB, LineCheck, strip_prefix

AVAILABLE = re.compile(r"calculating max tokens in paged kv cache: total: ([0-9.]+) GiB, available: ([0-9.]+) GiB")
BLOCKS = re.compile(r"Number of blocks in KV cache primary pool: (\d+)")
ALLOCATED = re.compile(r"Allocated ([0-9.]+) GiB for max tokens in paged KV cache \((\d+)\)")
USING = re.compile(r"Using (\d+) tokens in paged KV cache")   # v0.5: no memory beside it
HALF_CENT = GIB // 200
_CAUSE = "a setting differs from the ones given: the KV dtype, tokens_per_block, tp/pp or free_gpu_memory_fraction"


def read(lines: list[str]) -> dict:
    found = {}
    for n, line in enumerate(lines, 1):
        for name, pattern, marker in (("available", AVAILABLE, "Memory usage"), ("blocks", BLOCKS, "Number of"),
                                      ("allocated", ALLOCATED, "Allocated"), ("using", USING, "Using")):
            if (m := pattern.search(line)) and name not in found:
                found[name] = (n, strip_prefix(line, marker), m)
    return found


def check(model, found: dict, *, kv_dtype, tp: int, pp: int, **options) -> tuple[dict, list[LineCheck], list[str]]:
    settings, checks, notes = {}, [], []
    options.pop("max_model_len", None)
    fraction = float(options.pop("free_gpu_memory_fraction", 0.9))
    if "available" in found and "blocks" in found:
        gib = float(found["available"][2].group(2))
        n, text, m = found["blocks"]
        blocks = int(m.group(1))
        settings.update(available_gib=gib, blocks=blocks)
        lo, hi = (capacity(model, engine="trtllm", kv_memory=int((gib * GIB + d) * fraction), kv_dtype=kv_dtype,
                            tp=tp, pp=pp, **options).blocks for d in (-HALF_CENT, HALF_CENT))
        ok = lo <= blocks <= hi
        checks.append(LineCheck(n, text, "KV cache primary pool blocks", f"{blocks:,}",
                                f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}", ok, "" if ok else _CAUSE))
    if "allocated" in found:
        n, text, m = found["allocated"]
        tokens = int(m.group(2))
        settings["allocated_tokens"] = tokens
        per_token = bytes_per_token(model, kv_dtype=kv_dtype, tp=tp, pp=pp,
                                    tokens_per_block=options.get("tokens_per_block", 32), allocated=True)
        ours = f"{float(tokens * per_token) / GIB:.2f} GiB"
        ok = ours == f"{float(m.group(1)):.2f} GiB"
        checks.append(LineCheck(n, text, "Allocated for max tokens", f"{m.group(1)} GiB", ours, ok,
                                "" if ok else _CAUSE))
    if "using" in found:
        settings["tokens"] = int(found["using"][2].group(1))
    if not checks and found:
        notes.append("TRT-LLM lines without the memory they were sized from: nothing to compare them with")
    return settings, checks, notes
