"""vLLM 0.33.0's own offload code as the judge of kvmem.engines.vllm.offload.native_tier.

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

from ..engines.vllm.offload import native_tier
from ..model import MLA, Model
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


__all__ = ["run_case", "directed_cases"]
