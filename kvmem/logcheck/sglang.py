"""SGLang's startup lines, checked (srt/mem_cache/memory_pool.py; kvmem.engines.sglang).

    "KV Cache is allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB"  (or "KV size" for MLA)
    "KV Cache is allocated. K size: X GB, V size: Y GB."  (builds before about Feb 2025: #tokens from the
                                                           scheduler's "max_total_num_tokens=N")
    "Mamba Cache is allocated. max_mamba_cache_size: S, conv_state size: A GB, ssm_state size: B GB"
Given the #tokens (and the slots) the log states, kvmem's pools must print the same line: the
sizes follow from the settings alone (exact). A "dtype:" field dates the release (from 0.5.13).
Different K/V sizes mean other bytes per token: the KV dtype (--kv-cache-dtype), the heads per
rank (--tp-size) or the layers per rank (--pp-size) differ from those given.
"""

from __future__ import annotations

import re

from ..engines.sglang import mamba
from ..engines.sglang.pools import DEFAULTS, make_layout, pools as make_pools, state_parts_of
from ..model import LINEAR
from .base import LineCheck, logged_number, strip_prefix

# Each pattern starts with a literal and repeats only a character class a separator ends (linear in a line).
KV_LINE = re.compile(r"KV Cache is allocated\. (dtype: ([^\s,]+), )?#tokens: (\d+), ")
LEGACY_LINE = re.compile(r"KV Cache is allocated\. K size: [0-9.]+ GB, V size: [0-9.]+ GB\.")   # before ~Feb 2025
TOTAL = re.compile(r"max_total_num_tokens=(\d+)")
MAMBA_LINE = re.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+),")
_CAUSE = ("the K/V bytes per token differ: the KV dtype (--kv-cache-dtype), heads per rank (--tp-size) or "
          "layers per rank (--pp-size) differ from the ones given")


def read(lines: list[str]) -> dict:
    found, seen = {"kv": [], "mamba": None, "legacy": None, "total": None}, set()
    for n, line in enumerate(lines, 1):
        if m := KV_LINE.search(line):
            text = strip_prefix(line, "KV Cache is allocated")
            if text not in seen:                                     # every rank prints it: read it once
                seen.add(text)
                found["kv"].append((n, text, logged_number(m.group(3), n, line), m.group(1) is not None))
        elif found["legacy"] is None and LEGACY_LINE.search(line):
            found["legacy"] = (n, strip_prefix(line, "KV Cache is allocated"))
        elif found["total"] is None and (m := TOTAL.search(line)):
            found["total"] = logged_number(m.group(1), n, line)
        elif found["mamba"] is None and (m := MAMBA_LINE.search(line)):
            found["mamba"] = (n, strip_prefix(line, "Mamba Cache is allocated"), logged_number(m.group(1), n, line))
    return found


def check(model, found: dict, *, kv_dtype, tp: int, pp: int, **options) -> tuple[dict, list[LineCheck], list[str]]:
    settings, checks, notes = {}, [], []
    options.pop("max_model_len", None)
    if not found["kv"] and found["legacy"] and found["total"]:
        # the old line has no #tokens: the scheduler's "max_total_num_tokens=N" gives them
        n, text = found["legacy"]
        settings["tokens"] = [found["total"]]
        (pool,) = make_pools(model, num_tokens=found["total"], kv_dtype=kv_dtype, tp=tp, pp=pp,
                             **{k: v for k, v in options.items() if k != "version"})[-1:]
        expected = pool.log_line(legacy=True)
        ok = expected == text
        checks.append(LineCheck(n, text, "KV Cache is allocated", text, expected, ok, "" if ok else _CAUSE))
        return settings, checks, notes
    if not found["kv"]:
        return settings, checks, notes
    version = options.pop("version", None) or ("latest" if found["kv"][0][3] else "0.5.12")
    settings["dtype_in_log"] = found["kv"][0][3]
    tokens = [t for _, _, t, _ in found["kv"]]
    settings["tokens"] = tokens
    full, swa = (tokens[-1], tokens[0]) if len(tokens) > 1 else (tokens[0], None)
    made = make_pools(model, num_tokens=full, swa_num_tokens=swa, kv_dtype=kv_dtype, tp=tp, pp=pp, version=version,
                      **options)
    for (n, text, _, _), pool in zip(found["kv"], made, strict=False):
        expected = pool.log_line(version=version)
        ok = expected == text
        checks.append(LineCheck(n, text, "KV Cache is allocated", text, expected, ok, "" if ok else _CAUSE))
    if found["mamba"] is not None:
        n, text, slots = found["mamba"]
        settings["max_mamba_cache_size"] = slots
        layout = make_layout(model, kv_dtype=kv_dtype, tp=tp, **{**DEFAULTS, **options, "version": version})
        parts = [state_parts_of(model, layout, i, tp) for i, layer in enumerate(model.layers)
                 if layer.kind == LINEAR]
        conv, ssm = sum(c for c, _ in parts), sum(s for _, s in parts)
        pool = mamba.StatePool(slots=slots, conv_bytes=(slots + 1) * conv, ssm_bytes=(slots + 1) * ssm, rest_bytes=0,
                               per_request=conv + ssm)
        expected = pool.log_line().rstrip()
        ok = expected == text.rstrip()
        checks.append(LineCheck(n, text, "Mamba Cache is allocated", text, expected, ok, "" if ok else (
            "the state bytes per request differ: --mamba-ssm-dtype, the model dtype or tp differ from the ones given")))
    return settings, checks, notes
