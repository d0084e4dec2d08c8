"""The cited quality measurements of kvmem/data/quality.json, quoted beside a strategy's cost."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=1)
def quality_results() -> tuple[dict, ...]:
    """The cited quality measurements of kvmem/data/quality.json."""
    data = json.loads(resources.files("kvmem").joinpath("data/quality.json").read_text(encoding="utf-8"))
    return tuple(data["entries"])


def quality_entries(keys) -> list[dict]:
    keys = set(keys)
    return [e for e in quality_results() if keys & set(e["applies_to"])]


def quality_text(keys, limit: int = 2) -> str:
    parts = []
    for e in quality_entries(keys)[:limit]:
        if e["delta"] is None:
            parts.append(f"{e['method']}: < {e['delta_bound']} {e['metric'].split(' ')[0]} change on "
                         f"{e['benchmark']} ({e['model']}) [{e['paper'].split(',')[0]}]")
            continue
        parts.append(f"{e['method']}: {e['benchmark']} {e['metric'].split(' ')[0]} {e['baseline']} -> {e['value']} "
                     f"({e['delta']:+g}) on {e['model']} [{e['source'].split(' ')[0]}]")
    return "; ".join(parts)
