"""A cache's real bytes against the seed's formula and kvmem.estimate (the ideal engine).

Source: the seed notebook's "Memory Tradeoff" (shared/seed/000_9eb41768818c26b3.txt):
2 x p x b x n_layers x kv_heads x d_head x t bytes, p bytes per element, b sequences of t tokens.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..engines import engine_estimate
from ..textbook import formula
from .cache import DTYPE_NAMES, KVCache


@dataclass(frozen=True)
class MemoryCheck:
    """A cache's real tensor bytes beside the seed's formula and kvmem.estimate (ideal engine)."""

    tokens: int
    batch: int
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_element: int
    tensor_bytes: int
    formula_bytes: int
    estimate_bytes: int

    @property
    def matches(self) -> bool:
        return self.tensor_bytes == self.formula_bytes == self.estimate_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "matches": self.matches}


def memory_check(module, cache, *, batch: int = 1) -> MemoryCheck:
    """Compare the bytes ``cache`` holds with the formula and kvmem.estimate for ``module``.

    The seed writes the formula with n_heads; what is cached is one K and one V per KV
    head, so the count uses kv_heads (= n_heads for MHA only).

    ``module`` is an AttentionHead or a Decoder (anything with n_layers, kv_heads, head_dim
    and to_model()); ``cache`` the KVCache / DecoderCache it filled for ``batch`` sequences.
    """
    first = cache if isinstance(cache, KVCache) else cache[0]
    if first.keys is None:
        raise ValueError("cache must hold at least one token, got an empty cache")
    dtype_name = DTYPE_NAMES.get(first.keys.dtype)
    if dtype_name is None:
        raise ValueError(f"cache dtype must be one of {sorted(DTYPE_NAMES.values())}, "
                         f"got {first.keys.dtype}")
    tokens, element = len(cache), first.keys.element_size()
    predicted = formula(bytes_per_element=element, batch=batch, layers=module.n_layers,
                        kv_heads=module.kv_heads, head_dim=module.head_dim, tokens=tokens)
    ideal = engine_estimate(module.to_model(dtype_name), engine="ideal", tokens=tokens, batch=batch,
                     kv_dtype=dtype_name)
    return MemoryCheck(tokens=tokens, batch=batch, layers=module.n_layers, kv_heads=module.kv_heads,
                       head_dim=module.head_dim, bytes_per_element=element, tensor_bytes=cache.nbytes,
                       formula_bytes=predicted, estimate_bytes=ideal.kv_bytes)

