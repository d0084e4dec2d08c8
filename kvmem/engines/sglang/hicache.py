"""SGLang's HiCache host pool (``--enable-hierarchical-cache``): the tokens it mirrors in host RAM, its bytes.

The rule (SGLang 0.5.23, python/sglang/srt/...):
    --hicache-ratio unset: 2.0 ("cache" mode; 1.2 with --hicache-host-memory-mode buffer_only), and then
        --hicache-host-memory-fraction (0.8) auto-sizes it; a ratio or --hicache-size given turns that off
                        arg_groups/hicache_hook.py#L100-L126, arg_groups/fields/memory.py#L109-L120
    size = int(hicache_size x 1e9 // size_per_token)    when --hicache-size (GB, 10**9) > 0
         = int(device_capacity_tokens x ratio)          otherwise
    page_num = size // page_size + 1 (one padding page); size = page_num x page_size
                                                  mem_cache/pool_host/base.py#L220-L231 (HostKVCache.__init__)
    size_per_token: MHA (head_dim + v_head_dim) x kv heads per rank x layers x dtype bytes
                    (pool_host/mha.py#L290-L296), MLA (kv_lora_rank + qk_rope_head_dim) x layers x dtype bytes
                    (pool_host/mla.py#L195-L197): the device pool's cell, per rank
    host bytes per rank = size x size_per_token; more than (available host RAM - 10 GiB) // ranks on the host
        is refused at start-up: "Not enough host memory available. Requesting X GB but only have Y GB free."
                                                  pool_host/base.py#L28, #L84-L108, #L249-L257
    auto-sizing: budget = int((available - 10 GiB) // ranks x fraction);
        ratio = min(requested, budget x (1 - 0.05) / device pool bytes)   mem_cache/hicache_auto_size.py#L31-L123
A ratio of 2.5 on a node whose ranks hold 240 GB of KV each pins 600 GB per rank: on 8 ranks 4.8 TB
(SemiAnalysisAI/InferenceX#2777).
"""

from __future__ import annotations

from ...host import HostInput, HostTerm
from ..vllm.offload import OffloadTier
from .details import SglangCapacityDetails

GIB = 1 << 30
HOST_RESERVE_BYTES = 10 * GIB            # pool_host/base.py#L28 HICACHE_HOST_MEMORY_RESERVE_BYTES
ALLOCATION_SLACK = 0.05                  # hicache_auto_size.py#L33
DEFAULT_RATIO = {"cache": 2.0, "buffer_only": 1.2}      # hicache_hook.py#L119-L122
DEFAULT_FRACTION = 0.8                   # arg_groups/fields/memory.py#L117-L120


def _positive(name: str, value, *, upper: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or \
            (upper is not None and value > upper):
        bound = f" at most {upper:g}" if upper is not None else ""
        raise ValueError(f"{name} must be a positive number{bound}, got {value!r}")
    return float(value)


def hicache_tier(*, device_tokens: int, size_per_token: int, page_size: int, device_pool_bytes: int,
                 hicache_ratio=None, hicache_size=0, hicache_host_memory_fraction=DEFAULT_FRACTION,
                 hicache_host_memory_mode="cache", host_available_bytes: int | None = None,
                 ranks_per_node: int = 1) -> OffloadTier:
    """SGLang's HiCache host pool of one rank beside a device pool of ``device_tokens`` tokens (module docstring).

    ``host_available_bytes``: the node's free host RAM (psutil's available, cgroup-bounded); None: unknown,
    so neither auto-sizing nor the start-up check can be run (said in the notes).
    """
    if hicache_host_memory_mode not in DEFAULT_RATIO:
        raise ValueError(f"hicache_host_memory_mode must be 'cache' or 'buffer_only', got {hicache_host_memory_mode!r}")
    if isinstance(hicache_size, bool) or not isinstance(hicache_size, (int, float)) or hicache_size < 0:
        raise ValueError(f"hicache_size must be a number of GB (10**9 bytes), 0 for none, got {hicache_size!r}")
    explicit = hicache_ratio is not None or hicache_size > 0
    fraction = None if explicit else hicache_host_memory_fraction
    if fraction is not None:
        # hicache_hook.py#L115-L117
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ValueError("--hicache-host-memory-fraction must be in (0, 1].")
    ratio = DEFAULT_RATIO[hicache_host_memory_mode] if hicache_ratio is None else \
        _positive("hicache_ratio", hicache_ratio)
    notes = []
    available = None if host_available_bytes is None else \
        (host_available_bytes - HOST_RESERVE_BYTES) // ranks_per_node
    if fraction is not None:
        if host_available_bytes is None:
            notes.append(f"ratio {ratio:g} as asked: SGLang lowers it until the pools fit "
                         f"{fraction:g} of the host's free RAM, which kvmem was not given (--host-memory)")
        else:
            budget = int(available * fraction)     # type: ignore[operator]  # host_available_bytes given: available set
            requested = ratio
            ratio = min(requested, budget * (1 - ALLOCATION_SLACK) / device_pool_bytes)
            if ratio <= 0:       # hicache_auto_size.py#L108-L112
                raise ValueError("No host memory is left for HiCache after the 10 GiB reserve; "
                                 "set --hicache-ratio or --hicache-size explicitly.")
            available = budget
            notes.append(f"HiCache auto-sizing: ratio {requested:.3f} -> {ratio:.3f}; "
                         f"{budget / GIB:.1f} GiB host memory per rank (fraction {fraction:.2f}, "
                         f"{ranks_per_node} ranks on this host), host pools {device_pool_bytes * ratio / GIB:.1f} GiB.")
    if hicache_size > 0:
        size = int(hicache_size * 1e9 // size_per_token)
        source = f"--hicache-size {hicache_size:g} (GB per rank)"
    else:
        size = int(device_tokens * ratio)
        source = f"--hicache-ratio {ratio:g} (x the device pool's {device_tokens:,} tokens)"
    pages = size // page_size + 1
    size = pages * page_size
    requested_bytes = size * size_per_token
    if available is not None and requested_bytes > available:       # pool_host/base.py#L249-L257
        raise ValueError(f"SGLang refuses to start: HiCache pins {requested_bytes:,} B per rank "
                         f"({size:,} tokens x {size_per_token:,} B), {requested_bytes * ranks_per_node:,} B on the "
                         f"node's {ranks_per_node} rank(s), more than the {available:,} B it may take "
                         f"(free host RAM less 10 GiB, per rank): 'Not enough host memory available. Requesting "
                         f"{requested_bytes / 1e9:.2f} GB but only have {available / 1e9:.2f} GB free. Please reduce "
                         "the size of the hierarchical cache.'")
    return OffloadTier(engine="sglang", backend="hicache", tokens=size, chunks=pages,
                       chunk_bytes=page_size * size_per_token, host_bytes_per_rank=requested_bytes,
                       host_bytes_per_node=requested_bytes * ranks_per_node, ranks=ranks_per_node, source=source,
                       notes=tuple(notes))


def hicache_log_line(tier: OffloadTier) -> str:
    """The line SGLang prints as it allocates the pool (pool_host/base.py#L273-L278; GB = 1e9 bytes)."""
    return (f"Allocating kv hierarchical KV host pool: {tier.tokens} tokens, "
            f"{tier.host_bytes_per_rank / 1e9:.2f} GB host memory.")


def model_hicache_tier(model, *, kv_memory: int, tp: int = 1, pp: int = 1, kv_dtype="auto", ranks_per_node=None,
                       host_available_bytes=None, **hicache) -> OffloadTier:
    """hicache_tier for ``model`` beside the device pool(s) SGLang makes of ``kv_memory`` bytes per GPU.

    A hybrid sliding-window model's full and SWA pools each get a host pool of their own (SGLang 0.5.23
    hybrid_pool_assembler.py#L365-L435 build_hybrid_swa_group, the statically partitioned pools of the
    default --enable-unified-memory off: build_kv_host_pool per pool, #L200-L236): each ``ratio`` x its own
    device tokens, or --hicache-size split by the pools' device bytes (_split_hicache_size, #L239-L254); the
    second is checked against the RAM the first left. The tier's tokens are the full pool's.
    """
    from ...engines import capacity
    cap = capacity(model, engine="sglang", kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp,
                   max_model_len=None)
    d: SglangCapacityDetails = cap.details     # type: ignore[assignment]  # engine="sglang": its details
    ranks = ranks_per_node or tp * pp
    roles = sorted(p["role"] for p in d.pools)
    if d.layout not in ("mha", "mla") or roles not in (["full"], ["full", "swa"]) or d.max_mamba_cache_size:
        kinds = ", ".join(f"{p['role']} {p['layout']}" for p in d.pools) + \
            (f", {d.max_mamba_cache_size} state slots" if d.max_mamba_cache_size else "")
        raise ValueError(f"{model.name}: SGLang builds its HiCache host pools for these device pools ({kinds}) in "
                         "mem_cache/hybrid_cache/hybrid_pool_assembler.py (the Mamba and unified-memory paths); "
                         "kvmem sizes the MHA, MLA and hybrid sliding-window host pools only")
    pools = sorted(d.pools, key=lambda p: p["role"])          # full first, then swa
    device_bytes = [p["k_bytes"] + p["v_bytes"] for p in pools]
    size_gb = hicache.pop("hicache_size", 0) or 0
    tiers, available = [], host_available_bytes
    for pool, nbytes in zip(pools, device_bytes, strict=True):
        per_token = nbytes // (pool["num_tokens"] + pool["page_size"])
        share = size_gb * nbytes / sum(device_bytes) if size_gb else 0      # _split_hicache_size: GB as a float
        tier = hicache_tier(device_tokens=pool["num_tokens"], size_per_token=per_token, page_size=pool["page_size"],
                            device_pool_bytes=sum(device_bytes), host_available_bytes=available,
                            ranks_per_node=ranks, hicache_size=share, **hicache)
        tiers.append(tier)
        if available is not None:
            available -= tier.host_bytes_per_node
    if len(tiers) == 1:
        return tiers[0]
    full, swa = tiers
    return OffloadTier(engine="sglang", backend="hicache", tokens=full.tokens, chunks=full.chunks + swa.chunks,
                       chunk_bytes=full.chunk_bytes,
                       host_bytes_per_rank=full.host_bytes_per_rank + swa.host_bytes_per_rank,
                       host_bytes_per_node=full.host_bytes_per_node + swa.host_bytes_per_node, ranks=ranks,
                       source=f"{full.source}; the SWA pool's {swa.tokens:,} tokens beside it",
                       notes=full.notes + (f"full host pool {full.tokens:,} tokens, {full.host_bytes_per_rank:,} B; "
                                           f"SWA host pool {swa.tokens:,} tokens, {swa.host_bytes_per_rank:,} B",))


def host_terms(s, kv_memory: int, _placement=None) -> list:
    """SGLang's host terms for a kvmem.sizing Setup (SizingRules.host_terms; kvmem.host): the HiCache host pool
    of --enable-hierarchical-cache, per rank and for the node's ranks; none without it."""
    opts = s.sizing
    if not opts.get("enable_hierarchical_cache"):
        return []
    replicas = max(s.num_gpus // (s.tp * s.pp), 1)
    hicache = {name: opts[name] for name in ("hicache_ratio", "hicache_size", "hicache_host_memory_fraction")
               if opts.get(name) is not None}
    tier = model_hicache_tier(s.model, kv_memory=kv_memory, tp=s.tp, pp=s.pp, kv_dtype=s.kv_dtype,
                              ranks_per_node=s.tp * s.pp * replicas,
                              host_available_bytes=s.given.host_memory_bytes, **hicache)
    return [HostTerm(name="SGLang HiCache host pool", bytes_per_node=tier.host_bytes_per_node,
                     bytes_per_rank=tier.host_bytes_per_rank, tokens=tier.tokens,
                     source=tier.source + " (kvmem.engines.sglang.hicache)")]


HOST_INPUTS = (HostInput("enable_hierarchical_cache", "--enable-hierarchical-cache", "toggle", False),
               HostInput("hicache_ratio", "--hicache-ratio (0: SGLang sizes it)", "float", 0.0,
                         under="enable_hierarchical_cache", maximum=100.0))
