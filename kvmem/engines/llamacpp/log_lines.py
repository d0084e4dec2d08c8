"""The lines llama.cpp prints for its caches, in each build's own format (logs.py reads them from a log)."""

from __future__ import annotations

import datetime

from ..results import Estimate
from .settings import CURRENT, PR_11110, PR_12181, PR_12799, PR_13194, PR_13660, PR_14363, PR_15040, PR_15467, mib

# Log format eras (each from its PR's squash merge, settings.PR_<N>; log_lines(style=...) pins one):
#   "kv_self"          "<prefix>: KV self size  = ..., K (t): ..., V (t): ..."; prefix llama_new_context_with_model,
#                      llama_init_from_model from 2025-01-12 (build 4463, PR #11110), llama_context from 2025-03-13
#                      (build 4881, PR #12181),
#                      llama_kv_cache_unified from 2025-05-02 (build 5262, PR #12799: src/llama-kv-cache.cpp#L129 at
#                      3bf785f3e)
#   "unified_layers"   2025-05-20 (build 5429, PR #13194): "llama_kv_cache_unified: size = ... (%6d cells, %3d layers),
#                      K ..." (src/llama-kv-cache.cpp#L132 at e298d2fbd), to build 5440
#   "unified"          2025-05-21 (build 5441, PR #13660): "llama_kv_cache_unified: size = ... (%6u cells, %3d layers,
#                      %2u seqs)" (src/llama-kv-cache.cpp#L131 at cdf94a180); builds: kvmem/data/llamacpp_builds.json
#   "unified_streams"  2025-07-16 (PR #14363): "... %2u/%2u seqs"
#   "unified_seqs"     2025-08-02 (build 6072, PR #15040): "... %2u/%u seqs"
#   "current"          2025-08-21 (PR #15467): "llama_kv_cache: size = ... %2u/%u seqs"
#                      (llama.cpp@0c1e57098 src/llama-kv-cache.cpp#L301-L303; the recurrent line
#                      src/llama-memory-recurrent.cpp#L133-L135)
# MiB = (float)bytes / 2^20 printed "%7.2f": float32, then round-half-even to 2 decimals (settings.printed_mib).
LOG_STYLES = ("kv_self", "unified_layers", "unified", "unified_streams", "unified_seqs", "current")
_STYLE_FROM = ((PR_13194, "unified_layers"), (PR_13660, "unified"), (PR_14363, "unified_streams"),
               (PR_15040, "unified_seqs"), (PR_15467, "current"))
_KV_SELF_PREFIX = ((PR_11110, "llama_init_from_model"), (PR_12181, "llama_context"),
                   (PR_12799, "llama_kv_cache_unified"))


def _style(build: str, style: str | None) -> str:
    if style is not None:
        if style not in LOG_STYLES:
            raise ValueError(f"style must be one of {', '.join(LOG_STYLES)}, got {style!r}")
        return style
    date = CURRENT if build == "current" else datetime.date.fromisoformat(build)
    chosen = "kv_self"
    for start, name in _STYLE_FROM:
        if date >= start:
            chosen = name
    return chosen


def log_lines(estimate: Estimate, style: str | None = None, prefix: str | None = None) -> list[str]:
    """The cache lines llama.cpp logs for this estimate (a llama.cpp Estimate), in its order.

    ``style`` pins a log format era (LOG_STYLES); by default it follows the estimate's build
    date. ``prefix`` sets the function name of a "kv_self" line.
    """
    d = estimate.details
    if estimate.engine != "llama.cpp" or not hasattr(d, "caches"):
        raise ValueError(f"log_lines needs a llama.cpp estimate, got engine {estimate.engine!r}")
    build: str = d.build    # type: ignore[attr-defined]  # a LlamacppDetails (entry.py, which imports this module)
    style = _style(build, style)
    if any(c.get("wrapper") == "dsv4" for c in d.caches):     # llama_kv_cache_dsv4 (dsv4.py)
        from .dsv4 import dsv4_log_lines
        return dsv4_log_lines(d.caches, mib)
    kv = [c for c in d.caches if c["cache"] != "recurrent"]
    lines = []
    if style == "kv_self" and kv:
        if prefix is None:
            date = CURRENT if build == "current" else datetime.date.fromisoformat(build)
            prefix = "llama_new_context_with_model"
            for start, name in _KV_SELF_PREFIX:
                prefix = name if date >= start else prefix
        k, v = sum(c["k_bytes"] for c in kv), sum(c["v_bytes"] for c in kv)
        lines.append(f"{prefix}: KV self size  = {mib(k + v):7.2f} MiB, K ({kv[0]['k_type']}): {mib(k):7.2f} MiB, "
                     f"V ({kv[0]['v_type']}): {mib(v):7.2f} MiB")
    elif kv:
        name = "llama_kv_cache" if style == "current" else "llama_kv_cache_unified"
        wrapper = next((c.get("wrapper", "dsa") for c in kv if c["cache"] == "kv_idx"), None)
        iswa = len(kv) > 1 and not wrapper
        for c in kv:
            if wrapper:   # src/llama-kv-cache-dsa.cpp L30, L47 (msa L31, L44): a line before each of its caches
                label = "main" if c["cache"] == "kv" else "indexer"
                lines.append(f"llama_kv_cache_{wrapper}: creating {label} KV cache, size = {c['cells']} cells")
            elif iswa:
                label = "non-SWA" if c["cache"] == "kv" else "    SWA"
                lines.append(f"{name}_iswa: creating {label} KV cache, size = {c['cells']} cells")
            seqs = {"unified": f"{c['seqs']:2d}", "unified_streams": f"{c['seqs']:2d}/{c['streams']:2d}"}.get(
                style, f"{c['seqs']:2d}/{c['streams']}")
            seqs = "" if style == "unified_layers" else f", {seqs} seqs"
            lines.append(f"{name}: size = {mib(c['k_bytes'] + c['v_bytes']):7.2f} MiB ({c['cells']:6d} cells, "
                         f"{c['layers']:3d} layers{seqs}), K ({c['k_type']}): {mib(c['k_bytes']):7.2f} MiB, "
                         f"V ({c['v_type']}): {mib(c['v_bytes']):7.2f} MiB")
    for c in d.caches:
        if c["cache"] == "recurrent":
            rs = f" {c['rs_seq']:2d} rs_seq" if c["rs_seq"] is not None else ""
            lines.append(f"llama_memory_recurrent: size = {mib(c['r_bytes'] + c['s_bytes']):7.2f} MiB "
                         f"({c['cells']:6d} cells, {c['layers']:3d} layers, {c['seqs']:2d} seqs{rs}), "
                         f"R ({c['r_type']}): {mib(c['r_bytes']):7.2f} MiB, "
                         f"S ({c['s_type']}): {mib(c['s_bytes']):7.2f} MiB")
    return lines
