"""vLLM's KV offload tier in host RAM: ``--kv-offloading-size`` GiB with ``--kv-offloading-backend native``.

The rule (vLLM 0.33.0):
    cpu_bytes_to_use = kv_offloading_size x 2**30, a total across the ranks of one engine
                                                  vllm/config/vllm.py#L1167-L1175
    worker_kv_bytes_per_block = one GPU block of every layer of the rank (the pool's tensor bytes / num_blocks)
                                                  distributed/kv_transfer/kv_connector/v1/offloading/config.py#L175-L189
    copies = 1 for a pure-MLA model on tp > 1 ranks of one node (every rank holds the same latent), else
             world_size = tp x pp               offloading/config.py#L196-L209, v1/kv_offload/cpu/spec.py#L110-L112
    chunk = round_up(worker_kv_bytes_per_block x copies x blocks_per_chunk, 4096 (the host page))
    num_chunks = cpu_bytes_to_use // chunk        v1/kv_offload/cpu/spec.py#L111-L130
    host bytes = num_chunks x chunk: ONE shared region in /dev/shm for the node (every rank maps it,
             each using its slot of a row)        v1/kv_offload/cpu/shared_offload_region.py#L120-L183
    tokens at max_model_len = num_chunks x max_model_len // chunks_per_request, a request taking
             cdiv(max_model_len, tokens per chunk) chunks in each group, a sliding window's group at most
             max(cdiv(window, c), cdiv(window - 1, c))   v1/kv_offload/cpu/common.py#L59-L72,
                                                          offloading/config.py#L61-L84
A hybrid model pays for every group: each (block hash, group) key takes a whole chunk row (vllm#56871),
so gpt-oss's two groups halve the tokens a GiB holds.

``--kv-offloading-backend lmcache`` does not pass the size on: vLLM 0.33.0 starts the LMCacheMPConnector and
the standalone LMCache server's own ``max_local_cpu_size`` decides (vllm/config/vllm.py#L1176-L1182):
that tier is ``lmcache_tier``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...host import HostInput, HostTerm
from ...model import MLA, NONE, Model
from ...records import Record
from ...units import cdiv
from .entry import make_plan
from .options import check_options
from .pool import block_bytes, stage_units

GIB = 1 << 30
HOST_PAGE_BYTES = 4096     # mmap.PAGESIZE on x86-64 / aarch64 4k kernels (shared_offload_region.py#L105)
BACKENDS = ("native", "lmcache")
# LMCache (lmcache 0.5.6, requirements-oracles.txt; its config module imports on the CPU, the rest needs its
# compute backend): lmcache/v1/config.py#L90 chunk_size 256 tokens, #L96 max_local_cpu_size 5.0 "GB" per
# worker of the in-process connector (LMCacheConnectorV1), the GB being 2**30: lmcache/v1/cache_engine.py#L2104-L2108
# int(max_local_cpu_size * 1024**3); a chunk is kv_size x layers x chunk_size x heads x head_size x dtype bytes of
# one rank, aligned to 4 KiB (lmcache/v1/storage_backend/local_cpu_backend.py#L885-L945,
# memory_management.py#L1338). vLLM 0.33.0's --kv-offloading-backend lmcache starts the multi-process connector
# instead, whose standalone server holds one L1 of --l1-size-gb for the node, int(l1_size_gb * (1 << 30)) B
# (lmcache/v1/distributed/config.py#L805-L809, #L1086-L1118).
LMCACHE_CHUNK_TOKENS = 256
LMCACHE_CPU_GIB = 5.0


@dataclass(frozen=True)
class OffloadTier(Record):
    """One host tier: what it holds and the host RAM it pins, per rank and per node."""

    engine: str
    backend: str
    tokens: int                 # tokens the tier holds (at max_model_len per request, as the engine counts)
    chunks: int                 # its slots (vLLM chunks, LMCache chunks, SGLang pages)
    chunk_bytes: int            # one slot, all ranks' shares and padding included
    host_bytes_per_rank: int
    host_bytes_per_node: int
    ranks: int                  # ranks of the engine on the node
    source: str                 # the flag that sizes it
    notes: tuple = ()


def _gib(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 2**30:
        raise ValueError(f"{name} must be a positive number of GiB, got {value!r}")
    return float(value)


def native_tier(model: Model, *, kv_offloading_size, max_model_len: int, tp: int = 1, pp: int = 1,
                kv_dtype="auto", blocks_per_chunk: int = 1, **options) -> OffloadTier:
    """vLLM 0.33.0's native CPU tier for ``--kv-offloading-size`` GiB (the module docstring)."""
    size = _gib("kv_offloading_size", kv_offloading_size)
    if isinstance(blocks_per_chunk, bool) or not isinstance(blocks_per_chunk, int) or blocks_per_chunk < 1:
        # offloading/config.py#L131-L135
        raise ValueError(f"'blocks_per_chunk' must be greater than 0, got {blocks_per_chunk!r}")
    opts = check_options(options, model)
    if opts.release is None or opts.release < (0, 33):
        raise ValueError(f"kvmem sizes vLLM's CPU offload tier by vLLM 0.33.0's rules; version {opts.version!r} "
                         "is older (its connector sized the buffer otherwise: vllm PR #50443)")
    plan = make_plan(model, kv_dtype, tp, pp, opts)
    kinds = {spec.kind for _, spec in plan.units}
    if kinds - {"full", "mla", "sliding", "chunked"}:
        # build_offloading_config asserts tokens_per_block % tokens_per_hash == 0 (offloading/config.py#L113-L119):
        # a Mamba group's block is the whole state, which needs --enable-prefix-caching's alignment
        raise ValueError(f"{model.name}: vLLM 0.33.0's CPU offload of {sorted(kinds - {'full', 'mla'})} groups "
                         "needs the Mamba block aligned by --enable-prefix-caching (offloading/config.py#L113-L119); "
                         "kvmem sizes the tier for attention groups only")
    cpu_bytes = int(size * GIB)                       # kv_offloading_size * (1 << 30), a float then int()
    world = tp * pp
    members = stage_units(plan, pp)
    per_block = max(block_bytes(plan, m) for m in members if m)
    mla_only = all(layer.kind == MLA for layer in model.layers if layer.kind != NONE)
    replicated = mla_only and tp > 1 and pp == 1     # offloading/config.py#L196-L209 (single node, mp backend)
    copies = 1 if replicated else world
    chunk = cdiv(per_block * copies * blocks_per_chunk, HOST_PAGE_BYTES) * HOST_PAGE_BYTES
    chunks = cpu_bytes // chunk
    tokens_per_chunk = plan.block_size * blocks_per_chunk
    per_request = 0
    for group in plan.groups:
        spec = plan.units[group[0]][1]
        need = cdiv(max_model_len, tokens_per_chunk)
        if spec.kind == "sliding":
            need = min(need, max(cdiv(spec.window, tokens_per_chunk), cdiv(spec.window - 1, tokens_per_chunk)))
        elif spec.kind == "chunked":
            need = min(need, cdiv(spec.window, tokens_per_chunk))
        per_request += need
    tokens = chunks * max_model_len // per_request
    notes = [f"{len(plan.groups)} KV cache groups: each (block, group) takes a whole chunk row (vllm#56871)"] \
        if len(plan.groups) > 1 else []
    if replicated:
        notes.append("pure MLA on tp > 1: one copy of the latent for all ranks (replicated layout)")
    region = chunks * chunk
    per_rank = region if replicated else chunks * per_block * blocks_per_chunk
    return OffloadTier(engine="vllm", backend="native", tokens=tokens, chunks=chunks, chunk_bytes=chunk,
                       host_bytes_per_rank=per_rank, host_bytes_per_node=region, ranks=world,
                       source=f"--kv-offloading-size {kv_offloading_size:g} (GiB, all ranks together)",
                       notes=tuple(notes))


def lmcache_tier(bytes_per_token_per_rank: int, *, max_local_cpu_size=LMCACHE_CPU_GIB, ranks: int = 1,
                 chunk_size: int = LMCACHE_CHUNK_TOKENS) -> OffloadTier:
    """LMCache's local CPU backend: ``max_local_cpu_size`` GiB pinned per rank, in chunks of ``chunk_size``
    tokens of this rank's KV, each aligned to 4 KiB (the defaults' comment above)."""
    size = _gib("max_local_cpu_size", max_local_cpu_size)
    per_rank = int(size * GIB)
    chunk = cdiv(bytes_per_token_per_rank * chunk_size, HOST_PAGE_BYTES) * HOST_PAGE_BYTES
    chunks = per_rank // chunk
    return OffloadTier(engine="vllm", backend="lmcache", tokens=chunks * chunk_size, chunks=chunks,
                       chunk_bytes=chunk, host_bytes_per_rank=per_rank, host_bytes_per_node=per_rank * ranks,
                       ranks=ranks, source=f"LMCache max_local_cpu_size {max_local_cpu_size:g} (GiB per rank)")


def lmcache_server_tier(l1_size_gb) -> OffloadTier:
    """The LMCache multi-process server's L1 (vLLM 0.33.0 --kv-offloading-backend lmcache): --l1-size-gb x 2**30
    bytes on the node, for all its workers; the tokens it holds depend on the server's own chunking (None)."""
    size = int(_gib("l1_size_gb", l1_size_gb) * GIB)
    return OffloadTier(engine="vllm", backend="lmcache", tokens=None, chunks=0, chunk_bytes=0,
                       host_bytes_per_rank=size, host_bytes_per_node=size, ranks=1,
                       source=f"the LMCache server's --l1-size-gb {l1_size_gb:g} (GiB for the node)")


def offload_log_line(tier: OffloadTier) -> str:
    """The line the native tier's creator prints (shared_offload_region.py#L177-L181: GB = 1e9 bytes)."""
    return f"Created mmap file /dev/shm/vllm_offload_<engine_id>.mmap ({tier.host_bytes_per_node / 1e9:.2f} GB)"


def host_terms(s, _kv_memory: int, _placement=None) -> list:
    """vLLM's host terms for a kvmem.sizing Setup (SizingRules.host_terms; kvmem.host): the CPU offload tier
    of --kv-offloading-size, one per engine replica on the node; none without it."""
    opts = s.sizing
    if opts.get("kv_offloading_size") is None:
        return []
    replicas = max(s.num_gpus // (s.tp * s.pp), 1)
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
    return [HostTerm(name=f"vLLM KV offload ({backend})", bytes_per_node=tier.host_bytes_per_node * replicas,
                     bytes_per_rank=tier.host_bytes_per_rank, tokens=tier.tokens,
                     source=tier.source + " (kvmem.engines.vllm.offload)")]


HOST_INPUTS = (HostInput("kv_offloading_size", "--kv-offloading-size, GiB (0: off)", "float", 0.0,
                         help="vLLM's native CPU KV tier, all ranks together."),)
