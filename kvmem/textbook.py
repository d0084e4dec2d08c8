"""The seed's textbook formula, and the ideal per-layer count it generalises.

The seed notebook ("KV Caching", section Memory Tradeoff) gives

    Memory = 2 x p x b x n_layers x n_heads x d_head x t

bytes for K and V (the 2), p bytes per element, b sequences, t tokens each. With
p=2, b=32, n_layers=32, n_heads=32, d_head=128, t=500 that is 8,388,608,000 bytes
= 7.81 GiB (8.39 GB); the notebook's "≈ 6.65 GB" is an arithmetic slip.

Real models differ layer by layer (GQA/MQA heads, K and V head dims, sliding windows,
MLA latents, linear-attention state): ``ideal_layer_bytes`` counts every cached element
once, per layer, in exact integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

from .dtypes import DType
from .layer import Layer
from .records import Record
from .units import show_value

__all__ = ["formula", "ideal_layer_bytes", "seed_terms", "SeedTerms"]


def formula(*, bytes_per_element, batch, layers, kv_heads, head_dim, tokens):
    """2 * bytes_per_element * batch * layers * kv_heads * head_dim * tokens, nothing else.

    An int when every input is an int (exact for any size); a float when
    ``bytes_per_element`` is fractional (e.g. 0.5 for int4).
    """
    values = dict(bytes_per_element=bytes_per_element, batch=batch, layers=layers,
                  kv_heads=kv_heads, head_dim=head_dim, tokens=tokens)
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, Real) or not value >= 0:
            raise ValueError(f"{name} must be a non-negative number, got {show_value(value)}")
        if not isinstance(value, int) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        if name != "bytes_per_element" and not isinstance(value, int) and value != math.floor(value):
            raise ValueError(f"{name} must be a whole number, got {value!r}")
    bpe = bytes_per_element
    if not isinstance(bpe, int) and bpe == math.floor(bpe):
        bpe = int(bpe)
    result = 2 * bpe
    for name in ("batch", "layers", "kv_heads", "head_dim", "tokens"):
        result *= int(values[name])
    return result


def ideal_layer_bytes(layer: Layer, *, tokens: int, batch: int, k_dtype: DType, v_dtype: DType,
                      kv_heads: int | None = None) -> tuple[int, int]:
    """(K bytes, V bytes) one layer holds for ``batch`` sequences of ``tokens`` (a recurrent
    state is per sequence: kvmem.engines.base.state_bytes).

    K = held tokens x rows of ``head_dim_k`` (one per KV head) in ``k_dtype``, likewise V;
    MLA stores one row of kv_lora_rank + qk_rope_head_dim (+ indexer) per token, as K; a per-head
    layer with an indexer (MiniMax-M3's sparse layers) one index_head_dim row beside its K rows;
    a compressed layer (DeepSeek-V4) one head_dim row shared by K and V per window token, plus
    floor(tokens / compress_rate) compressed rows and indexer keys, as K (its buffers are state:
    kvmem.engines.ideal).
    ``kv_heads`` overrides the layer's head count (one tensor-parallel rank's share).
    """
    held = layer.held_tokens(tokens)
    heads = layer.kv_heads if kv_heads is None else kv_heads
    if layer.kind == "mla":
        k = batch * held * k_dtype.row_bytes(layer.k_width)
        v = 0
    elif layer.kind == "compressed":
        k = batch * held * k_dtype.row_bytes(layer.head_dim_k)
        if layer.compressor:
            c = layer.compressor
            row = k_dtype.row_bytes(c.head_dim) + k_dtype.row_bytes(c.index_head_dim)
            k += batch * c.compressed_rows(tokens) * row
        v = 0
    elif layer.caches_tokens:
        k = batch * held * (heads * k_dtype.row_bytes(layer.head_dim_k) + k_dtype.row_bytes(layer.index_head_dim))
        v = batch * held * heads * v_dtype.row_bytes(layer.head_dim_v)
    else:
        k = v = 0
    return k, v


@dataclass(frozen=True)
class SeedTerms(Record):
    """seed_terms' result: the formula's six terms, K's and V's head widths, the element format(s)
    and ``formula_bytes`` (to_dict key "bytes", the name the seed's dict had)."""

    bytes_per_element: int | float
    batch: int
    layers: int
    kv_heads: int
    head_dim: int | float
    tokens: int
    head_dim_k: int
    head_dim_v: int
    dtype: str
    formula_bytes: int | float

    KEYS = {"bytes_per_element": "bytes_per_element", "batch": "batch", "layers": "layers", "kv_heads": "kv_heads",
            "head_dim": "head_dim", "tokens": "tokens", "head_dim_k": "head_dim_k", "head_dim_v": "head_dim_v",
            "dtype": "dtype", "bytes": "formula_bytes"}


def seed_terms(model, *, tokens: int, batch: int, kv_dtype="auto") -> SeedTerms:
    """The seed formula's terms read naively off ``model``, and its result.

    What a plain calculator does: every layer counted as full attention with the first
    attention layer's KV heads and head dims, the element size of ``kv_dtype``. An MLA model
    is read per head, as its config's fields name them: num_key_value_heads (else
    num_attention_heads) heads, K qk_nope_head_dim + qk_rope_head_dim wide, V v_head_dim wide
    (DeepSeek-V3: 128 x (192 + 128) x 61 x 2 B = 4,997,120 B per token, 71x its 70,272-byte
    latent). Where K and V widths differ, ``head_dim`` is their mean, so that the formula's
    2 x d_head is d_k + d_v. Comparing this with an engine's Estimate shows what windows, MLA,
    linear layers, shared layers and padding change. ``kv_dtype`` may be an Estimate's "K/V"
    pair ("q8_0/f16", llama.cpp's type_k/type_v; kvmem.dtypes.kv_pair): p is then the mean of the two element
    sizes, since the formula's 2·p counts one K and one V element.
    """
    from .dtypes import dtype as _dtype
    from .dtypes import kv_pair

    k_name, v_name = kv_pair(kv_dtype)
    k_type = _dtype(k_name, model_dtype=model.dtype)
    v_type = _dtype(v_name, model_dtype=model.dtype)
    first = next((layer for layer in model.layers if layer.caches_tokens), None)
    if first is None:
        raise ValueError(f"{model.name} has no attention layer that caches tokens")
    heads, head_dim_k, head_dim_v = _naive_heads(model, first)
    bytes_per_element = _whole((k_type.bits + v_type.bits) / 16)
    terms = dict(bytes_per_element=bytes_per_element, batch=batch, layers=model.num_layers, kv_heads=heads,
                 head_dim=_whole((head_dim_k + head_dim_v) / 2), tokens=tokens)
    # 2 x p x ... x (d_k + d_v) / 2 x t, exact: the product with d_k + d_v is even
    both = formula(**{**terms, "head_dim": head_dim_k + head_dim_v})
    name = k_type.name if k_type.name == v_type.name else f"{k_type.name}/{v_type.name}"
    return SeedTerms(**terms, head_dim_k=head_dim_k, head_dim_v=head_dim_v, dtype=name,
                     formula_bytes=both // 2 if isinstance(both, int) else both / 2)


def _whole(value: float):
    """``value`` as an int when it is whole."""
    return int(value) if float(value).is_integer() else value


def _naive_heads(model, first: Layer) -> tuple[int, int, int]:
    """(KV heads, K head dim, V head dim) as a plain calculator reads them off the config."""
    if first.kind.compressed:   # DeepSeek-V4's config: num_key_value_heads 1, head_dim for K and for V
        return first.kv_heads, first.head_dim_k, first.head_dim_k
    if not first.kind.latent:
        return first.kv_heads, first.head_dim_k, first.head_dim_v
    nope, v_dim = model.facts.qk_nope_head_dim, model.facts.v_head_dim
    if not nope or not v_dim:
        raise ValueError(f"{model.name}: the per-head reading of MLA needs qk_nope_head_dim and v_head_dim, "
                         f"which this model does not give (qk_nope_head_dim={nope}, v_head_dim={v_dim})")
    heads = int(model.config.get("num_key_value_heads") or model.num_attention_heads)
    return heads, nope + first.qk_rope_head_dim, v_dim
