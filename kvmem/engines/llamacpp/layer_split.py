"""llama.cpp's layer split over the GPUs: which device holds each layer for -ngl and -ts (or, without -ts, each
device's free memory), as src/llama-model.cpp llama_model::load_tensors computes it in float32 (the rules:
kvmem.engines.llamacpp.placement's docstring)."""

from __future__ import annotations

import datetime
import functools
import math
import struct
from array import array
from bisect import bisect_right

from .settings import PR_18148  # the output layer offloaded first (2025-12-18, 57c1e0564)

__all__ = ["free_split", "layer_devices", "layer_devices_cached"]


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def free_split(free_bytes) -> tuple:
    """The -ts llama.cpp takes when none is given (or all zero): each device's free memory
    (llama.cpp@0c1e57098 src/llama-model.cpp#L1556-L1576, ggml_backend_dev_memory's free, as a float), here
    ``free_bytes`` per GPU (kvmem: usable memory less the CUDA context) in whole MiB (the "using device ... MiB
    free" figure) divided by their greatest common divisor: MiB values are exact in float32, so the split points,
    and the layers, are those of the MiB figures themselves; equal cards give (1.0, ..., 1.0) as a bare -ts 1,1."""
    mib = [max(int(b) >> 20, 0) for b in free_bytes]
    if not any(mib):
        raise ValueError(f"free memory {list(free_bytes)!r}: no GPU has a MiB free to split the layers by")
    g = math.gcd(*mib)
    return tuple(float(m // g) for m in mib)


def layer_devices(n_layer: int, n_gpu_layers: int, tensor_split, build: datetime.date | None = None) -> list:
    """GPU index (into tensor_split) of layers 0..n_layer (the last is the output layer), None on the
    host: llama_model::load_tensors get_layer_buft_list, float32 as llama.cpp computes it."""
    return list(layer_devices_cached(n_layer, n_gpu_layers, tuple(tensor_split), build))


@functools.lru_cache(maxsize=256)
def layer_devices_cached(n_layer: int, n_gpu_layers: int, tensor_split: tuple, build: datetime.date | None) -> tuple:
    """layer_devices, remembered: a placement search tries many -ot sets over one -ngl and -ts."""
    n_dev = len(tensor_split)
    if n_dev == 0:
        return (None,) * (n_layer + 1)
    sums, total = [], _f32(0.0)
    for x in tensor_split:
        total = _f32(total + _f32(float(x)))
        sums.append(total)
    if total <= 0:
        raise ValueError(f"tensor_split {list(tensor_split)!r} must have a positive sum")
    splits = [_f32(s / total) for s in sums]
    before = build is not None and build < PR_18148
    i_gpu_start = max(n_layer - n_gpu_layers if before else n_layer + 1 - n_gpu_layers, 0)
    act = min(n_gpu_layers, n_layer + 1)
    # k / act in float32 for the k-th offloaded layer (k and act exact in float32 below 2^24; the quotient rounded as
    # array('f') stores it, as _f32 does), then std::upper_bound: a binary search where the splits are sorted
    xs = array("f", [k / act for k in range(act)]) if act < 1 << 24 else [_f32(_f32(k) / _f32(act)) for k in range(act)]
    ordered = all(a <= b for a, b in zip(splits, splits[1:], strict=False))
    gpu = [min(bisect_right(splits, x) if ordered else sum(s <= x for s in splits), n_dev - 1) for x in xs]  # .at()
    start = min(i_gpu_start, n_layer + 1)
    gpu = gpu[:n_layer + 1 - start]
    return (None,) * start + tuple(gpu) + (None,) * (n_layer + 1 - start - len(gpu))
