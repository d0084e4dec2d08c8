"""Checks of the strategies' own inputs."""

from __future__ import annotations

__all__ = ["count", "refuse_compressed"]


def count(name: str, value, *, minimum: int = 0) -> int:
    """``value`` as a count of at least ``minimum`` (an int, not a bool), else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return value


def refuse_compressed(model, what: str) -> None:
    """A ValueError when ``model`` has compressed layers (DeepSeek-V4): ``what`` counts tokens per layer
    (held tokens x bytes per token), which misses their compressed rows and buffers."""
    if any(layer.kind == "compressed" for layer in model.layers):
        raise ValueError(f"{what} is not sized for compressed layers (DeepSeek-V4's compressed sparse attention: "
                         "one compressed row per compress_rate tokens beside a window); estimate() sizes them")
