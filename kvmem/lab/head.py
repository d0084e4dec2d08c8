"""The seed's toy: one attention head run with and without a KV cache, step by step.

Source: the seed notebook's "Toy Implementation" (shared/seed/000_9eb41768818c26b3.txt):
d_model=12, d_head=6, 5 tokens, seed 42. Built in the seed's order (``torch.manual_seed(42)``;
five ``torch.rand(1, 12)`` embeddings; ``torch.manual_seed(42)``; Linear q, k, v),
``compare_single_head`` reproduces the seed's printed numbers, e.g. step-1 output
[-0.006, -0.687, -0.147, 0.639, -0.314, 0.148] and the step-2 weights [0.499, 0.501].
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from ..layer import FULL, Layer
from ..model import Model
from .cache import KVCache, attention, positive_int
from .memory import MemoryCheck, memory_check


class AttentionHead(nn.Module):
    """One attention head: Linear projections to q, k, v (created in that order) and attention."""

    n_layers = 1   # for memory_check: one layer, one KV head
    kv_heads = 1

    def __init__(self, d_model: int, d_head: int):
        super().__init__()
        self.d_model, self.d_head = positive_int("d_model", d_model), positive_int("d_head", d_head)
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
class HeadComparison:
    """The seed's single-head experiment, step by step (step t = t tokens seen).

    outputs_uncached[t-1]  the (t x d_head) output of rerunning all t tokens (causal mask)
    outputs_cached[t-1]    the newest token's d_head row from the cached path
    weights_uncached[t-1]  the growing (t x t) attention matrix
    weights_cached[t-1]    the newest token's row of t weights
    max_abs_diff[t-1]      max |cached row - last uncached row|, outputs and weights together
    past_drift_steps[t-1]  max change of the t - 1 uncached rows already computed at step t - 1,
                           from step t - 1 to step t (None at step 1: no earlier rows); 0 with
                           the causal mask, which is why past K/V can be kept
    past_drift             the largest of them (0.0 with a single step)
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
    past_drift_steps: list = field(default_factory=list)

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
        positive_int(name, value)
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
    drift_steps = [None] + [(out_full[i][:-1] - out_full[i - 1]).abs().max().item() for i in range(1, steps)]
    drift = max(drift_steps[1:], default=0.0)
    return HeadComparison(
        d_model=d_model, d_head=d_head, steps=steps, prompt_tokens=prompt_tokens, causal=causal,
        outputs_uncached=[o.tolist() for o in out_full], outputs_cached=[o.tolist() for o in out_rows],
        weights_uncached=[w.tolist() for w in w_full], weights_cached=[w.tolist() for w in w_rows],
        max_abs_diff=diffs, max_abs_diff_overall=max(diffs), past_drift=drift, cache_tokens=cached_tokens,
        memory=memory_check(head, cache), past_drift_steps=drift_steps)

