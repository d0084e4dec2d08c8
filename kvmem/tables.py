"""Sweeps over context, batch, models and formats -> pandas DataFrames (for tables and charts).

Every number comes from kvmem.estimate; this module only arranges them in rows.
"""

from __future__ import annotations

import pandas as pd

from .engines import estimate
from .units import format_bytes

__all__ = ["context_points", "context_sweep", "estimate_summary", "per_layer_frame", "compare_frame"]

GIB = 2**30


def context_points(max_tokens: int, *, start: int = 256) -> list[int]:
    """Powers of two from ``start`` up to ``max_tokens``, and ``max_tokens`` itself."""
    points = []
    tokens = start
    while tokens < max_tokens:
        points.append(tokens)
        tokens *= 2
    points.append(max_tokens)
    return points


def context_sweep(model, *, contexts, batch: int = 1, kv_dtype="auto", engine: str = "ideal",
                  tp: int = 1, pp: int = 1, weights_bytes: int = 0, **options) -> pd.DataFrame:
    """One row per context length: KV, K, V and state bytes on one device (+ weights), and GiB."""
    rows = []
    for tokens in contexts:
        result = estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp,
                          **options)
        rows.append({"tokens": tokens, "batch": batch, "kv_bytes": result.kv_bytes, "k_bytes": result.k_bytes,
                     "v_bytes": result.v_bytes, "state_bytes": result.state_bytes,
                     "total_bytes": result.total_bytes, "weights_bytes": weights_bytes,
                     "device_bytes": weights_bytes + result.total_bytes,
                     "kv_gib": result.kv_bytes / GIB, "total_gib": result.total_bytes / GIB})
    return pd.DataFrame(rows)


def per_layer_frame(model, result) -> pd.DataFrame:
    """One row per layer: index, attention kind, bytes on the reported device."""
    return pd.DataFrame({"layer": range(model.num_layers), "kind": [layer.kind for layer in model.layers],
                         "bytes": list(result.per_layer)})


def compare_frame(rows) -> pd.DataFrame:
    """Side-by-side estimates: rows of (label, Estimate) -> bytes per token, totals, GiB."""
    data = []
    for label, result in rows:
        data.append({"label": label, "model": result.model, "engine": result.engine, "kv_dtype": result.kv_dtype,
                     "tokens": result.tokens, "batch": result.batch, "kv_bytes": result.kv_bytes,
                     "state_bytes": result.state_bytes, "total_bytes": result.total_bytes,
                     "bytes_per_token": result.kv_bytes / (result.tokens * result.batch),
                     "total_gib": result.total_bytes / GIB})
    return pd.DataFrame(data)


def estimate_summary(result) -> dict:
    """Headline numbers of an Estimate: totals, per token and per sequence, in B, GiB and GB."""
    per_sequence = result.total_bytes // result.batch
    per_token = result.kv_bytes / (result.tokens * result.batch)
    return {
        "total_bytes": result.total_bytes,
        "total_gib": format_bytes(result.total_bytes),
        "total_gb": format_bytes(result.total_bytes, binary=False),
        "kv_bytes": result.kv_bytes,
        "state_bytes": result.state_bytes,
        "per_token_bytes": per_token,
        "per_sequence_bytes": per_sequence,
        "per_sequence_gib": format_bytes(per_sequence),
        "per_sequence_gb": format_bytes(per_sequence, binary=False),
    }
