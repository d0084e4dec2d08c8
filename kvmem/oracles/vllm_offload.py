"""vLLM 0.33.0's own offload code as the judge of kvmem.engines.vllm.offload.native_tier, and LMCache 0.5.6's own
sizing code as the judge of kvmem.engines.vllm.offload.lmcache_local_tiers.

Per case, the KVCacheConfig is planned by vLLM's planning code (kvmem/oracles/vllm_lib.py), the
VllmConfig's ``_post_init_kv_transfer_config`` turns ``kv_offloading_size`` into the connector's
``cpu_bytes_to_use``, ``build_offloading_config`` makes the OffloadingConfig and ``CPUOffloadingSpec``
sizes the tier (vllm/v1/kv_offload/cpu/spec.py): its ``num_chunks``, ``kv_bytes_per_chunk`` and
``cpu_info`` (the tier's bytes and its tokens at max_model_len) are compared with kvmem's.
This machine has no GPU: the spec is asked as on CUDA (``_uses_shared_region`` True, what
vllm/platforms/cuda.py answers), with the ``mp`` executor on one node.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

from ..engines.vllm.offload import lmcache_local_tiers, native_tier
from ..layer import MLA
from ..model import Model
from .report import Check

GIB = 1 << 30


def run_case(name: str, model: Model, *, size_gib: float, kv_memory: int, max_model_len: int, tp: int = 1,
             blocks_per_chunk: int = 1) -> list[Check]:
    from . import vllm_lib as planning
    v = planning.load_vllm()
    from vllm.config import KVTransferConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.config import build_offloading_config
    from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec

    mla = any(layer.kind == MLA for layer in model.layers)
    ours = native_tier(model, kv_offloading_size=size_gib, max_model_len=max_model_len, tp=tp,
                       blocks_per_chunk=blocks_per_chunk, block_size=64 if mla else None)
    block_size = 64 if mla else 16
    config = planning.planning_config(v, max_model_len=max_model_len, auto=False, batched=8192, block_size=block_size,
                                      hybrid=True, tp=tp)
    # the MLA layer's own spec says every rank holds the same latent (max_tp_shards=1:
    # vllm/model_executor/layers/attention/mla_attention.py#L1370-L1380), which planning leaves aside
    specs = {layer: (dataclasses.replace(spec, max_tp_shards=1) if isinstance(spec, v.MLAAttentionSpec)
                     and spec.max_tp_shards is None else spec)
             for layer, spec in planning.layer_specs(v, model, block_size, tp).items()}
    v.resolve_kv_cache_layout(config, [planning.kv_layouts(v, model)], specs.values())
    groups = v.get_global_kv_cache_groups(config, [specs])
    kv_config = v.get_kv_cache_configs(config, [specs], [kv_memory], groups)[0]
    # the connector settings _post_init_kv_transfer_config writes for --kv-offloading-size (vllm.py#L1151-L1185)
    config.cache_config.kv_offloading_size = size_gib
    config.cache_config.kv_offloading_backend = "native"
    config.kv_transfer_config = None
    config._post_init_kv_transfer_config()
    extra = config.kv_transfer_config.kv_connector_extra_config
    if blocks_per_chunk != 1:
        extra["blocks_per_chunk"] = blocks_per_chunk
    assert isinstance(config.kv_transfer_config, KVTransferConfig)
    config.model_config.use_mla = mla
    config.model_config.dtype = "bfloat16"
    config.model_config.model = model.name
    config.model_config.get_total_num_kv_heads = lambda: max(layer.kv_heads for layer in model.layers)
    config.parallel_config.distributed_executor_backend = "mp"
    object.__setattr__(config, "kv_events_config", None)
    offloading = build_offloading_config(config, kv_config)
    original = CPUOffloadingSpec._uses_shared_region
    CPUOffloadingSpec._uses_shared_region = lambda _self: True      # what CUDA answers (spec.py#L176-L181)
    try:
        spec = CPUOffloadingSpec(offloading)
    finally:
        CPUOffloadingSpec._uses_shared_region = original
    info = spec.cpu_info
    return [Check(name, "cpu_bytes_to_use", int(size_gib * GIB), int(extra["cpu_bytes_to_use"])),
            Check(name, "num_chunks", ours.chunks, spec.num_chunks),
            Check(name, "kv_bytes_per_chunk", ours.chunk_bytes, spec.kv_bytes_per_chunk),
            Check(name, "tier bytes", ours.host_bytes_per_node, info.cpu_kv_cache_size_bytes),
            Check(name, "tier tokens at max_model_len", ours.tokens, info.cpu_kv_cache_size_tokens),
            Check(name, "replicated layout", "replicated" in " ".join(ours.notes), spec.replicated_layout)]


def directed_cases() -> list[dict]:
    """One dense, one MLA, one hybrid (sliding + full) model, at tp 1 and above."""
    from ..catalog import get_model
    cases = []
    for preset, tp in (("llama-3.1-8b", 1), ("llama-3.1-8b", 4), ("deepseek-v2-lite", 1), ("deepseek-v2-lite", 2),
                       ("gpt-oss-20b", 1), ("gpt-oss-20b", 2), ("gemma-3-27b", 2)):
        for size, length in ((100, 32768), (37.5, 8192)):
            cases.append(dict(name=f"{preset} tp{tp} {size} GiB {length}", model=get_model(preset), size_gib=size,
                              kv_memory=10 * GIB, max_model_len=length, tp=tp))
    cases.append(dict(name="llama-3.1-8b 4 blocks/chunk", model=get_model("llama-3.1-8b"), size_gib=10,
                      kv_memory=10 * GIB, max_model_len=8192, tp=2, blocks_per_chunk=4))
    return cases


# LMCache's backends import modules this CPU machine lacks and the sizing never calls: its compiled device_ops
# (lmcache/v1/gpu_connector/gpu_connectors.py#L10), aiofile (the disk writer), cryptography and uvicorn (servers).
# Each is given an empty module, only when it cannot be imported, so that LMCache's own classes load.
_ABSENT = ("aiofile", "cryptography", "uvicorn")


class _Nothing:
    def __init__(self, *_args, **_kwargs):
        pass


class _Empty(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Nothing


class _EmptyFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names: tuple):
        self.names = names

    def find_spec(self, fullname, path, target=None):   # noqa: ARG002 (the finder protocol)
        if fullname.split(".")[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _Empty(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def load_lmcache():
    """LMCache's config, vLLM service factory, local CPU backend and address manager (the comment above)."""
    import lmcache
    if "lmcache.device_ops" not in sys.modules and importlib.util.find_spec("lmcache.device_ops") is None:
        sys.modules["lmcache.device_ops"] = lmcache.device_ops = _Empty("lmcache.device_ops")
    missing = tuple(name for name in _ABSENT if name not in sys.modules and importlib.util.find_spec(name) is None)
    finder = _EmptyFinder(missing)
    sys.meta_path.insert(0, finder)
    try:
        from lmcache.integration.vllm.vllm_service_factory import VllmServiceFactory
        from lmcache.v1.config import LMCacheEngineConfig
        from lmcache.v1.memory_management import AddressManager
        from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
    finally:        # the empty modules leave with the finder: nothing else in this process meets them
        sys.meta_path.remove(finder)
        for name in [n for n, m in sys.modules.items() if isinstance(m, _Empty) and n.split(".")[0] in missing]:
            del sys.modules[name]
    return types.SimpleNamespace(factory=VllmServiceFactory, config=LMCacheEngineConfig, cpu=LocalCPUBackend,
                                 address=AddressManager)


def lmcache_sizes(preset: str, *, tp: int = 1, pp: int = 1, cpu_gib: float = 5.0, disk_gib: float = 0.0,
                  kv_dtype: str = "auto", chunk_size: int = 256) -> dict:
    """What LMCache 0.5.6 computes for one rank of each stage, from vLLM 0.33.0's own ModelConfig of the preset's
    config.json: the kv_shape (VllmServiceFactory.get_or_create_metadata, role scheduler: no GPU probed), the
    chunk bytes and the CPU chunk budget (LocalCPUBackend.get_full_chunk_size_bytes / calculate_chunk_budget),
    the disk tier's chunks (int(max_local_disk_size x 2**30) // the aligned size AddressManager gives)."""
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig

    from ..catalog import preset as preset_of
    from .sglang_runtime import config_dir
    lm = load_lmcache()
    folder = config_dir(preset_of(preset)["config"])
    model_config = ModelConfig(model=folder, tokenizer=folder, skip_tokenizer_init=True, dtype="auto",
                               max_model_len=4096)
    config = lm.config.from_defaults(max_local_cpu_size=cpu_gib, max_local_disk_size=disk_gib, chunk_size=chunk_size)
    out: dict = {"kv_shape": [], "chunk_bytes": [], "cpu_chunks": [], "disk_chunks": []}
    for stage in range(pp):
        parallel = ParallelConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp)
        parallel.rank = stage * tp          # the first rank of the stage (get_layers_start_end_indices reads it)
        vllm_config = types.SimpleNamespace(model_config=model_config, parallel_config=parallel,
                                            cache_config=CacheConfig(cache_dtype=kv_dtype), speculative_config=None,
                                            kv_transfer_config=None)
        metadata = lm.factory(config, vllm_config, "scheduler").get_or_create_metadata()
        backend = object.__new__(lm.cpu)
        backend.config, backend.metadata, backend.layerwise = config, metadata, False
        backend.memory_allocator = types.SimpleNamespace(align_bytes=lm.address.ALIGN_BYTES)
        chunk = backend.get_full_chunk_size_bytes()
        aligned = lm.address(1 << 30).compute_aligned_size(chunk)
        out["kv_shape"].append(tuple(metadata.kv_shape))
        out["chunk_bytes"].append(chunk)
        out["cpu_chunks"].append(backend.calculate_chunk_budget())
        out["disk_chunks"].append(int(config.max_local_disk_size * 1024**3) // aligned)
        out["use_mla"] = metadata.use_mla
    return out


def run_lmcache_case(name: str, preset: str, *, tp: int = 1, pp: int = 1, cpu_gib: float = 5.0,
                     disk_gib: float = 0.0, kv_dtype: str = "auto") -> list[Check]:
    from ..catalog import get_model
    from ..engines.vllm.offload import lmcache_kv_shapes
    theirs = lmcache_sizes(preset, tp=tp, pp=pp, cpu_gib=cpu_gib, disk_gib=disk_gib, kv_dtype=kv_dtype)
    model = get_model(preset)
    shapes, element = lmcache_kv_shapes(model, tp=tp, pp=pp, kv_dtype=kv_dtype)
    tiers = {t.backend: t for t in lmcache_local_tiers(model, max_local_cpu_size=cpu_gib, max_local_disk_size=disk_gib,
                                                       tp=tp, pp=pp, kv_dtype=kv_dtype)}
    checks = [Check(name, "kv_shape per stage", shapes, theirs["kv_shape"]),
              Check(name, "chunk bytes (raw, per rank)",
                    [a * b * c * d * e * element for a, b, c, d, e in shapes], theirs["chunk_bytes"]),
              Check(name, "CPU chunks", tiers["lmcache-cpu"].chunks, min(theirs["cpu_chunks"])),
              Check(name, "CPU tokens", tiers["lmcache-cpu"].tokens, min(theirs["cpu_chunks"]) * 256)]
    if disk_gib:
        checks.append(Check(name, "disk chunks", tiers["lmcache-disk"].chunks, min(theirs["disk_chunks"])))
    return checks


def lmcache_cases() -> list[dict]:
    """One dense, one MLA, one hybrid (sliding + full) model at tp 1 and 2, a pp split and an fp8 KV."""
    cases = []
    for preset in ("llama-3.1-8b", "deepseek-v2-lite", "gpt-oss-20b"):
        for tp in (1, 2):
            cases.append(dict(name=f"{preset} tp{tp}", preset=preset, tp=tp, cpu_gib=5.0, disk_gib=100.0))
    cases.append(dict(name="llama-3.1-8b tp2 pp3 37.5 GiB", preset="llama-3.1-8b", tp=2, pp=3, cpu_gib=37.5))
    cases.append(dict(name="gpt-oss-20b fp8", preset="gpt-oss-20b", kv_dtype="fp8", cpu_gib=12.5, disk_gib=0.5))
    return cases


__all__ = ["run_case", "directed_cases", "run_lmcache_case", "lmcache_cases", "lmcache_sizes"]
