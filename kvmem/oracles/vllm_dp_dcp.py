"""vLLM 0.33.0's own KV planning, run on the CPU, as the judge of kvmem's decode context parallelism
(--decode-context-parallel-size; kvmem.engines.vllm.parallel dcp_capacity).

For one setting (a model, tp, dcp, KV memory per GPU, max_model_len): the attention layers' KV cache specs as
vLLM's layers build them (kvmem/oracles/vllm_lib.py layer_specs: FullAttentionSpec / MLAAttentionSpec,
dcp_sharded by default), a VllmConfig whose ParallelConfig(tensor_parallel_size=tp,
decode_context_parallel_size=dcp) runs vLLM's own width check, then get_global_kv_cache_groups,
get_kv_cache_configs and get_kv_cache_capacity (vllm/v1/core/kv_cache_planning.py, kv_cache_utils.py): the
blocks, the logged tokens and the concurrency, beside kvmem.capacity(engine="vllm",
decode_context_parallel_size=dcp). vLLM's code is not edited.
"""

from __future__ import annotations

import random

from .report import Check

__all__ = ["cases", "random_case", "run_case"]

MODELS = ("deepseek-v3", "kimi-k2-instruct", "deepseek-v2-lite", "qwen3-235b-a22b", "qwen3-30b-a3b")
GIB = 1 << 30


def cases() -> list[tuple[str, dict]]:
    """Directed settings: DeepSeek-V3's latent over 8 DCP ranks, and Qwen3-MoE's 4 KV heads replicated past tp 4."""
    return [("deepseek-v3 tp8 dcp8 40GiB 32k", dict(model="deepseek-v3", tp=8, dcp=8, kv_gib=40, max_model_len=32768)),
            ("deepseek-v3 tp8 dcp2 40GiB 128k", dict(model="deepseek-v3", tp=8, dcp=2, kv_gib=40,
                                                     max_model_len=131072)),
            ("qwen3-235b-a22b tp8 dcp2 30GiB 32k", dict(model="qwen3-235b-a22b", tp=8, dcp=2, kv_gib=30,
                                                        max_model_len=32768))]


def random_case(seed: int, i: int) -> tuple[str, dict]:
    """Case ``i`` of ``seed``: a model, tp 8 or 16, a DCP width vLLM accepts for it, KV memory, max_model_len."""
    from kvmem.catalog import get_model
    from kvmem.parallel import divides
    rng = random.Random(f"dcp-{seed}-{i}")
    name, tp = rng.choice(MODELS), rng.choice((8, 16))
    model = get_model(name)
    if any(layer.kind.per_head for layer in model.layers):   # GQA: dcp <= tp // kv, dividing the q heads per kv
        kv = max(layer.kv_heads for layer in model.layers)
        widths = [d for d in (1, 2, 4, 8, 16) if d <= tp // kv and divides(d, model.num_attention_heads // kv)]
    else:
        widths = [d for d in (1, 2, 4, 8, 16) if divides(d, tp)]
    length = min(rng.choice((8192, 32768, 131072)), model.max_position_embeddings)
    return f"vllm-dcp-{seed}-{i}", dict(model=name, tp=tp, dcp=rng.choice(widths), kv_gib=rng.choice((8, 24, 60)),
                                        max_model_len=length)


def run_case(name: str, setting: dict) -> list[Check]:
    """kvmem's capacity with decode_context_parallel_size beside vLLM's own planning for one setting."""
    import kvmem
    from kvmem.catalog import get_model

    from .vllm_lib import kv_layouts, layer_specs, load_vllm, planning_config
    v = load_vllm()
    model = get_model(setting["model"])
    tp, dcp, length = setting["tp"], setting["dcp"], setting["max_model_len"]
    memory = setting["kv_gib"] * GIB
    ours = kvmem.capacity(model, engine="vllm", kv_memory=memory, tp=tp, max_model_len=length,
                          decode_context_parallel_size=dcp)
    config = planning_config(v, max_model_len=length, auto=False, batched=8192, block_size=ours.block_size,
                             hybrid=True, tp=tp)
    from vllm.config import ParallelConfig
    config.parallel_config = ParallelConfig(tensor_parallel_size=tp, decode_context_parallel_size=dcp)
    specs = layer_specs(v, model, ours.block_size, tp)
    v.resolve_kv_cache_layout(config, [kv_layouts(v, model)], specs.values())
    groups = v.get_global_kv_cache_groups(config, [specs])
    kv_config = v.get_kv_cache_configs(config, [specs], [memory], groups)[0]
    tokens, concurrency = v.get_kv_cache_capacity(config, kv_config)
    return [Check(name, "num_blocks", ours.blocks, kv_config.num_blocks),
            Check(name, "KV cache size tokens", ours.tokens, tokens),
            Check(name, "maximum concurrency (log, 2 decimals)", f"{ours.max_concurrency:.2f}", f"{concurrency:.2f}")]
