"""placement's fast paths against the plain code they replace: layer_devices' float32 split (one array of quotients,
a binary search over sorted splits) and place's tensor tuple hashed once."""

from __future__ import annotations

import datetime
import random
import struct

import pytest

from kvmem.engines.llamacpp import placement
from kvmem.engines.llamacpp.placement import PR_18148, layer_devices


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _layer_devices_plain(n_layer, n_gpu_layers, tensor_split, build=None) -> list:
    """layer_devices as it was written before (llama_model::load_tensors get_layer_buft_list, layer by layer)."""
    n_dev = len(tensor_split)
    if n_dev == 0:
        return [None] * (n_layer + 1)
    sums, total = [], _f32(0.0)
    for x in tensor_split:
        total = _f32(total + _f32(float(x)))
        sums.append(total)
    splits = [_f32(s / total) for s in sums]
    before = build is not None and build < PR_18148
    i_gpu_start = max(n_layer - n_gpu_layers if before else n_layer + 1 - n_gpu_layers, 0)
    act = min(n_gpu_layers, n_layer + 1)
    out = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or il - i_gpu_start >= act:
            out.append(None)
            continue
        x = _f32(_f32(float(il - i_gpu_start)) / _f32(float(act)))
        out.append(min(sum(s <= x for s in splits), n_dev - 1))
    return out


def test_layer_devices_match_the_plain_split():
    rng = random.Random(34)
    old = PR_18148 - datetime.timedelta(days=1)
    checked = 0
    for _ in range(3000):
        n_layer = rng.choice((1, 2, 5, 27, 61, 78, 94, 95, 126, 200))
        ngl = rng.choice((0, 1, rng.randrange(n_layer + 3), n_layer, n_layer + 1, 999))
        n_dev = rng.randrange(0, 9)
        split = tuple(rng.choice((1, 1.0, rng.randrange(1, 100), rng.random() * 7, 0, 54, 9, 8, 0.3333333))
                      for _ in range(n_dev))
        if n_dev and rng.random() < 0.1:            # a negative share: the splits unsorted, the plain count kept
            split = split[:-1] + (-0.5,)
        if n_dev and sum(split) <= 0:
            continue
        build = rng.choice((None, old))
        assert layer_devices(n_layer, ngl, split, build) == _layer_devices_plain(n_layer, ngl, split, build), \
            (n_layer, ngl, split, build)
        checked += 1
    assert checked > 2000
    # a published split by hand: GLM-5.2's 79 layers + output, -ts 54,9,8,8 -ngl 80: the first 54 of 80 on CUDA0
    # (54/79 = 0.6835 of the sum; layer 54: 54/80 = 0.675 < 0.6835, layer 55: 0.6875 >= it)
    devs = layer_devices(79, 80, (54, 9, 8, 8))
    assert devs[:55].count(0) == 55 and devs[55] == 1


def test_place_hashes_a_tensor_tuple_once():
    calls = []

    class Info:
        def __init__(self, name):
            self.name, self.dtype, self.shape, self.nbytes = name, "F32", (4,), 16

        def __hash__(self):
            calls.append(self.name)
            return hash(self.name)

    tensors = tuple(Info(n) for n in ("token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight"))
    placement._placed.cache_clear()
    placement._static.cache_clear()
    first = placement.place(tensors, n_layer=1, n_gpu_layers=2, gpus=("CUDA0",))
    hashed = len(calls)
    assert hashed == 3                          # each info hashed once, for both caches
    again = placement.place(tensors, n_layer=1, n_gpu_layers=1, gpus=("CUDA0",))
    assert len(calls) == hashed                 # the same tuple: its hash kept
    # no output.weight: token_embd is tied as the output, placed again on the output layer's device (the GPU: with
    # -ngl 1 of 2 the output layer is the one offloaded, PR #18148)
    assert [(t.name, t.device) for t in first.tensors] == [
        ("token_embd.weight", "CPU"), ("output.weight(token_embd)", "CUDA0"), ("blk.0.attn_q.weight", "CUDA0"),
        ("output_norm.weight", "CUDA0")]
    assert [t.device for t in again.tensors] == ["CPU", "CUDA0", "CPU", "CUDA0"]
    with pytest.raises(ValueError, match="n_gpu_layers"):
        placement.place(tensors, n_layer=1, n_gpu_layers=-1, gpus=("CUDA0",))
