"""The lab's building blocks: attention, a KV cache that grows by ``torch.cat``, and byte counts.

- ``attention``: scaled dot-product attention, causal mask aligned to the newest tokens.
- ``KVCache``: one layer's K and V, grown along the token axis with ``torch.cat`` (as the
  seed, shared/seed/000_9eb41768818c26b3.txt "Toy Implementation", does). ``len(cache)`` is
  the number of cached tokens; the seed's ``__len__`` returns ``keys.size(1)``, the head
  dimension, for its (tokens, d_head) tensors.
- ``DecoderCache``: one KVCache per decoder layer.
- ``tensor_bytes``: the bytes behind tensors, each storage once.
- ``positive_int`` and ``DTYPE_NAMES``: the argument check and the torch-to-kvmem dtype names
  the other lab modules share.
"""

from __future__ import annotations

import math

import torch

# torch element types and the kvmem names of the same formats
DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True):
    """softmax(q k^T / sqrt(d)) v, and the weights.

    q: (..., Tq, d); k, v: (..., Tk, d) with Tk >= Tq. The Tq queries are the *last* Tq
    positions of the Tk keys (a prompt after a cache, or one new token), so query i sits at
    position Tk - Tq + i and the causal mask hides keys j > Tk - Tq + i. For one query
    (Tq = 1) the mask hides nothing: the cache already holds only the past.
    """
    tq, tk = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])        # (..., Tq, Tk)
    if causal:
        future = torch.ones(tq, tk, dtype=torch.bool, device=q.device).triu(tk - tq + 1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights                                        # (..., Tq, d), (..., Tq, Tk)


def tensor_bytes(tensors) -> int:
    """Bytes of the storages behind ``tensors``, each storage counted once (views share)."""
    seen, total = set(), 0
    for tensor in tensors:
        if tensor is None:
            continue
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


class KVCache:
    """One attention layer's cached keys and values, tokens on the second-to-last axis.

    Shapes are (tokens, head_dim) for a single head, (batch, kv_heads, tokens, head_dim)
    for the decoder. Each ``append`` concatenates, so after it the cache holds exactly
    tokens x head_dim elements per head for K and for V.
    """

    def __init__(self):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def append(self, keys: torch.Tensor, values: torch.Tensor):
        """Add new tokens' keys and values; returns all cached (keys, values)."""
        if keys.shape[:-1] != values.shape[:-1]:
            raise ValueError(f"keys and values must agree on all but the last axis, "
                             f"got {tuple(keys.shape)} and {tuple(values.shape)}")
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values

    def truncate(self, tokens: int) -> None:
        """Keep the first ``tokens`` tokens (used to replay one decode step)."""
        if not 0 <= tokens <= len(self):
            raise ValueError(f"tokens must be between 0 and {len(self)}, got {tokens!r}")
        if tokens == 0:
            self.reset()
        else:
            self.keys, self.values = self.keys[..., :tokens, :], self.values[..., :tokens, :]

    def reset(self) -> None:
        self.keys = self.values = None

    def __len__(self) -> int:
        """Cached tokens (the token axis, -2), not the head dimension."""
        return 0 if self.keys is None else self.keys.shape[-2]

    @property
    def nbytes(self) -> int:
        return tensor_bytes([self.keys, self.values])


class DecoderCache:
    """One KVCache per decoder layer."""

    def __init__(self, n_layers: int):
        self.layers = [KVCache() for _ in range(positive_int("n_layers", n_layers))]

    def __getitem__(self, index: int) -> KVCache:
        return self.layers[index]

    def __len__(self) -> int:
        """Cached tokens (every layer holds the same tokens)."""
        return len(self.layers[0])

    def truncate(self, tokens: int) -> None:
        for layer in self.layers:
            layer.truncate(tokens)

    def reset(self) -> None:
        for layer in self.layers:
            layer.reset()

    @property
    def nbytes(self) -> int:
        return tensor_bytes([t for layer in self.layers for t in (layer.keys, layer.values)])

