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


def quotable(entry: dict, budget: int | None = None) -> bool:
    """True when ``entry`` measures the cost of the strategy itself: its baseline is the full
    cache, and (for an eviction policy) it was measured at ``budget`` tokens."""
    if entry.get("baseline_is_full_cache") is False:
        return False
    return budget is None or entry.get("budget") in (None, budget)


def quality_text(keys, limit: int = 2, *, budget: int | None = None) -> str:
    """The cited measurements of ``keys`` that say what the strategy costs, at ``budget`` tokens
    where they are eviction results; "" when there is none."""
    parts = []
    for e in [e for e in quality_entries(keys) if quotable(e, budget)][:limit]:
        if e["delta"] is None:
            parts.append(f"{e['method']}: < {e['delta_bound']} {e['metric'].split(' ')[0]} change on "
                         f"{e['benchmark']} ({e['model']}) [{e['paper'].split(',')[0]}]")
            continue
        parts.append(f"{e['method']}: {e['benchmark']} {e['metric'].split(' ')[0]} {e['baseline']} -> {e['value']} "
                     f"({e['delta']:+g}) on {e['model']} [{e['source'].split(' ')[0]}]")
    return "; ".join(parts)


def no_quality_text(keys, budget: int) -> str:
    """Why no number is quoted for an eviction policy at ``budget``: what the cited sources measured instead."""
    others = quality_entries(keys)
    text = f"no measured quality cost against the full cache at a {budget:,}-token budget in kvmem/data/quality.json"
    full = sorted({e["budget"] for e in others if e.get("budget") and e.get("baseline_is_full_cache") is not False})
    if full:
        text += f" (cited measurements are at {', '.join(f'{b:,}' for b in full)} tokens: " \
                f"{others[0]['source'].split(' ')[0]})"
    elif others:
        text += (f" ({others[0]['paper'].split(',')[0]}'s published perplexities compare it with window attention "
                 "without sinks past the pre-training window, not with the full cache: "
                 f"{others[0]['source'].split(' ')[0]})")
    return text
