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

from ...dtypes import float_bytes
from ...host import HostInput, HostTerm
from ...layer import MLA, NONE
from ...model import Model
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
LMCACHE_DISK_GIB = 0.0       # lmcache/v1/config.py#L113 max_local_disk_size (a disk tier needs local_disk too, #L103)
LMCACHE_ALIGN_BYTES = 4096   # lmcache/v1/memory_management.py#L1338 AddressManager.ALIGN_BYTES: MixedMemoryAllocator's
#                              default align_bytes (memory_allocators/mixed_memory_allocator.py#L45)
# The in-process connector (--kv-transfer-config '{"kv_connector": "LMCacheConnectorV1", ...}') sizes its tiers per
# rank from one chunk (lmcache 0.5.6):
#     kv_shape = (layers of the rank's stage + draft layers, 1 if MLA else 2, chunk_size, kv heads per rank, head size)
#                 integration/vllm/vllm_service_factory.py#L86-L109, from vLLM's ModelConfig: get_num_layers (every
#                 hidden layer of the stage: vllm/distributed/utils.py#L198-L240 get_pp_indices), get_num_kv_heads
#                 (1 for MLA, else max(1, kv_heads // tp): vllm/config/model.py#L1663-L1683), get_head_size
#                 (kv_lora_rank + qk_rope_head_dim for MLA)
#     chunk bytes = product(kv_shape) x the KV dtype's bytes (vllm/utils/torch_utils.py#L420-L440: "auto" the model's,
#                 fp8 1 B; no scale counted), aligned up to 4,096 B: local_cpu_backend.py#L885-L945
#                 get_full_chunk_size_bytes and calculate_chunk_budget
#     CPU chunks per rank = int(max_local_cpu_size x 2**30) // aligned chunk (the pinned buffer: #L380-L403)
#     disk chunks per rank = int(max_local_disk_size x 2**30) // aligned chunk (local_disk_backend.py#L190; a stored
#                 object's physical size is its aligned size, #L358)
# An MLA model keeps its chunks on rank 0 only (save_only_first_rank defaults to use_mla: local_cpu_backend.py
# #L383-L395), the other ranks pinning their buffer all the same.
# vLLM's one-byte KV dtypes (vllm/utils/torch_utils.py#L40-L54: uint8, int8, float8_e4m3fn); floats: kvmem.dtypes
_LMCACHE_ONE_BYTE = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "int8")
_LMCACHE_KINDS = {"full", "sliding", "chunked", "mla"}


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


def pp_stage_layers(layers: int, pp: int) -> list[int]:
    """The hidden layers of each pipeline stage as vLLM 0.33.0 splits them without VLLM_PP_LAYER_PARTITION
    (vllm/distributed/utils.py#L224-L230): even shares, the remainder one each to the stages before the last."""
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


def lmcache_kv_shapes(model: Model, *, tp: int = 1, pp: int = 1, kv_dtype="auto",
                      chunk_size: int = LMCACHE_CHUNK_TOKENS, num_draft_layers: int = 0) -> tuple[list[tuple], int]:
    """LMCache 0.5.6's kv_shape of one chunk on a rank of each pipeline stage, and the KV element's bytes (the
    comment above LMCACHE_DISK_GIB); a model whose layers its one shape cannot describe is refused."""
    for name, value in (("tp", tp), ("pp", pp), ("chunk_size", chunk_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(num_draft_layers, bool) or not isinstance(num_draft_layers, int) or num_draft_layers < 0:
        raise ValueError(f"num_draft_layers must be a non-negative integer, got {num_draft_layers!r}")
    kinds = {str(layer.kind) for layer in model.layers}
    if kinds - _LMCACHE_KINDS:
        raise ValueError(f"{model.name}: LMCache 0.5.6 sizes a chunk by vLLM's get_num_layers, every hidden layer "
                         f"counted as attention (integration/vllm/vllm_service_factory.py#L96-L109), while its layers "
                         f"of kind {sorted(kinds - _LMCACHE_KINDS)} store otherwise (recurrent-state or no KV: "
                         "lmcache/v1/kv_layer_groups.py#L159-L222): kvmem does not size LMCache's tiers for it")
    if any(layer.state is not None or layer.compressor is not None or layer.shared_with is not None
           for layer in model.layers):
        raise ValueError(f"{model.name}: layers with a recurrent state, a compressor or a shared KV store otherwise "
                         "than LMCache's kv_shape counts them (vllm_service_factory.py#L96-L109, "
                         "lmcache/v1/kv_layer_groups.py#L159-L222): kvmem does not size LMCache's tiers for it")
    mla = "mla" in kinds
    if mla and kinds != {"mla"}:
        raise ValueError(f"{model.name}: MLA and other attention layers in one model: LMCache's one kv_shape "
                         "(vllm_service_factory.py#L103-L109) describes only one of them")
    if mla and pp > 1:
        raise ValueError(f"{model.name}: LMCache 0.5.6 saves an MLA model's chunks on rank 0 only "
                         "(save_only_first_rank, local_cpu_backend.py#L383-L395), so with pp > 1 the other stages' "
                         "layers are never stored: kvmem does not size that tier")
    if any(layer.index_head_dim for layer in model.layers):
        raise ValueError(f"{model.name}: the indexer keys of its sparse layers are outside LMCache's kv_shape "
                         "(vllm_service_factory.py#L103-L109) but inside its stored groups: kvmem does not size it")
    shapes = {(layer.kv_heads, layer.head_dim_k, layer.head_dim_v, layer.kv_lora_rank, layer.qk_rope_head_dim)
              for layer in model.layers}
    if len(shapes) > 1:
        raise ValueError(f"{model.name}: its layers differ in KV heads or head size ({len(shapes)} shapes), which "
                         "LMCache's one kv_shape per rank (vllm_service_factory.py#L103-L109) cannot describe")
    heads, head_k, head_v, rank, rope = shapes.pop()
    if not mla and head_k != head_v:
        raise ValueError(f"{model.name}: K head {head_k} and V head {head_v} differ; LMCache's kv_shape has one "
                         "head size (vllm_service_factory.py#L103-L109)")
    name = model.dtype if kv_dtype == "auto" else kv_dtype
    element = 1 if name in _LMCACHE_ONE_BYTE else float_bytes(name)
    if element is None:
        raise ValueError(f"kv_dtype {kv_dtype!r} (model dtype {model.dtype!r}): LMCache sizes a chunk by vLLM's "
                         "get_kv_cache_torch_dtype (vllm/utils/torch_utils.py#L420-L440); kvmem knows the bytes of "
                         f"the float formats, {', '.join(_LMCACHE_ONE_BYTE)} and 'auto'")
    kv_size, per_rank = (1, 1) if mla else (2, max(1, heads // tp))
    head = rank + rope if mla else head_k
    shapes_out = [(layers + num_draft_layers, kv_size, chunk_size, per_rank, head)
                  for layers in pp_stage_layers(len(model.layers), pp)]
    return shapes_out, element


def lmcache_local_tiers(model: Model, *, max_local_cpu_size=LMCACHE_CPU_GIB, max_local_disk_size=LMCACHE_DISK_GIB,
                        tp: int = 1, pp: int = 1, kv_dtype="auto", chunk_size: int = LMCACHE_CHUNK_TOKENS,
                        num_draft_layers: int = 0) -> tuple[OffloadTier, ...]:
    """LMCache 0.5.6's local CPU tier (and its disk tier where max_local_disk_size > 0) under vLLM's in-process
    LMCacheConnectorV1: the tokens each holds for the engine (its least-holding rank; an MLA model's rank 0),
    the bytes per rank and per node (tp x pp ranks; the comment above LMCACHE_DISK_GIB)."""
    cpu_gib = _gib("max_local_cpu_size", max_local_cpu_size)
    disk_gib = 0.0 if max_local_disk_size in (0, 0.0) else _gib("max_local_disk_size", max_local_disk_size)
    shapes, element = lmcache_kv_shapes(model, tp=tp, pp=pp, kv_dtype=kv_dtype, chunk_size=chunk_size,
                                        num_draft_layers=num_draft_layers)
    raw = [layers * kv_size * tokens * heads * head * element for layers, kv_size, tokens, heads, head in shapes]
    aligned = [cdiv(b, LMCACHE_ALIGN_BYTES) * LMCACHE_ALIGN_BYTES for b in raw]
    ranks = tp * pp
    mla = shapes[0][1] == 1
    notes: tuple[str, ...] = (
        ("an MLA model: rank 0 stores the chunks (save_only_first_rank); every rank pins its buffer",)
        if mla and tp > 1 else ())
    if any(layer.kind in ("sliding", "chunked") for layer in model.layers):
        notes += ("LMCache's chunk budget counts the sliding-window layers at the chunk's full length "
                  "(get_full_chunk_size_bytes)",)
    tiers = []
    for backend, gib, flag in (("lmcache-cpu", cpu_gib, "max_local_cpu_size"),
                               ("lmcache-disk", disk_gib, "max_local_disk_size")):
        if not gib:
            continue
        per_rank = int(gib * GIB)
        chunks = min(per_rank // chunk for chunk in aligned)
        where = "on local disk (with local_disk set), not RAM" if backend == "lmcache-disk" else "pinned RAM"
        source = (f"LMCache {flag} {gib:g} (GiB per rank, {where}; chunks of {chunk_size} tokens, "
                  f"{max(raw):,} B a rank's chunk, {max(aligned):,} B aligned)")
        tiers.append(OffloadTier(engine="vllm", backend=backend, tokens=chunks * chunk_size, chunks=chunks,
                                 chunk_bytes=max(aligned), host_bytes_per_rank=per_rank,
                                 host_bytes_per_node=per_rank * ranks, ranks=ranks, source=source, notes=notes))
    return tuple(tiers)


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
    if opts.get("lmcache_max_local_cpu_size") is not None or opts.get("lmcache_max_local_disk_size"):
        return _lmcache_connector_terms(s, opts)
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


def _lmcache_connector_terms(s, opts: dict) -> list:
    """LMCacheConnectorV1's local CPU and disk tiers, one set per engine replica on the node (lmcache_local_tiers)."""
    if opts.get("kv_offloading_size") is not None:
        # vllm@v0.33.0 vllm/config/vllm.py#L1157-L1181: --kv-offloading-size writes its own kv_connector over the one
        # --kv-transfer-config names
        raise ValueError("kv_offloading_size and LMCache's max_local_cpu_size / max_local_disk_size: vLLM 0.33.0 runs "
                         "one KV connector, and --kv-offloading-size replaces LMCacheConnectorV1 "
                         "(vllm/config/vllm.py#L1157-L1181); give one of them")
    if s.engine_options.get("draft") is not None:
        # integration/vllm/utils.py#L570-L600 calculate_draft_layers: deepseek_mtp's num_nextn_predict_layers, an
        # EAGLE drafter's layers, 0 for any other method name; kvmem's draft option does not say which vLLM runs
        raise ValueError("LMCache adds draft layers to its chunk by the speculative method's name "
                         "(lmcache integration/vllm/utils.py#L570-L600), which kvmem's draft option does not carry: "
                         "kvmem does not size LMCache's tiers with a draft")
    replicas = max(s.num_gpus // (s.tp * s.pp), 1)
    cpu = opts.get("lmcache_max_local_cpu_size")
    tiers = lmcache_local_tiers(s.model, max_local_cpu_size=LMCACHE_CPU_GIB if cpu is None else cpu,
                                max_local_disk_size=opts.get("lmcache_max_local_disk_size") or 0.0, tp=s.tp,
                                pp=s.pp, kv_dtype=s.kv_dtype)
    names = {"lmcache-cpu": "LMCache local CPU (LMCacheConnectorV1)", "lmcache-disk": "LMCache local disk"}
    return [HostTerm(name=names[t.backend], bytes_per_node=t.host_bytes_per_node * replicas,
                     bytes_per_rank=t.host_bytes_per_rank, tokens=t.tokens,
                     source=t.source + " (kvmem.engines.vllm.offload)", binding=t.backend == "lmcache-cpu")
            for t in tiers]


HOST_INPUTS = (HostInput("kv_offloading_size", "--kv-offloading-size, GiB (0: off)", "float", 0.0,
                         help="vLLM's native CPU KV tier, all ranks together."),)
