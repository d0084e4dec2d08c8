"""The weight record: a model's weight bytes in one format, per group, and what one device holds.

Per device: tensor parallelism splits every group (vocab-parallel embedding and lm_head,
column/row-parallel linears, experts by TP or EP). An engine that replicates (its
SizingRules.replicates_kv_weights, with its source) gets it added back: K/V projections when tp
exceeds the KV heads (one head per rank) and MLA's q_a/kv_a projections.
Norms and routers, replicated too, are small and treated as split. Pipeline parallelism gives
each stage its layers' share of the decoder weights (layers taken as equal in size), the input
embedding to the first stage and the lm_head to the last (both, when tied and pp > 1).

Active bytes (read per decoded token, for the bandwidth bound): dense + lm_head (the tied table
when tied) + the experts a step touches: with b sequences routed uniformly, a layer reads
E x (1 - (1 - k/E)^b) distinct experts on average; k of E at b = 1.

"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from fractions import Fraction

from ..parallel import pp_stages, replicated_excess
from ..units import cdiv


@dataclass(frozen=True)
class WeightLayout:
    """What parallelism and decode reads need to know of the weights beyond their bytes."""

    n_layers: int
    experts: int = 0                 # routed experts (0: dense)
    top_k: int = 0                   # experts each token reads
    expert_params: int = 0
    dense_params: int = 0
    tied: bool = True
    dense_rate: Fraction = Fraction(2)                         # bytes per dense parameter
    kv_proj: tuple[tuple[int, int], ...] = ()                  # per layer (K/V params per KV head, KV heads)
    mla_replicated: int = 0          # MLA down-projection params every tp rank keeps whole
    by_dtype: dict | None = None     # bytes per tensor dtype, when read from a checkpoint's headers


@dataclass(frozen=True)
class Weights:
    """A model's weight bytes in one format (one copy of the model; ints unless named)."""

    model: str
    weight_dtype: str
    params_total: int
    embedding_bytes: int
    lm_head_bytes: int
    dense_bytes: int
    expert_bytes: int
    notes: tuple[str, ...] = ()
    layout: WeightLayout = field(default_factory=lambda: WeightLayout(n_layers=1), compare=False, repr=False)
    source: str = "formula"           # "formula", or "safetensors" / "gguf" when read from headers

    @property
    def details(self) -> dict:
        """The layout as plain data (the keys it had as a dict)."""
        data = asdict(self.layout)
        if data["by_dtype"] is None:
            del data["by_dtype"]
        return data

    @property
    def total_bytes(self) -> int:
        return self.embedding_bytes + self.lm_head_bytes + self.dense_bytes + self.expert_bytes

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.total_bytes / self.params_total

    def active_bytes(self, batch: int = 1) -> int:
        """Weight bytes one decode step reads for ``batch`` sequences (see the module docstring)."""
        head = self.lm_head_bytes or self.embedding_bytes
        experts, top_k = self.layout.experts, self.layout.top_k
        if not self.expert_bytes or not experts:
            return self.dense_bytes + head
        touched = 1 - (1 - Fraction(top_k, experts)) ** min(batch, 4096)
        return self.dense_bytes + head + round(self.expert_bytes * touched)

    def per_device(self, *, tp: int = 1, pp: int = 1, replicated: bool = False) -> int:
        """Bytes on the most loaded device with ``tp``-way tensor and ``pp``-way pipeline parallelism;
        ``replicated``: the engine keeps whole K/V heads and MLA down-projections on every rank."""
        n_layers = self.layout.n_layers
        decoder = self.dense_bytes + self.expert_bytes
        stages = pp_stages(n_layers, pp)
        largest = 0
        for i, stage in enumerate(stages):
            size = decoder * len(stage) // n_layers
            if i == 0:
                size += self.embedding_bytes
            if i == pp - 1:
                size += self.lm_head_bytes or (self.embedding_bytes if pp > 1 else 0)
            extra = self._replicated_extra(tp) * len(stage) // n_layers if replicated else 0
            largest = max(largest, cdiv(size, tp) + extra)
        return largest

    def _replicated_extra(self, tp: int) -> int:
        """Bytes per rank above an even split: replicated K/V heads and MLA down-projections."""
        if tp == 1:
            return 0
        rate = self.layout.dense_rate
        extra = Fraction(0)
        for params_per_head, kv_heads in self.layout.kv_proj:
            extra += params_per_head * replicated_excess(kv_heads, tp)
        extra += self.layout.mla_replicated * replicated_excess(1, tp)
        return int(extra * rate)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("layout")
        data["notes"] = list(self.notes)
        data.update(total_bytes=self.total_bytes, bits_per_weight=self.bits_per_weight,
                    active_bytes=self.active_bytes())
        return data
