"""KV-cache lab: attention with and without a cache, side by side, as plain data.

Source: the seed notebook "KV Caching" (SELENE notebook repository; our copy is
shared/seed/000_9eb41768818c26b3.txt), sections "Why it Works", "Toy Implementation" and
"Memory Tradeoff". This package redoes its experiments as library functions for the
Learn page and the docs; the code is written afresh, only the experiments are the seed's.

Why caching is exact
--------------------
Self-attention of a query q_t over keys K and values V is softmax(q_t K^T / sqrt(d)) V.
With a causal mask, token t sees tokens 1..t only, so the key k_i = x_i W_k and value
v_i = x_i W_v of a past token i depend on nothing that comes after it: once computed they
never change. Generating token t+1 therefore needs the new token's q, k, v and the old
k, v rows, which can be kept (the cache) instead of recomputed. Stacked layers keep the
property: a layer's output for token i only depends on tokens <= i, so the next layer's
k_i, v_i are fixed too. Without the mask, every past row would attend to the newcomer and
change; the newest row alone would still agree, but the rows fed to the next layer (and
so its K/V) would go stale: ``compare_single_head(causal=False)`` reports that drift.

What is here (every name imports from ``kvmem.lab``)
----------------------------------------------------
- cache.py: ``attention``, ``KVCache`` (tokens grown by ``torch.cat``), ``DecoderCache``,
  ``tensor_bytes``.
- memory.py: ``memory_check`` / ``MemoryCheck``: the bytes the cache's tensors hold (unique
  storages) against the seed's formula 2 x p x b x n_layers x kv_heads x d_head x t and the
  ideal engine.
- head.py: ``AttentionHead`` and ``compare_single_head`` / ``HeadComparison``: the seed's
  toy (d_model=12, d_head=6, 5 tokens, seed 42), reproducing its printed numbers.
- decoder.py: ``DecoderConfig`` and ``Decoder``: a small pre-norm decoder with MHA, GQA or
  MQA (``kv_heads`` = ``n_heads``, a divisor, or 1).
- variants.py: ``compare_decoder`` and ``compare_variants`` / ``VariantResult``: cached and
  uncached logits per step and the cache's bytes against ``kvmem.formula`` and
  ``kvmem.estimate``.
- timing.py: ``time_per_token``: wall time of one decode step at several context lengths,
  with and without the cache (the speedup curve).
"""

from .cache import DecoderCache, KVCache, attention, tensor_bytes
from .decoder import Decoder, DecoderConfig
from .head import AttentionHead, HeadComparison, compare_single_head
from .memory import MemoryCheck, memory_check
from .timing import time_per_token
from .variants import VariantResult, compare_decoder, compare_variants

__all__ = [
    "attention", "tensor_bytes", "KVCache", "DecoderCache", "AttentionHead", "DecoderConfig",
    "Decoder", "HeadComparison", "VariantResult", "MemoryCheck", "compare_single_head",
    "compare_decoder", "compare_variants", "memory_check", "time_per_token",
]
