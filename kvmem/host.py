"""Host memory as a budget, like GPU memory: the host RAM of a node, what each engine pins or maps there, the check.

A plan's host terms (``host_terms``), per node (every GPU of the fit on one node: ``num_gpus`` ranks,
``num_gpus // (tp x pp)`` engine replicas):
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

__all__ = ["NODE_PRESETS", "HostTerm", "HostMemory", "host_memory_bytes", "host_terms", "host_memory"]

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
    binding: bool = True        # counted against host_memory_bytes; False: the engine shrinks it when RAM runs short


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


def host_terms(s, kv_memory: int, placement: dict | None = None) -> list[HostTerm]:
    """The host terms of a kvmem.sizing Setup with ``kv_memory`` bytes of KV per GPU (module docstring)."""
    replicas = max(s.num_gpus // (s.tp * s.pp), 1)
    engine = s.engine
    terms: list[HostTerm] = []
    opts = s.sizing
    if engine == "vllm" and opts.get("kv_offloading_size") is not None:
        from .engines.vllm.offload import BACKENDS, lmcache_server_tier, native_tier
        backend = opts.get("kv_offloading_backend", "native")
        if backend not in BACKENDS:
            raise ValueError(f"kv_offloading_backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if backend == "native":
            tier = native_tier(s.model, kv_offloading_size=opts["kv_offloading_size"], max_model_len=s.context,
                               tp=s.tp, pp=s.pp, kv_dtype=s.kv_dtype, **s.engine_options)
        else:    # vLLM 0.33.0 starts LMCache's multi-process server: its --l1-size-gb sizes the tier
            if opts.get("lmcache_l1_size_gb") is None:
                raise ValueError("kv_offloading_backend 'lmcache': vLLM 0.33.0 hands the KV to the LMCache "
                                 "server, whose --l1-size-gb sizes the host tier (kvmem.engines.vllm.offload); "
                                 "give lmcache_l1_size_gb")
            tier = lmcache_server_tier(opts["lmcache_l1_size_gb"])
        terms.append(HostTerm(name=f"vLLM KV offload ({backend})", bytes_per_node=tier.host_bytes_per_node * replicas,
                              bytes_per_rank=tier.host_bytes_per_rank, tokens=tier.tokens,
                              source=tier.source + " (kvmem.engines.vllm.offload)"))
    if engine == "sglang" and opts.get("enable_hierarchical_cache"):
        from .engines.sglang.hicache import model_hicache_tier
        hicache = {name: opts[name] for name in ("hicache_ratio", "hicache_size", "hicache_host_memory_fraction")
                   if opts.get(name) is not None}
        bound = opts.get("host_memory_bytes")
        tier = model_hicache_tier(s.model, kv_memory=kv_memory, tp=s.tp, pp=s.pp, kv_dtype=s.kv_dtype,
                                  ranks_per_node=s.tp * s.pp * replicas,
                                  host_available_bytes=None if bound is None else host_memory_bytes(bound), **hicache)
        terms.append(HostTerm(name="SGLang HiCache host pool", bytes_per_node=tier.host_bytes_per_node,
                              bytes_per_rank=tier.host_bytes_per_rank, tokens=tier.tokens,
                              source=tier.source + " (kvmem.engines.sglang.hicache)"))
    if placement and placement.get("host_bytes"):
        terms.append(HostTerm(name="llama.cpp tensors in host RAM", bytes_per_node=placement["host_bytes"],
                              bytes_per_rank=placement["host_bytes"],
                              source="the placement's layers and tensors on the CPU (kvmem.engines.llamacpp.verdict)"))
    if engine == "llama.cpp":
        from .engines.llamacpp.checkpoints import host_terms as llamacpp_terms
        terms.extend(llamacpp_terms(s))
    return terms


def host_memory(s, kv_memory: int, placement: dict | None = None) -> HostMemory | None:
    """The host side of a fit, checked against ``host_memory_bytes`` where given; None: no term and no bound."""
    bound = s.sizing.get("host_memory_bytes")
    try:
        terms = host_terms(s, kv_memory, placement)
    except ValueError as error:
        if bound is None or "Not enough host memory" not in str(error):
            raise
        limit = host_memory_bytes(bound)
        return HostMemory(terms=(), total_bytes=0, host_memory_bytes=limit, refusal=str(error))
    if not terms and bound is None:
        return None
    limit = None if bound is None else host_memory_bytes(bound)
    total = sum(t.bytes_per_node for t in terms if t.binding)
    refusal = None
    if limit is not None and total > limit:
        parts = "; ".join(f"{t.name} {format_bytes(t.bytes_per_node)} ({t.bytes_per_node:,} B; {t.source})"
                          for t in terms if t.binding)
        refusal = (f"host RAM: the plan keeps {format_bytes(total)} ({total:,} B) in host memory per node, more "
                   f"than host_memory_bytes {format_bytes(limit)} ({limit:,} B): {parts}")
    return HostMemory(terms=tuple(terms), total_bytes=total, host_memory_bytes=limit, refusal=refusal)
