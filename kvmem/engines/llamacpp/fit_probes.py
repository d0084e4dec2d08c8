"""fit.cpp's probes (kvmem.engines.llamacpp.fitting): the false-position step between two of them, and a probe's memory
per device read only as far as fit's comparisons need it (Probe)."""

from __future__ import annotations

__all__ = ["Probe", "sketched_floor", "step"]


def _u32(x: int) -> int:
    return x & 0xFFFFFFFF


def step(delta: int, target: int, low: int, high: int) -> int:
    """fit.cpp's false-position step: int64 delta x (target - low) / (high - low), truncated toward
    zero, stored in a uint32_t, then clamped to 1 .. delta - 1."""
    num = delta * (target - low)
    q = abs(num) // abs(high - low) * (1 if (num >= 0) == (high - low >= 0) else -1)
    return min(max(_u32(q), 1), delta - 1)


def sketched_floor(sketch, gpus) -> list:
    """What each GPU takes under a probe's flags but the CUDA context, at most what fit reads there: its weights, KV and
    projector, and of its compute buffer what the sketch knows without a graph (Layout.compute_floor: the first GPU's
    copy of the largest host expert); ``sketch()``, the flags laid out without their compute graphs (layouts.layout
    schedule=False: the same placement and cache); no floor (0) where refused."""
    from .layouts import CUDA_CONTEXT_BYTES
    try:
        lay = sketch()
    except ValueError:
        return [0] * len(gpus)
    return [lay.total_bytes[g] - lay.compute_bytes[g] + lay.compute_floor.get(g, 0) - CUDA_CONTEXT_BYTES for g in gpus]


class Probe:
    """One of fit.cpp's probes: the memory each device takes (layout's total less the CUDA context), laid out only
    when a value is read that the probe's weights and KV alone do not settle: a device whose weights and KV exceed a
    target is over it whatever its compute buffer adds (>= 0), so fit's comparison needs no graph; the exact value
    is laid out only where fit reads it (a false-position step, an accepted probe), the same numbers either way."""

    def __init__(self, exact_of, exact: list | None, floor_of=None):
        self._exact_of, self._floor_of = exact_of, floor_of
        self._exact: list | None = exact
        self._floor: list | None = None

    def __getitem__(self, d: int) -> int:
        if self._exact is None:
            self._exact = self._exact_of()
        return self._exact[d]

    def floor(self, d: int) -> int:
        """At most self[d]: the exact value where laid out, else the weights and KV the probe puts on device d."""
        if self._exact is not None:
            return self._exact[d]
        if self._floor is None:
            self._floor = self._floor_of()
        return self._floor[d]

    def over(self, d: int, target: int) -> bool:
        """self[d] > target."""
        return self.floor(d) > target or self[d] > target

    def under(self, checks) -> bool:
        """self[d] < target for every (d, target) of ``checks``."""
        if any(self.floor(d) >= target for d, target in checks):
            return False
        return all(self[d] < target for d, target in checks)

    def within(self, targets) -> bool:
        """self[d] <= targets[d] on every device."""
        if any(self.floor(d) > target for d, target in enumerate(targets)):
            return False
        return all(self[d] <= target for d, target in enumerate(targets))

    def spare(self, targets, above: int) -> bool:
        """sum(targets[d] - self[d]) >= ``above``: the room left over the targets, summed (the weights bound it)."""
        if sum(target - self.floor(d) for d, target in enumerate(targets)) < above:
            return False
        return sum(target - self[d] for d, target in enumerate(targets)) >= above
