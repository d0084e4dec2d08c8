"""MHA, GQA and MQA decoders with and without a KV cache: same logits, fewer cached bytes.

Each variant's cached and uncached logits per step, and its cache's bytes against the
seed's formula and kvmem.estimate (memory.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .cache import positive_int
from .decoder import DecoderConfig, seeded_decoder
from .memory import MemoryCheck, memory_check


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
        positive_int(name, value)
    if prompt_tokens > steps:
        raise ValueError(f"prompt_tokens must be at most steps ({steps}), got {prompt_tokens}")
    model = seeded_decoder(config, seed)
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

