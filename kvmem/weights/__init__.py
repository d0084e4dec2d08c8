"""Weight memory: bytes of a model's weights in a storage format, whole and per device.

formats.py   the storage formats and "auto" (bytes per weight, with their sources)
formula.py   weights(): from the config's parameter count, or exact from a checkpoint
checkpoint.py  a checkpoint's tensors grouped as embedding / lm_head / experts / dense
record.py    Weights: the bytes per group, per device under tp and pp, and per decode step
"""

from .formats import resolve_weight_dtype, weight_formats
from .formula import weight_bytes, weights
from .record import WeightLayout, Weights

__all__ = ["WeightLayout", "Weights", "weights", "weight_bytes", "weight_formats", "resolve_weight_dtype"]
