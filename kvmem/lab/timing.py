"""Time per token with and without the KV cache at several context lengths (the speedup curve).

Wall time by time.perf_counter, median of repeats after warm-up runs; the numbers depend on
the machine and its load, the shape of the curve is the point.
"""

from __future__ import annotations

import statistics
import time

import torch

from .cache import positive_int
from .decoder import Decoder, DecoderConfig, seeded_decoder


def _median_ms(fn, *, repeats: int, warmup: int, before=None) -> float:
    """Median wall time of ``fn()`` in ms over ``repeats`` runs, after ``warmup`` runs;
    ``before()`` (untimed) runs ahead of each call."""
    times = []
    for i in range(warmup + repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        if i >= warmup:
            times.append(elapsed * 1000.0)
    return statistics.median(times)


def time_per_token(*, lengths=(16, 64, 256, 512), config: DecoderConfig | None = None, repeats: int = 7,
                   warmup: int = 2, seed: int = 0, threads: int | None = 1) -> list[dict]:
    """Wall time to generate the token at position ``tokens``, with and without a cache.

    Cached: one decode step, the new token's q/k/v against a cache of tokens - 1 (the cache
    is cut back to tokens - 1, untimed, before each repeat). Uncached: the whole sequence of
    ``tokens`` rerun to get the last position's logits, as generation without a cache does
    at every step. Median of ``repeats`` runs after ``warmup``; time.perf_counter.
    Returns rows {tokens, ms_per_token_cached, ms_per_token_uncached, speedup}: the cached
    cost grows slowly with length (attention reads t cached rows), the uncached one about
    linearly (all t rows go through every projection and MLP), so the speedup grows with t.
    The numbers depend on the machine and its load; the shape of the curve is the point.
    ``threads`` sets torch's intra-op threads for the measurement (restored afterwards;
    None leaves them): these tensors are too small to gain from threads, and on a busy
    machine threads waiting for each other can make each step 10-100x slower.
    """
    positive_int("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    lengths = [positive_int("tokens", n) for n in lengths]
    if config is None:
        config = DecoderConfig(max_tokens=max(lengths))
    elif max(lengths) > config.max_tokens:
        raise ValueError(f"lengths must be at most max_tokens ({config.max_tokens}), got {max(lengths)}")
    if threads is not None:
        positive_int("threads", threads)
    model = seeded_decoder(config, seed)
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(config.vocab_size, (1, max(lengths)), generator=generator)
    rows = []
    saved_threads = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        with torch.inference_mode():
            for tokens in lengths:
                rows.append(_time_length(model, ids[:, :tokens], repeats=repeats, warmup=warmup))
    finally:
        torch.set_num_threads(saved_threads)
    return rows


def _time_length(model: Decoder, prefix: torch.Tensor, *, repeats: int, warmup: int) -> dict:
    """One row of time_per_token for the ``prefix`` (1, tokens)."""
    tokens = prefix.shape[1]
    uncached = _median_ms(lambda: model(prefix), repeats=repeats, warmup=warmup)
    cache = model.new_cache()
    if tokens > 1:
        model(prefix[:, :-1], cache)
    cached = _median_ms(lambda: model(prefix[:, -1:], cache), repeats=repeats, warmup=warmup,
                        before=lambda: cache.truncate(tokens - 1))
    return {"tokens": tokens, "ms_per_token_cached": cached, "ms_per_token_uncached": uncached,
            "speedup": uncached / cached}
