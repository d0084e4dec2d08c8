"""A small pre-norm decoder with MHA, GQA or MQA attention, cached per layer.

``kv_heads`` = ``n_heads`` is MHA, a divisor is GQA, 1 is MQA: the query heads of a group
read one shared K and V, and only the KV heads are cached. Weights are initialised as
GPT-2's (nanoGPT model.py, _init_weights).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from ..layer import FULL, Layer
from ..model import Model
from .cache import DTYPE_NAMES, DecoderCache, KVCache, attention, positive_int


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
            positive_int(name, getattr(self, name))
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
            dtype = DTYPE_NAMES[self.lm_head.weight.dtype]
        layer = Layer(FULL, kv_heads=c.kv_heads, head_dim_k=c.head_dim, head_dim_v=c.head_dim)
        return Model(name=f"lab-{c.variant.lower()}-{c.n_layers}x{c.d_model}-kv{c.kv_heads}",
                     layers=(layer,) * c.n_layers, hidden_size=c.d_model,
                     num_attention_heads=c.n_heads, dtype=dtype)



def seeded_decoder(config: DecoderConfig, seed: int) -> Decoder:
    """``config``'s decoder in eval mode, weights drawn after ``manual_seed(seed)``; the global
    RNG state is restored afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Decoder(config).eval()

