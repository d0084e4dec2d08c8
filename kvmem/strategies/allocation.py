"""Paged vs contiguous: reserved against used bytes for request-length distributions."""

from __future__ import annotations

import json
import math
import random
from functools import lru_cache
from importlib import resources

from ..catalog import as_model
from ..engines.base import resolve_dtypes
from ..layer import Layer
from ..model import Model
from ..textbook import ideal_layer_bytes
from ..units import cdiv, parse_bytes, parse_tokens, require_positive_int, show_value
from .inputs import count, refuse_compressed
from .rows import Admission, Admitted, AllocationRow, AllocationWaste, Reservation


def _layer_token_bytes(model: Model, kv_dtype) -> list[tuple[Layer, int]]:
    k_dtype, v_dtype, _ = resolve_dtypes(model, kv_dtype)
    out = []
    for layer in model.layers:
        if layer.caches_tokens:
            k, v = ideal_layer_bytes(layer, tokens=1, batch=1, k_dtype=k_dtype, v_dtype=v_dtype)
            out.append((layer, k + v))
    return out


_MAX_REQUESTS = 10**6  # request lengths one call sizes (the app samples 500)


def _check_lengths(lengths, max_model_len: int) -> list[int]:
    if isinstance(lengths, (str, bytes, dict)) or not hasattr(lengths, "__iter__"):
        raise ValueError(f"lengths must be a list of request lengths in tokens, got {show_value(lengths)}")
    lengths = list(lengths)
    if len(lengths) > _MAX_REQUESTS:
        raise ValueError(f"lengths must hold at most {_MAX_REQUESTS:,} requests, got {len(lengths):,}")
    if not lengths:
        raise ValueError("lengths must hold at least one request length")
    for n in lengths:
        count("each request length", n, minimum=1)
        if n > max_model_len:
            raise ValueError(f"a request of {n} tokens exceeds max_model_len={max_model_len}")
    return lengths


def _hold_alike(per_layer: list[tuple[Layer, int]]) -> list[tuple[Layer, int]]:
    """Layers that hold the same tokens for every length (same kind and window) merged into one
    entry with their bytes per token summed: sum(b_i * f(n)) = (sum b_i) * f(n), exactly, and
    one term instead of 32-128 per request length (the app sizes 500 lengths x 15 layouts)."""
    merged: dict = {}
    for layer, token_bytes in per_layer:
        key = (layer.kind, layer.window, layer.caches_tokens)
        first, total = merged.get(key, (layer, 0))
        merged[key] = (first, total + token_bytes)
    return list(merged.values())


class _Sizer:
    """Per-request KV bytes: exact, block-rounded per layer, and pre-allocated to max_model_len."""

    def __init__(self, model, kv_dtype, max_model_len: int, block_size: int):
        model = as_model(model)
        refuse_compressed(model, "per-request allocation")
        self.per_layer = _hold_alike(_layer_token_bytes(model, kv_dtype))
        self.block = require_positive_int("block_size", block_size)
        self.contiguous = self.used(max_model_len)

    def used(self, n: int) -> int:
        return sum(b * layer.held_tokens(n) for layer, b in self.per_layer)

    def paged(self, n: int) -> int:
        return sum(b * cdiv(layer.held_tokens(n), self.block) * self.block for layer, b in self.per_layer)


def _admit(sizes, kv_memory: int) -> int:
    admitted = total = 0
    for size in sizes:
        if total + size > kv_memory:
            break
        total += size
        admitted += 1
    return admitted


def preallocation_waste(model, *, lengths, max_model_len, block_size: int = 16, kv_dtype="auto",
                        kv_memory=None) -> AllocationWaste:
    """Reserved vs used KV bytes for requests of ``lengths`` tokens (final lengths, prompt +
    output): pre-allocating max_model_len per request (contiguous) against whole blocks of
    ``block_size`` tokens per layer (paged, PagedAttention). Waste = reserved - used; the
    paged waste is internal fragmentation, under one block per layer and request.

    Sliding layers hold min(length, window) and round that up to blocks. With ``kv_memory``
    the result also counts the requests admitted in arrival order (see simulate_admission).
    """
    max_model_len = parse_tokens(max_model_len)
    lengths = _check_lengths(lengths, max_model_len)
    sizer = _Sizer(model, kv_dtype, max_model_len, block_size)
    used = sum(sizer.used(n) for n in lengths)
    paged = sum(sizer.paged(n) for n in lengths)
    contiguous = sizer.contiguous * len(lengths)
    frag_tokens = sum(cdiv(n, sizer.block) * sizer.block - n for n in lengths)
    admitted = None
    if kv_memory is not None:
        admitted = simulate_admission(model, lengths=lengths, kv_memory=kv_memory, max_model_len=max_model_len,
                                      block_size=sizer.block, kv_dtype=kv_dtype).admitted
    return AllocationWaste(
        model=as_model(model).name, requests=len(lengths), max_model_len=max_model_len,
        mean_length=sum(lengths) / len(lengths), used_bytes=used,
        contiguous=Reservation(reserved_bytes=contiguous, waste_bytes=contiguous - used,
                               waste_fraction=(contiguous - used) / contiguous if contiguous else 0.0),
        paged=Reservation(block_size=sizer.block, reserved_bytes=paged, waste_bytes=paged - used,
                          waste_fraction=(paged - used) / paged if paged else 0.0,
                          internal_fragmentation_tokens=frag_tokens),
        admitted=admitted)


def simulate_admission(model, *, lengths, kv_memory, max_model_len, block_size: int = 16,
                       kv_dtype="auto") -> Admission:
    """How many of the requests fit in ``kv_memory`` bytes, admitted first come first served
    (the first request that does not fit stops admission, as a FCFS scheduler waits on its
    head), when each reserves: max_model_len (contiguous), its blocks (paged) or its exact
    bytes. Lengths are final lengths: an engine that grows blocks on demand admits more at
    first and preempts later; this is the count at completion.
    """
    max_model_len = parse_tokens(max_model_len)
    lengths = _check_lengths(lengths, max_model_len)
    kv_memory = parse_bytes(kv_memory)
    sizer = _Sizer(model, kv_dtype, max_model_len, block_size)
    admitted = Admitted(contiguous=_admit([sizer.contiguous] * len(lengths), kv_memory),
                        paged=_admit([sizer.paged(n) for n in lengths], kv_memory),
                        exact=_admit([sizer.used(n) for n in lengths], kv_memory))
    return Admission(model=as_model(model).name, kv_memory=kv_memory, requests=len(lengths), block_size=sizer.block,
                     max_model_len=max_model_len, admitted=admitted)


REQUEST_DISTRIBUTIONS = ("fixed", "uniform", "sharegpt", "alpaca", "lognormal")


@lru_cache(maxsize=1)
def _length_stats() -> dict:
    data = json.loads(resources.files("kvmem").joinpath("data/request_lengths.json").read_text(encoding="utf-8"))
    return data["datasets"]


def _geometric(rng: random.Random, mean: float) -> int:
    """A whole number >= 1 with the given mean (geometric law, p = 1 / mean), by inversion."""
    if mean <= 1:
        return 1
    p = 1.0 / mean
    return 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - p))


def request_lengths(distribution: str, n: int, *, seed: int = 0, max_model_len=None, length=None,
                    low=None, high=None, mean=None, median=None) -> list[int]:
    """``n`` request lengths (prompt + output tokens), reproducible from ``seed``.

    fixed: every request ``length``. uniform: whole numbers in [low, high]. sharegpt / alpaca:
    prompt and output each geometric with the means of kvmem/data/request_lengths.json (the
    vLLM paper's Figure 11). lognormal: given ``mean`` > ``median`` (mu = ln median,
    sigma^2 = 2 ln(mean / median)), rounded up to whole tokens. ``max_model_len`` truncates
    longer requests to it, as a server's max_tokens would.
    """
    n = require_positive_int("n", n)
    rng = random.Random(seed)
    key = str(distribution).lower()
    if key == "fixed":
        if length is None:
            raise ValueError("distribution 'fixed' needs length=")
        out = [parse_tokens(length)] * n
    elif key == "uniform":
        if low is None or high is None:
            raise ValueError("distribution 'uniform' needs low= and high=")
        low, high = parse_tokens(low), parse_tokens(high)
        if low > high:
            raise ValueError(f"low must not exceed high, got low={low} > high={high}")
        out = [rng.randint(low, high) for _ in range(n)]
    elif key in _length_stats():
        stats = _length_stats()[key]
        out = [_geometric(rng, stats["prompt_mean_tokens"]) + _geometric(rng, stats["output_mean_tokens"])
               for _ in range(n)]
    elif key == "lognormal":
        if mean is None or median is None or not 0 < median < mean:
            raise ValueError(f"distribution 'lognormal' needs mean > median > 0, got mean={mean}, median={median}")
        mu, sigma = math.log(median), math.sqrt(2 * math.log(mean / median))
        out = [max(1, math.ceil(rng.lognormvariate(mu, sigma))) for _ in range(n)]
    else:
        raise ValueError(f"unknown distribution {distribution!r}; distributions: {', '.join(REQUEST_DISTRIBUTIONS)}")
    if max_model_len is not None:
        cap = parse_tokens(max_model_len)
        out = [min(x, cap) for x in out]
    return out


def allocation_sweep(model, *, max_model_len, kv_memory, n: int = 1000, seed: int = 0,
                     block_sizes=(1, 16, 32, 64, 128), distributions=("fixed", "uniform", "sharegpt"),
                     kv_dtype="auto") -> list[AllocationRow]:
    """Contiguous pre-allocation against paged blocks of several sizes, for several length
    distributions: reserved, used, waste and requests admitted into ``kv_memory``.

    fixed = every request max_model_len // 2 tokens; uniform = 1..max_model_len; the cited
    ones as in request_lengths, truncated to max_model_len.
    """
    max_model_len = parse_tokens(max_model_len)
    try:
        kv_memory = parse_bytes(kv_memory)
    except ValueError as exc:
        raise ValueError(f"kv_memory: {exc}") from None
    n = require_positive_int("n", n, _MAX_REQUESTS)
    rows = []
    for dist in distributions:
        params = {"fixed": {"length": max(1, max_model_len // 2)}, "uniform": {"low": 1, "high": max_model_len}}
        lengths = request_lengths(dist, n, seed=seed, max_model_len=max_model_len, **params.get(dist, {}))
        for i, bs in enumerate(block_sizes):
            w = preallocation_waste(model, lengths=lengths, max_model_len=max_model_len, block_size=bs,
                                    kv_dtype=kv_dtype, kv_memory=kv_memory)
            admitted = w.admitted
            if admitted is None:           # preallocation_waste counts it whenever kv_memory is given
                raise ValueError("kv_memory: no admission counted")
            if i == 0:
                rows.append(AllocationRow(dist, "contiguous (max_model_len)", None, w.used_bytes,
                                          w.contiguous.reserved_bytes, w.contiguous.waste_bytes,
                                          w.contiguous.waste_fraction, admitted.contiguous, w.mean_length))
            rows.append(AllocationRow(dist, f"paged, block {bs}", bs, w.used_bytes, w.paged.reserved_bytes,
                                      w.paged.waste_bytes, w.paged.waste_fraction, admitted.paged, w.mean_length))
    return rows
