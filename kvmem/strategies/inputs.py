"""Checks of the strategies' own inputs."""

from __future__ import annotations

__all__ = ["count"]


def count(name: str, value, *, minimum: int = 0) -> int:
    """``value`` as a count of at least ``minimum`` (an int, not a bool), else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return value
