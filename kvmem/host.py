"""Host memory as a budget, like GPU memory: the host RAM of a node, what each engine pins or maps there, the check.

A plan's host terms, per node (every GPU of the fit on one node: ``num_gpus`` ranks, ``num_gpus // (tp x pp)``
engine replicas), each engine's own (SizingRules.host_terms in its package):
    vLLM     --kv-offloading-size GiB, native: one /dev/shm region per engine (kvmem.engines.vllm.offload);
             lmcache: the LMCache server's --l1-size-gb for the node (sizing option lmcache_l1_size_gb)
    SGLang   --enable-hierarchical-cache: the HiCache host pool per rank (kvmem.engines.sglang.hicache)
    llama.cpp  the tensors its placement keeps in host RAM (kvmem.engines.llamacpp.verdict), the context
             checkpoints and the prompt cache (kvmem.engines.llamacpp.checkpoints)
``host_memory_bytes`` (a sizing option of every engine; ``kvmem fit --host-memory``) bounds the sum of the
binding terms: a plan above it does not fit, and the refusal names each term and the numbers. A term the
engine shrinks itself when RAM runs short (llama.cpp's prompt cache) is reported, not counted. Not given,
the terms are reported and nothing is checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .records import Record
from .units import format_bytes, parse_bytes

__all__ = ["NODE_PRESETS", "HostTerm", "HostInput", "HostMemory", "host_memory_bytes", "host_terms", "host_memory"]

GIB = 1 << 30

# Host RAM of common GPU nodes, with the vendor's own figure (its DIMMs: 64 GiB each).
NODE_PRESETS = {
    "dgx-h100": (2048 * GIB, "NVIDIA DGX H100 user guide, hardware overview: 2 TB system memory, 32 x 64 GB DIMMs"),
    "dgx-h200": (2048 * GIB, "NVIDIA DGX H200 datasheet: 2 TB system memory"),
    "dgx-a100-640gb": (2048 * GIB, "NVIDIA DGX A100 datasheet (640 GB system): 2 TB system memory"),
    "dgx-a100-320gb": (1024 * GIB, "NVIDIA DGX A100 datasheet (320 GB system): 1 TB system memory"),
}
_BANDWIDTH = re.compile(r"/s\s*$", re.IGNORECASE)


def host_memory_bytes(value) -> int:
    """Host RAM of one node: bytes (int), a size ('1.5TiB', '512GB') or a preset of NODE_PRESETS."""
    if isinstance(value, str):
        key = value.strip().lower()
        if key in NODE_PRESETS:
            return NODE_PRESETS[key][0]
        if _BANDWIDTH.search(key):
            raise ValueError(f"host memory is a size of RAM such as '512GiB' or a node preset "
                             f"({', '.join(NODE_PRESETS)}), got a bandwidth {value!r}")
    try:
        size = parse_bytes(value)
    except ValueError:
        raise ValueError(f"host memory must be a size such as '512GiB', bytes, or a node preset "
                         f"({', '.join(NODE_PRESETS)}), got {value!r}") from None
    if size <= 0:
        raise ValueError(f"host memory must be positive, got {value!r}")
    return size


@dataclass(frozen=True)
class HostTerm(Record):
    """One thing a plan keeps in host RAM: its bytes per node, what sizes it, the tokens it holds."""

    name: str
    bytes_per_node: int
    bytes_per_rank: int
    source: str                 # the flag or rule that sizes it, with the engine file
    tokens: int | None = None   # tokens a KV tier holds (None: not a KV tier)
    binding: bool = True        # counted against host_memory_bytes; False: shrunk by the engine, or not sized


@dataclass(frozen=True)
class HostMemory(Record):
    """The host side of a fit: its terms, their sum per node, the bound (None: not given), why it does not fit."""

    terms: tuple
    total_bytes: int
    host_memory_bytes: int | None
    refusal: str | None

    def to_dict(self) -> dict:
        return {"terms": [t.to_dict() for t in self.terms], "total_bytes": self.total_bytes,
                "host_memory_bytes": self.host_memory_bytes, "refusal": self.refusal}


@dataclass(frozen=True)
class HostInput(Record):
    """One host-RAM setting an engine takes, as the Fit page asks for it (SizingRules.host_inputs):
    its sizing option, the label (the engine's flag), ``kind`` "float" / "int" / "toggle", the value
    that means "not set", and the toggle it sits under (None: always shown)."""

    option: str
    label: str
    kind: str
    unset: float | int | bool
    help: str = ""
    under: str | None = None
    maximum: float = float(1 << 20)


def host_terms(s, kv_memory: int, placement: dict | None = None) -> list[HostTerm]:
    """The host terms of a kvmem.sizing Setup with ``kv_memory`` bytes of KV per GPU: its engine's own
    (SizingRules.host_terms, in the engine's package; module docstring), none for an engine without."""
    rule = s.rules.host_terms
    return [] if rule is None else list(rule(s, kv_memory, placement))


def host_memory(s, kv_memory: int, placement: dict | None = None) -> HostMemory | None:
    """The host side of a fit, checked against ``host_memory_bytes`` where given; None: no term and no bound."""
    limit = s.given.host_memory_bytes
    try:
        terms = host_terms(s, kv_memory, placement)
    except ValueError as error:
        if limit is None or "Not enough host memory" not in str(error):
            raise
        return HostMemory(terms=(), total_bytes=0, host_memory_bytes=limit, refusal=str(error))
    if not terms and limit is None:
        return None
    total = sum(t.bytes_per_node for t in terms if t.binding)
    refusal = None
    if limit is not None and total > limit:
        parts = "; ".join(f"{t.name} {format_bytes(t.bytes_per_node)} ({t.bytes_per_node:,} B; {t.source})"
                          for t in terms if t.binding)
        refusal = (f"host RAM: the plan keeps {format_bytes(total)} ({total:,} B) in host memory per node, more "
                   f"than host_memory_bytes {format_bytes(limit)} ({limit:,} B): {parts}")
    return HostMemory(terms=tuple(terms), total_bytes=total, host_memory_bytes=limit, refusal=refusal)
