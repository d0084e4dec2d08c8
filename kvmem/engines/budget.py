"""One device's KV budget, in the three ways the engines compute it (aiconfigurator's
sdk/memory.py names the same flags: a fraction "of total" or "of free" memory):

    of_total  a fraction of the device's memory, less everything else it holds:
              kv = total x fraction - weights - activations - overhead
    of_free   a fraction of what the rest leaves free (nothing when nothing is):
              kv = (total - weights - activations - overhead) x fraction
    reserve   all that the rest leaves: kv = total - weights - activations - overhead

Each engine's budget hook says which it uses and why. Fractions are exact (Fraction), the
product floored to a byte; a budget below zero stays negative (sizing reports the shortfall).
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["BUDGET_MODES", "kv_budget"]

BUDGET_MODES = ("of_total", "of_free", "reserve")


def kv_budget(mode: str, *, total: int, weights: int, activations: int = 0, overhead: int = 0,
              fraction: Fraction = Fraction(1)) -> int:
    """KV bytes one device has under ``mode`` (see the module docstring)."""
    held = weights + activations + overhead
    if mode == "of_total":
        return total * fraction.numerator // fraction.denominator - held
    if mode == "of_free":
        free = total - held
        return free * fraction.numerator // fraction.denominator if free > 0 else free
    if mode == "reserve":
        return total - held
    raise ValueError(f"budget mode must be one of {', '.join(BUDGET_MODES)}, got {mode!r}")
