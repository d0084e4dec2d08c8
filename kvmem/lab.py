"""KV-cache lab: attention with and without a cache, side by side, as plain data.

Source: the seed notebook "KV Caching" (SELENE notebook repository; our copy is
shared/seed/000_9eb41768818c26b3.txt), sections "Why it Works", "Toy Implementation" and
"Memory Tradeoff". This module redoes its experiments as library functions for the
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

What is here
------------
- ``attention``: scaled dot-product attention, causal mask aligned to the newest tokens.
- ``KVCache``: one layer's K and V, grown along the token axis with ``torch.cat`` (as the
  seed does). ``len(cache)`` is the number of cached tokens; the seed's ``__len__``
  returns ``keys.size(1)``, the head dimension, for its (tokens, d_head) tensors.
- ``AttentionHead`` and ``compare_single_head``: the seed's toy (d_model=12, d_head=6,
  5 tokens, seed 42). Built in the seed's order (``torch.manual_seed(42)``; five
  ``torch.rand(1, 12)`` embeddings; ``torch.manual_seed(42)``; Linear q, k, v), it
  reproduces the seed's printed numbers, e.g. step-1 output
  [-0.006, -0.687, -0.147, 0.639, -0.314, 0.148] and the step-2 weights [0.499, 0.501].
- ``Decoder`` and ``compare_variants``: a small pre-norm decoder with MHA, GQA or MQA
  (``kv_heads`` = ``n_heads``, a divisor, or 1); cached and uncached logits per step and
  the cache's bytes against ``kvmem.formula`` and ``kvmem.estimate``.
- ``memory_check``: the bytes the cache's tensors hold (unique storages) against the
  seed's formula 2 x p x b x n_layers x kv_heads x d_head x t and the ideal engine.
- ``time_per_token``: wall time of one decode step at several context lengths, with and
  without the cache (the speedup curve).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .engines import estimate
from .textbook import formula
from .model import FULL, Layer, Model

__all__ = [
    "attention", "tensor_bytes", "KVCache", "DecoderCache", "AttentionHead", "DecoderConfig",
    "Decoder", "HeadComparison", "VariantResult", "MemoryCheck", "compare_single_head",
    "compare_decoder", "compare_variants", "memory_check", "time_per_token",
]

# torch element types and the kvmem names of the same formats
_DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def _positive_int(name: str, value) -> int:
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
        self.layers = [KVCache() for _ in range(_positive_int("n_layers", n_layers))]

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


class AttentionHead(nn.Module):
    """One attention head: Linear projections to q, k, v (created in that order) and attention."""

    n_layers = 1   # for memory_check: one layer, one KV head
    kv_heads = 1

    def __init__(self, d_model: int, d_head: int):
        super().__init__()
        self.d_model, self.d_head = _positive_int("d_model", d_model), _positive_int("d_head", d_head)
        self.Wq = nn.Linear(d_model, d_head)
        self.Wk = nn.Linear(d_model, d_head)
        self.Wv = nn.Linear(d_model, d_head)

    @property
    def head_dim(self) -> int:
        return self.d_head

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, *, causal: bool = True):
        """x: (T, d_model) -> (output (T, d_head), weights (T, T_total)).

        Without a cache, x is the whole sequence. With one, x holds only the new tokens:
        their k, v are appended and their queries attend over everything cached, always
        causally (a cache holds no future tokens by construction).
        """
        q, k, v = self.Wq(x), self.Wk(x), self.Wv(x)
        if cache is not None:
            k, v = cache.append(k, v)
            causal = True
        return attention(q, k, v, causal=causal)

    def to_model(self, dtype: str = "fp32") -> Model:
        """The kvmem.Model that caches what this head caches: one full layer, one KV head."""
        return Model(name=f"lab-head-{self.d_model}x{self.d_head}",
                     layers=(Layer(FULL, kv_heads=1, head_dim_k=self.d_head, head_dim_v=self.d_head),),
                     hidden_size=self.d_model, num_attention_heads=1, dtype=dtype)


@dataclass(frozen=True)
class DecoderConfig:
    """A small decoder: ``kv_heads`` = n_heads is MHA, 1 is MQA, anything between is GQA."""

    vocab_size: int = 256
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 8
    kv_heads: int = 8
    max_tokens: int = 2048

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "kv_heads", "max_tokens"):
            _positive_int(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be a multiple of n_heads ({self.n_heads}), got {self.d_model}")
        if self.n_heads % self.kv_heads:
            raise ValueError(f"kv_heads must divide n_heads ({self.n_heads}), got {self.kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def variant(self) -> str:
        if self.kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    def to_dict(self) -> dict:
        return {**asdict(self), "head_dim": self.head_dim, "variant": self.variant}


class _SelfAttention(nn.Module):
    """n_heads query heads sharing kv_heads key/value heads (each KV head serves a group)."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.n_heads, self.kv_heads, self.head_dim = config.n_heads, config.kv_heads, config.head_dim
        self.q_proj = nn.Linear(config.d_model, config.n_heads * config.head_dim)
        self.k_proj = nn.Linear(config.d_model, config.kv_heads * config.head_dim)
        self.v_proj = nn.Linear(config.d_model, config.kv_heads * config.head_dim)
        self.o_proj = nn.Linear(config.n_heads * config.head_dim, config.d_model)

    def forward(self, x: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)   # (B, H, T, hd)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, KV, T, hd)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if cache is not None:
            k, v = cache.append(k, v)                                                 # only KV heads cached
        group = self.n_heads // self.kv_heads
        if group > 1:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        out, _ = attention(q, k, v, causal=True)                                      # (B, H, T, hd)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim))


class _Block(nn.Module):
    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = _SelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, 4 * config.d_model), nn.GELU(),
                                 nn.Linear(4 * config.d_model, config.d_model))

    def forward(self, x: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class Decoder(nn.Module):
    """Token and learned position embeddings, pre-norm blocks, a final norm, an LM head."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_tokens, config.d_model)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # GPT-2's initialisation (nanoGPT model.py, _init_weights): weights N(0, 0.02),
        # biases 0. The cached and uncached paths multiply matrices of different shapes
        # (1 row vs t rows), so float32 sums are ordered differently and the logits differ
        # by a few units in the last place; at this scale that is a few 1e-7.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @property
    def n_layers(self) -> int:
        return self.config.n_layers

    @property
    def kv_heads(self) -> int:
        return self.config.kv_heads

    @property
    def head_dim(self) -> int:
        return self.config.head_dim

    def new_cache(self) -> DecoderCache:
        return DecoderCache(self.config.n_layers)

    def forward(self, ids: torch.Tensor, cache: DecoderCache | None = None) -> torch.Tensor:
        """ids: (B, T) -> logits (B, T, vocab). With a cache, ids are the tokens after it."""
        start = len(cache) if cache is not None else 0
        end = start + ids.shape[1]
        if end > self.config.max_tokens:
            raise ValueError(f"tokens must be at most max_tokens ({self.config.max_tokens}), got {end}")
        positions = torch.arange(start, end, device=ids.device)
        x = self.tok_emb(ids) + self.pos_emb(positions)                                # (B, T, d_model)
        for i, block in enumerate(self.blocks):
            x = block(x, cache[i] if cache is not None else None)
        return self.lm_head(self.ln_f(x))

    def to_model(self, dtype: str | None = None) -> Model:
        """The kvmem.Model that caches what this decoder caches (full attention in every layer)."""
        c = self.config
        if dtype is None:
            dtype = _DTYPE_NAMES[self.lm_head.weight.dtype]
        layer = Layer(FULL, kv_heads=c.kv_heads, head_dim_k=c.head_dim, head_dim_v=c.head_dim)
        return Model(name=f"lab-{c.variant.lower()}-{c.n_layers}x{c.d_model}-kv{c.kv_heads}",
                     layers=(layer,) * c.n_layers, hidden_size=c.d_model,
                     num_attention_heads=c.n_heads, dtype=dtype)


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
    dtype_name = _DTYPE_NAMES.get(first.keys.dtype)
    if dtype_name is None:
        raise ValueError(f"cache dtype must be one of {sorted(_DTYPE_NAMES.values())}, "
                         f"got {first.keys.dtype}")
    tokens, element = len(cache), first.keys.element_size()
    predicted = formula(bytes_per_element=element, batch=batch, layers=module.n_layers,
                        kv_heads=module.kv_heads, head_dim=module.head_dim, tokens=tokens)
    ideal = estimate(module.to_model(dtype_name), engine="ideal", tokens=tokens, batch=batch,
                     kv_dtype=dtype_name)
    return MemoryCheck(tokens=tokens, batch=batch, layers=module.n_layers, kv_heads=module.kv_heads,
                       head_dim=module.head_dim, bytes_per_element=element, tensor_bytes=cache.nbytes,
                       formula_bytes=predicted, estimate_bytes=ideal.kv_bytes)


@dataclass(frozen=True)
class HeadComparison:
    """The seed's single-head experiment, step by step (step t = t tokens seen).

    outputs_uncached[t-1]  the (t x d_head) output of rerunning all t tokens (causal mask)
    outputs_cached[t-1]    the newest token's d_head row from the cached path
    weights_uncached[t-1]  the growing (t x t) attention matrix
    weights_cached[t-1]    the newest token's row of t weights
    max_abs_diff[t-1]      max |cached row - last uncached row|, outputs and weights together
    past_drift             max change of already-computed uncached rows from one step to the
                           next: 0 with the causal mask, which is why past K/V can be kept
    cache_tokens[t-1]      len(cache) after step t
    With prompt_tokens = P > 1 the cached path fills steps 1..P from one masked prompt pass;
    each of those weight rows is cut to its t visible entries (the masked rest is 0).
    """

    d_model: int
    d_head: int
    steps: int
    prompt_tokens: int
    causal: bool
    outputs_uncached: list
    outputs_cached: list
    weights_uncached: list
    weights_cached: list
    max_abs_diff: list
    max_abs_diff_overall: float
    past_drift: float
    cache_tokens: list
    memory: MemoryCheck

    def to_dict(self) -> dict:
        return {**asdict(self), "memory": self.memory.to_dict()}


def compare_single_head(*, d_model: int = 12, d_head: int = 6, steps: int = 5, prompt_tokens: int = 1,
                        seed: int = 42, causal: bool = True) -> HeadComparison:
    """Run one attention head with and without a KV cache for ``steps`` tokens.

    Seeded as the seed notebook does: ``manual_seed(seed)``, the embeddings (uniform,
    ``steps`` x ``d_model``), ``manual_seed(seed)`` again, then the head. The global RNG
    state is restored afterwards. ``causal=False`` drops the mask from the uncached
    baseline only: the newest row still matches (the last token sees everything either
    way) but ``past_drift`` turns large, i.e. the earlier rows, which a cache would keep,
    no longer equal a recomputation.
    """
    for name, value in (("steps", steps), ("prompt_tokens", prompt_tokens)):
        _positive_int(name, value)
    if prompt_tokens > steps:
        raise ValueError(f"prompt_tokens must be at most steps ({steps}), got {prompt_tokens}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        x = torch.rand(steps, d_model)                                       # (steps, d_model)
        torch.manual_seed(seed)
        head = AttentionHead(d_model, d_head)

    out_full, w_full = [], []
    out_rows, w_rows, cached_tokens = [], [], []
    cache = KVCache()
    with torch.inference_mode():
        for t in range(1, steps + 1):
            out, w = head(x[:t], causal=causal)
            out_full.append(out)
            w_full.append(w)
        out, w = head(x[:prompt_tokens], cache)
        for t in range(1, prompt_tokens + 1):
            out_rows.append(out[t - 1])
            w_rows.append(w[t - 1, :t])
            cached_tokens.append(len(cache))
        for t in range(prompt_tokens + 1, steps + 1):
            out, w = head(x[t - 1:t], cache)
            out_rows.append(out[0])
            w_rows.append(w[0])
            cached_tokens.append(len(cache))

    diffs = [max((out_rows[i] - out_full[i][-1]).abs().max().item(),
                 (w_rows[i] - w_full[i][-1]).abs().max().item()) for i in range(steps)]
    drift = max([(out_full[i][:-1] - out_full[i - 1]).abs().max().item() for i in range(1, steps)],
                default=0.0)
    return HeadComparison(
        d_model=d_model, d_head=d_head, steps=steps, prompt_tokens=prompt_tokens, causal=causal,
        outputs_uncached=[o.tolist() for o in out_full], outputs_cached=[o.tolist() for o in out_rows],
        weights_uncached=[w.tolist() for w in w_full], weights_cached=[w.tolist() for w in w_rows],
        max_abs_diff=diffs, max_abs_diff_overall=max(diffs), past_drift=drift, cache_tokens=cached_tokens,
        memory=memory_check(head, cache))


@dataclass(frozen=True)
class VariantResult:
    """One decoder variant: cached vs uncached logits per step, and its cache's bytes."""

    variant: str
    n_heads: int
    kv_heads: int
    head_dim: int
    layers: int
    d_model: int
    steps: int
    prompt_tokens: int
    batch: int
    max_abs_diff: list
    max_abs_diff_overall: float
    max_abs_logit: float
    cache_tokens: int
    memory: MemoryCheck

    @property
    def bytes_per_token(self) -> int:
        """Cache bytes per token of one sequence: 2 x layers x kv_heads x head_dim x p."""
        return self.memory.tensor_bytes // (self.cache_tokens * self.batch)

    def to_dict(self) -> dict:
        return {**asdict(self), "memory": self.memory.to_dict(), "bytes_per_token": self.bytes_per_token}


def _model(config: DecoderConfig, seed: int) -> Decoder:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Decoder(config).eval()


def compare_decoder(config: DecoderConfig, *, steps: int = 24, prompt_tokens: int = 8, batch: int = 1,
                    seed: int = 0) -> VariantResult:
    """Feed ``steps`` random tokens through ``config``'s decoder with and without a cache.

    Both paths see the same tokens (teacher forcing, so a near-tie in a sampled token
    cannot make them diverge). Uncached: every step reruns the whole prefix and keeps the
    last position's logits. Cached: one masked pass over the first ``prompt_tokens``, then
    one token per step. ``max_abs_diff[t-1]`` compares the logits for token t; beside
    ``max_abs_logit`` it is float32 rounding (the two paths sum in different orders).
    """
    for name, value in (("steps", steps), ("prompt_tokens", prompt_tokens), ("batch", batch)):
        _positive_int(name, value)
    if prompt_tokens > steps:
        raise ValueError(f"prompt_tokens must be at most steps ({steps}), got {prompt_tokens}")
    model = _model(config, seed)
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(config.vocab_size, (batch, steps), generator=generator)
    cache = model.new_cache()
    with torch.inference_mode():
        full = [model(ids[:, :t])[:, -1] for t in range(1, steps + 1)]          # each (B, vocab)
        prompt = model(ids[:, :prompt_tokens], cache)                            # (B, P, vocab)
        cached = [prompt[:, t] for t in range(prompt_tokens)]
        cached += [model(ids[:, t - 1:t], cache)[:, 0] for t in range(prompt_tokens + 1, steps + 1)]
    diffs = [(a - b).abs().max().item() for a, b in zip(cached, full, strict=True)]
    return VariantResult(variant=config.variant, n_heads=config.n_heads, kv_heads=config.kv_heads,
                         head_dim=config.head_dim, layers=config.n_layers, d_model=config.d_model,
                         steps=steps, prompt_tokens=prompt_tokens, batch=batch, max_abs_diff=diffs,
                         max_abs_diff_overall=max(diffs),
                         max_abs_logit=max(row.abs().max().item() for row in full), cache_tokens=len(cache),
                         memory=memory_check(model, cache, batch=batch))


def compare_variants(*, d_model: int = 64, n_layers: int = 2, n_heads: int = 8, kv_heads=None,
                     steps: int = 24, prompt_tokens: int = 8, batch: int = 1,
                     seed: int = 0) -> list[VariantResult]:
    """MHA, GQA and MQA decoders of the same size side by side, one VariantResult each.

    ``kv_heads``: the KV head counts to build; by default n_heads (MHA), n_heads / 4 (GQA,
    when that is a whole number above 1) and 1 (MQA). Each cache holds kv_heads / n_heads
    of the MHA bytes: the query heads of a group read one shared K and V. At the default
    size (d_model 64, 2 layers) the logits are about 0.5 and the paths differ by ~3e-7.
    """
    if kv_heads is None:
        gqa = (n_heads // 4,) if n_heads % 4 == 0 and n_heads // 4 > 1 else ()
        kv_heads = (n_heads, *gqa, 1) if n_heads > 1 else (1,)
    results = []
    for kv in kv_heads:
        config = DecoderConfig(d_model=d_model, n_layers=n_layers, n_heads=n_heads, kv_heads=kv,
                               max_tokens=max(steps, 1))
        results.append(compare_decoder(config, steps=steps, prompt_tokens=prompt_tokens, batch=batch,
                                       seed=seed))
    return results


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
    _positive_int("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    lengths = [_positive_int("tokens", n) for n in lengths]
    if config is None:
        config = DecoderConfig(max_tokens=max(lengths))
    elif max(lengths) > config.max_tokens:
        raise ValueError(f"lengths must be at most max_tokens ({config.max_tokens}), got {max(lengths)}")
    if threads is not None:
        _positive_int("threads", threads)
    model = _model(config, seed)
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
