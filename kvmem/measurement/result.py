"""One measurement's row: the real cache's bytes counted three ways beside kvmem's prediction,
and how far apart the peaks may be.

``tensor_bytes`` (kvmem.measurement.storages) must equal ``predicted_bytes`` (K + V + recurrent
state of the estimate) to the byte. ``peak_bytes`` (kvmem.measurement.allocators) must equal the
estimate's ``peak_bytes`` to the byte on the CPU for hf-dynamic, hf-static and toy; for hqq and
quanto it depends on their working sets (counted in kvmem/engines/hf/quantized.py; exact on torch 2.13
CPU) and is allowed 1 %; for fp8, 64 B per layer (its scale's 0-dim temporaries). On CUDA the
allocator's rounding is allowed for: up to 1 MiB of unsplit block per K and per V of each layer,
plus half the predicted peak for a quantized cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_QUANTIZED_PEAK_TOLERANCE = 0.01  # hqq/quanto working sets on CPU (see the module docstring)
_CUDA_SLACK_PER_LAYER = 2 * 2**20  # CUDA rounding: up to 1 MiB of unsplit block per K and V


@dataclass(frozen=True)
class Measurement:
    """A real cache built with torch, its bytes counted three ways, and kvmem's prediction."""

    model: str
    engine: str
    tokens: int
    batch: int
    kv_dtype: str
    device: str
    predicted_bytes: int
    tensor_bytes: int
    allocated_bytes: int
    peak_bytes: int
    predicted_peak_bytes: int
    peak_tolerance_bytes: int
    reserved_bytes: int | None = None
    options: dict = field(default_factory=dict)
    storages: int = 0
    predicted_per_layer: tuple[int, ...] = ()
    measured_per_layer: tuple[int, ...] = ()
    seconds: float = 0.0
    cuda: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def bytes_match(self) -> bool:
        """The storages held are exactly the predicted bytes."""
        return self.tensor_bytes == self.predicted_bytes

    @property
    def peak_matches(self) -> bool:
        """The measured high-water mark is within the stated tolerance of the predicted one."""
        return abs(self.peak_bytes - self.predicted_peak_bytes) <= self.peak_tolerance_bytes

    @property
    def matches(self) -> bool:
        return self.bytes_match and self.peak_matches

    @property
    def difference_bytes(self) -> int:
        """tensor_bytes - predicted_bytes."""
        return self.tensor_bytes - self.predicted_bytes

    def to_dict(self) -> dict:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["predicted_per_layer"] = list(self.predicted_per_layer)
        data["measured_per_layer"] = list(self.measured_per_layer)
        data["notes"] = list(self.notes)
        data.update(matches=self.matches, bytes_match=self.bytes_match, peak_matches=self.peak_matches,
                    difference_bytes=self.difference_bytes, skipped=None)
        return data


def peak_tolerance(engine: str, options: dict, device, predicted_peak: int, layers: int) -> int:
    """How far the measured peak may be from the predicted one (see the module docstring)."""
    quantized = engine == "hf-quantized"
    if device.type == "cuda":
        return _CUDA_SLACK_PER_LAYER * layers + (predicted_peak // 2 if quantized else 0)
    if quantized and options.get("backend", "quanto") != "fp8":
        return int(predicted_peak * _QUANTIZED_PEAK_TOLERANCE)
    if quantized:
        return 64 * layers  # fp8: the scale's 0-dim temporaries (amax, float, clamp) are not replayed
    return 0
