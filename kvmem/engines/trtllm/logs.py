"""TensorRT-LLM's KV-cache lines, checked (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp,
tensorrt_llm/_torch/pyexecutor/resource_manager.py; kvmem.engines.trtllm).

    "Memory usage when calculating max tokens in paged kv cache: total: T GiB, available: A GiB"
    "Number of blocks in KV cache primary pool: N"       checked over A +- 0.005 GiB x
                                                         free_gpu_memory_fraction (0.9 unless given)
    "[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N)."
                                                         X checked as N x kvmem's bytes per token (exact),
                                                         every such line (the PyTorch backend prints two)
    "... fraction is set F, kv size is B."               B: the bytes per token it sizes with (exact)
Fewer blocks, or other bytes for the same tokens, mean another KV dtype, tokens_per_block, tp/pp or
fraction than given.

Settings, read from the log (``printed``): "Number of tokens per block: N." (kvCacheManager.cpp) and
"Both free_gpu_memory_fraction and max_tokens are set (to F and M, ...)" (resource_manager.py).
"""

from __future__ import annotations

import re

from ...logcheck.base import GIB, LineCheck, logged_number, strip_prefix
from ...logcheck.printed import after
from ...sources.bounded import quote
from .. import capacity
from ..serving import LogReader
from .cache import bytes_per_token

AVAILABLE = re.compile(r"calculating max tokens in paged kv cache: +total: *([0-9.]+) *GiB, +available: *([0-9.]+) "
                       r"*GiB")
BLOCKS = re.compile(r"Number of blocks in KV cache primary pool: (\d+)")
ALLOCATED = re.compile(r"Allocated +([0-9.]+) *GiB for max tokens in paged KV cache *\((\d+)\)")
USING = re.compile(r"Using (\d+) tokens in paged KV cache")   # v0.5: no memory beside it
KV_SIZE = re.compile(r"kv size is +(\d+)")                    # PyTorch backend: the bytes per token it sizes with
HALF_CENT = GIB // 200
_CAUSE = "a setting differs from the ones given: the KV dtype, tokens_per_block, tp/pp or free_gpu_memory_fraction"


PER_BLOCK = "Number of tokens per block: "
FRACTION = "free_gpu_memory_fraction and max_tokens are set (to "


def printed(lines: list[str]) -> dict:
    """The settings the log states: kvmem name -> (value, line number); the first of each wins."""
    found = {}
    for n, line in enumerate(lines, 1):
        if "tokens_per_block" not in found and (text := after(line, PER_BLOCK, ".")) is not None and text.isdigit():
            found["tokens_per_block"] = (logged_number(text, n, line), n)
        if "free_gpu_memory_fraction" not in found and (text := after(line, FRACTION, " and")) is not None:
            found["free_gpu_memory_fraction"] = (logged_number(text, n, line, float), n)
    return found


def read(lines: list[str]) -> dict:
    found: dict = {}
    for n, line in enumerate(lines, 1):
        for name, pattern, marker in (("available", AVAILABLE, "Memory usage"), ("blocks", BLOCKS, "Number of"),
                                      ("allocated", ALLOCATED, "Allocated"), ("using", USING, "Using")):
            if (name not in found or name == "allocated") and (m := pattern.search(line)):
                kinds = {"available": (float, float), "allocated": (float, int)}.get(name, (int,))
                numbers = tuple(logged_number(text, n, line, kind) for text, kind in zip(m.groups(), kinds,
                                                                                          strict=True))
                row = (n, strip_prefix(line, marker), m, numbers)
                if name == "allocated":         # the PyTorch backend sizes twice (a small pool, then the real one)
                    if all(r[1] != row[1] for r in found.get("allocated", [])):
                        found.setdefault("allocated", []).append(row)
                else:
                    found[name] = row
        if "kv_size" not in found and (m := KV_SIZE.search(line)):
            found["kv_size"] = (n, strip_prefix(line, "Peak memory" if "Peak memory" in line else "kv size"),
                                logged_number(m.group(1), n, line))
    return found


def check(model, found: dict, *, kv_dtype, tp: int, pp: int, info: dict | None = None,
          **options) -> tuple[dict, list[LineCheck], list[str]]:
    del info                                   # every setting TRT-LLM's lines depend on is an option
    settings: dict
    settings, checks, notes = {}, [], []
    options.pop("max_model_len", None)
    fraction = _fraction(options.pop("free_gpu_memory_fraction", 0.9))
    if "available" in found and "blocks" in found:
        gib = found["available"][3][1]
        n, text, _, (blocks,) = found["blocks"]
        settings.update(available_gib=gib, blocks=blocks)
        # these two lines are the C++ runtime's (0.x TRT engines), whose calculateMaxNumBlocks rounds blocks up
        # (issue 2268's 631 blocks, docs/research/engine_logs_serving.json): "ceil" unless block_rounding is given
        cpp = {"block_rounding": "ceil", **options}
        lo, hi = (capacity(model, engine="trtllm", kv_memory=int((gib * GIB + d) * fraction), kv_dtype=kv_dtype,
                            tp=tp, pp=pp, **cpp).blocks for d in (-HALF_CENT, HALF_CENT))
        ok = lo <= blocks <= hi
        checks.append(LineCheck(n, text, "KV cache primary pool blocks", f"{blocks:,}",
                                f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}", ok, "" if ok else _CAUSE))
    per_block = options.get("tokens_per_block", 32)
    if "kv_size" in found:
        n, text, logged = found["kv_size"]
        ours = bytes_per_token(model, kv_dtype=kv_dtype, tp=tp, pp=pp, tokens_per_block=per_block)
        checks.append(LineCheck(n, text, "kv size (bytes per token)", f"{logged:,}", f"{ours:,}", logged == ours,
                                "" if logged == ours else _CAUSE))
    for n, text, m, (gib, tokens) in found.get("allocated", []):
        settings.setdefault("allocated_tokens", []).append(tokens)
        per_token = bytes_per_token(model, kv_dtype=kv_dtype, tp=tp, pp=pp, tokens_per_block=per_block, allocated=True)
        ours = f"{float(tokens * per_token) / GIB:.2f} GiB"
        ok = ours == f"{gib:.2f} GiB"
        checks.append(LineCheck(n, text, "Allocated for max tokens", f"{m.group(1)} GiB", ours, ok,
                                "" if ok else _CAUSE))
    if "using" in found:
        settings["tokens"] = found["using"][3][0]
    if not checks and found:
        notes.append("TRT-LLM lines without the memory they were sized from: nothing to compare them with")
    return settings, checks, notes


def _fraction(value) -> float:
    """free_gpu_memory_fraction as given (a number in (0, 1]), refused by name otherwise."""
    try:
        fraction = float(value)
    except (TypeError, ValueError, OverflowError):
        fraction = float("nan")
    if isinstance(value, bool) or not 0 < fraction <= 1:
        raise ValueError(f"free_gpu_memory_fraction must be a number in (0, 1], got {quote(value)}")
    return fraction


def claims(found: dict) -> bool:
    return bool(found)


# The launch command above a log (kvmem.logcheck.command): trtllm-serve's options
RUNS = ("trtllm-serve ",)
COMMAND_FLAGS = {"--tp_size": "tp", "--pp_size": "pp",
                 "--kv_cache_free_gpu_memory_fraction": "free_gpu_memory_fraction"}
READER = LogReader(read, claims, printed, check, "TRT-LLM's paged KV cache lines",
                   check_options=("free_gpu_memory_fraction",), runs=RUNS, command_flags=COMMAND_FLAGS,
                   positional_model=True)
