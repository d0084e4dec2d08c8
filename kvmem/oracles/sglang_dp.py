"""SGLang 0.5.23's own code, run on the CPU, as the judge of kvmem's data-parallel attention and expert-parallel
sizing (kvmem.engines.sglang.parallel).

For one setting (a model, a GPU, tp, attn_dp_size, ep_size, KV dtype, context) the chain SGLang runs at start-up:
    1. ServerArgs(...).resolve_once() (python/sglang/srt/server_args.py, the arg_groups handlers), with the
       GPU's capacity in MiB given to memory_hook's get_device_memory_capacity: the default
       mem_fraction_static (reserve_for_graph_mb's DP-attention terms) and the chunk it divides by attn_dp_size
    2. KVCacheConfigurator._profile_available_bytes(pre_model_load_memory) (mem_cache/kv_cache_configurator.py):
       the KV budget from the free memory before and after the weights load, which a GPU would report and
       which here are kvmem's: total less kvmem's non-torch memory, and that less kvmem's weights per GPU
    3. DefaultPoolConfigurator(kvc).calculate_pool_sizes(budget, page_size) (model_executor/pool_configurator.py)
       with get_parallel().attn_tp_size = tp // attn_dp_size: max_total_num_tokens per GPU
    4. KVCacheConfigurator.resolve_max_num_reqs(tokens): max_running_requests per DP worker
and compares each with kvmem's fit for the same setting. The weights per GPU are kvmem's rule (the parallel
module cites the model file), an input to step 2; for the grouped-query architectures what attn_dp_size adds to
them is judged apart (kvmem/oracles/sglang_dp_weights.py weights_case: SGLang's own attention and embedding
layers built on the meta device).
Server context is read through get_parallel() / get_schedule() / ...: those names are patched, for the call
only, in the module that imports them, with stand-ins holding the resolved ServerArgs' values. SGLang's code
is not edited.
"""

from __future__ import annotations

import random
import types
from unittest import mock

from ..parallel import divides
from .report import Check
from .sglang_dp_weights import ATTENTION_CLASSES, weights_case
from .sglang_runtime import config_dir
from .sglang_runtime import load as _load_sglang

__all__ = ["resolved", "sglang_numbers", "kvmem_numbers", "cases", "run_case", "random_case", "gqa_random_case"]

GB = 1 << 30
MIB = 1 << 20
MODELS = ("deepseek-v3", "kimi-k2-instruct", "deepseek-v2-lite")
# the GQA architectures whose model files lay attention out for attn_tp (sglang/parallel.py DP_ATTENTION), with
# SGLang's DefaultPoolConfigurator (gpt-oss's sliding layers take the hybrid-SWA one: not judged here)
GQA_MODELS = ("qwen3-235b-a22b", "qwen3-30b-a3b", "glm-4.5-air", "glm-4.7", "qwen3-32b", "qwen3-8b")
GPUS = ("h200-sxm-141gb", "h100-sxm-80gb", "b200-180gb", "a100-sxm-80gb")
_TORCH_KV = {"auto": "bfloat16", "bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


def resolved(cfg: dict, *, gpu_mib: int, tp: int, attn_dp: int, ep: int = 1, redundant: int = 0,
             kv_dtype: str = "auto", context: int | None = None, a2a: str = "none") -> dict:
    """SGLang's resolved server arguments for the setting (ServerArgs.resolve_once on the CPU)."""
    _load_sglang()
    import sglang.srt.arg_groups.memory_hook as memory_hook
    from sglang.srt.server_args import ServerArgs
    args = dict(model_path=config_dir(cfg), tp_size=tp, attn_dp_size=attn_dp, ep_size=ep, device="cuda",
                kv_cache_dtype=kv_dtype if kv_dtype == "auto" else kv_dtype.replace("_", ""))
    if redundant:
        args.update(ep_num_redundant_experts=redundant)
    if a2a != "none":
        args.update(moe_a2a_backend=a2a)
    if context:
        args.update(context_length=context)
    with mock.patch.object(memory_hook, "get_device_memory_capacity", lambda *_a: float(gpu_mib)):
        server_args = ServerArgs(**args)
        server_args.resolve_once()
    return server_args.resolved_dict()


def sglang_numbers(cfg: dict, *, gpu_mib: int, tp: int, attn_dp: int, ep: int, redundant: int, kv_dtype: str,
                   context: int, pre_model_load_bytes: int, weights_bytes: int, page_size: int = 1,
                   a2a: str = "none") -> dict:
    """{"mem_fraction_static", "chunked_prefill_size", "kv_memory", "tokens", "max_running_requests"}: steps 1-4."""
    sg = _load_sglang()
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.mem_cache import kv_cache_configurator as kc
    from sglang.srt.model_executor import pool_configurator as pc
    args = resolved(cfg, gpu_mib=gpu_mib, tp=tp, attn_dp=attn_dp, ep=ep, redundant=redundant, kv_dtype=kv_dtype,
                    context=context, a2a=a2a)
    mfs = args["mem_fraction_static"]
    mc = ModelConfig(config_dir(cfg), trust_remote_code=False, context_length=context)
    schedule = types.SimpleNamespace(mem_fraction_static=mfs, prefill_max_requests=None, max_mamba_cache_size=None,
                                     max_total_tokens=None, max_running_requests=args["max_running_requests"],
                                     page_size=page_size)
    parallel = types.SimpleNamespace(attn_tp_size=tp // attn_dp, attn_dcp_size=1, launch_world_size=1,
                                     world_group=types.SimpleNamespace(cpu_group=None), pp_size=1)
    graph = types.SimpleNamespace(cuda_graph_config=types.SimpleNamespace(
        prefill=types.SimpleNamespace(full_prefill_max_req=None, backend=None)))
    kv_torch = getattr(sg.torch, _TORCH_KV[kv_dtype])
    kvc = types.SimpleNamespace(
        device="cuda", gpu_id=0, mambaish_config=None, post_capture_kv_active=False, model_config=mc,
        kv_cache_dtype_str=kv_dtype, kv_cache_dtype=kv_torch, use_mla_backend=bool(cfg.get("kv_lora_rank")),
        is_draft_worker=False,
        layer_info=types.SimpleNamespace(num_effective_layers=mc.num_hidden_layers, start_layer=0,
                                         end_layer=mc.num_hidden_layers),
        spec_algorithm=types.SimpleNamespace(is_eagle=lambda: False, is_standalone=lambda: False,
                                             is_dflash_family=lambda: False),
        server_args=types.SimpleNamespace(enable_hisparse=False), pp_size=1, attn_dp_size=attn_dp,
        fused_entry_bytes=lambda _kind: None)
    after_load_gb = (pre_model_load_bytes - weights_bytes) / GB
    stand_ins = dict(get_schedule=lambda: schedule, get_parallel=lambda: parallel,
                     get_exec=lambda: types.SimpleNamespace(graph=graph),
                     get_disagg=lambda: types.SimpleNamespace(disaggregation_mode="null"),
                     get_mm=lambda: types.SimpleNamespace(mm_feature_transport=None),
                     get_memory=lambda: types.SimpleNamespace(enable_hisparse=False, enable_unified_memory=False))
    from sglang.srt.runtime_context import get_parallel
    # the widths a launched server publishes (runtime_context.py), as sglang_pool_sizing.mamba_pools sets them
    with get_parallel().override(tp_size=tp, attn_tp_size=tp // attn_dp, attn_cp_size=1,
                                 enable_dsa_cache_layer_split=False, enable_cp_tp_group_sharing=False), \
            mock.patch.object(kc, "get_available_gpu_memory", lambda *_a, **_k: after_load_gb), \
            mock.patch.multiple(kc, **{k: v for k, v in stand_ins.items() if hasattr(kc, k)}), \
            mock.patch.multiple(pc, **{k: v for k, v in stand_ins.items() if hasattr(pc, k)}), \
            mock.patch.object(pc, "compute_page_shard_scratch_bytes", lambda *_a, **_k: 0):
        try:
            available = kc.KVCacheConfigurator._profile_available_bytes(kvc, pre_model_load_bytes / GB)
        except ValueError:   # "Loaded weights leave no GPU memory for the KV cache ..."
            return {"mem_fraction_static": mfs, "chunked_prefill_size": args["chunked_prefill_size"],
                    "kv_memory": None, "tokens": None, "max_running_requests": None}
        config = pc.DefaultPoolConfigurator(kvc).calculate_pool_sizes(available, page_size)
        tokens = config.max_total_num_tokens
        requests = kc.KVCacheConfigurator.resolve_max_num_reqs(kvc, tokens)
    return {"mem_fraction_static": mfs, "chunked_prefill_size": args["chunked_prefill_size"],
            "kv_memory": available, "tokens": tokens, "max_running_requests": requests}


def kvmem_numbers(model: str, *, gpu: str, tp: int, attn_dp: int, ep: int, redundant: int, kv_dtype: str,
                  context: int, a2a: str = "none") -> dict:
    """kvmem's fit for the setting: its default fraction, its budget's inputs and its pool per GPU."""
    import kvmem
    from kvmem.engines.sglang.budget import sglang_chunked_prefill_size
    from kvmem.gpus import get_gpu
    from kvmem.sizing.setup import budget_for, make_setup
    options = dict(attn_dp_size=attn_dp, ep_size=ep, ep_num_redundant_experts=redundant)
    if a2a != "none":
        options.update(moe_a2a_backend=a2a)
    fit = kvmem.fit(model, engine="sglang", gpu=gpu, num_gpus=tp, context=context, kv_dtype=kv_dtype, **options)
    setup, _ = make_setup(model, gpu=gpu, num_gpus=tp, tp=None, pp=1, context=context, batch=None,
                          weight_dtype="auto", kv_dtype=kv_dtype, engine="sglang", gpu_memory_utilization=0.9,
                          options=options)
    budget = budget_for(setup, 1)
    defaults = kvmem.sizing.engine_defaults("sglang", gpu, context=context, tp=tp, **options)
    cap = fit.capacity   # None where the weights leave no KV memory
    return {"mem_fraction_static": float(defaults.values["mem_fraction_static"]),
            "chunked_prefill_size": sglang_chunked_prefill_size(get_gpu(gpu).memory_bytes) // attn_dp,
            "kv_memory": fit.kv_memory_bytes or None, "tokens": cap.tokens if cap else None,
            "pre_model_load_bytes": budget.total - budget.overhead, "weights_bytes": budget.weights,
            "max_batch": fit.max_batch, "replicas": fit.replicas,
            "max_running_requests": getattr(cap.details, "max_running_requests", None) if cap else None}


def cases() -> list[tuple[str, dict]]:
    """The directed settings: the issue's DeepSeek-V3 on 8 x H200 with --attn-dp-size 8, and TP alone beside it."""
    base = dict(model="deepseek-v3", gpu="h200-sxm-141gb", tp=8, ep=1, redundant=0, kv_dtype="auto", context=32768)
    return [("deepseek-v3 h200 tp8 attn_dp8", {**base, "attn_dp": 8}),
            ("deepseek-v3 h200 tp8", {**base, "attn_dp": 1}),
            ("deepseek-v3 h200 tp8 attn_dp8 ep8", {**base, "attn_dp": 8, "ep": 8}),
            ("deepseek-v3 h200 tp8 attn_dp2 fp8", {**base, "attn_dp": 2, "kv_dtype": "fp8_e4m3"}),
            ("deepseek-v3 h200 tp8 attn_dp8 ep8 r32", {**base, "attn_dp": 8, "ep": 8, "redundant": 32}),
            ("qwen3-235b-a22b h200 tp8 attn_dp8", {**base, "model": "qwen3-235b-a22b", "attn_dp": 8}),
            ("qwen3-30b-a3b h200 tp4 attn_dp4 ep4", {**base, "model": "qwen3-30b-a3b", "tp": 4, "attn_dp": 4, "ep": 4}),
            ("glm-4.5-air h200 tp8 attn_dp2 ep8", {**base, "model": "glm-4.5-air", "attn_dp": 2, "ep": 8}),
            ("qwen3-32b h200 tp8 attn_dp4", {**base, "model": "qwen3-32b", "attn_dp": 4}),
            ("qwen3-235b-a22b h200 tp8 attn_dp8 deepep", {**base, "model": "qwen3-235b-a22b", "attn_dp": 8, "ep": 8,
                                                          "a2a": "deepep"}),
            ("qwen3-30b-a3b h100 tp8 deepep", {**base, "model": "qwen3-30b-a3b", "gpu": "h100-sxm-80gb", "attn_dp": 1,
                                               "ep": 8, "a2a": "deepep"})]


def gqa_random_case(seed: int, i: int) -> tuple[str, dict]:
    """Case ``i`` of ``seed`` over the GQA architectures: tp 4, 8 or 16, attn_dp dividing it, ep 1 or tp (MoE)."""
    rng = random.Random(f"gqa-{seed}-{i}")
    tp = rng.choice((4, 8, 16))
    model = rng.choice(GQA_MODELS)
    moe = model.startswith(("qwen3-235b", "qwen3-30b", "glm"))
    from kvmem.catalog import preset
    longest = preset(model)["config"]["max_position_embeddings"]   # SGLang refuses a longer --context-length
    setting = dict(model=model, gpu=rng.choice(GPUS), tp=tp,
                   attn_dp=rng.choice([d for d in (1, 2, 4, 8, 16) if divides(d, tp)]),
                   ep=rng.choice((1, tp)) if moe else 1, redundant=0, kv_dtype=rng.choice(("auto", "fp8_e4m3")),
                   context=min(rng.choice((4096, 32768, 131072)), longest))
    return f"sglang-dp-gqa-{seed}-{i}", setting


def random_case(seed: int, i: int) -> tuple[str, dict]:
    """Case ``i`` of ``seed``: a model, GPU, tp in 8/16, attn_dp dividing it, ep 1 or tp, KV dtype, context."""
    rng = random.Random(f"{seed}-{i}")
    tp = rng.choice((8, 16))
    setting = dict(model=rng.choice(MODELS), gpu=rng.choice(GPUS), tp=tp,
                   attn_dp=rng.choice([d for d in (1, 2, 4, 8, 16) if divides(d, tp)]),
                   ep=rng.choice((1, tp)), redundant=0, kv_dtype=rng.choice(("auto", "fp8_e4m3")),
                   context=rng.choice((4096, 32768, 131072)))
    return f"sglang-dp-{seed}-{i}", setting


def run_case(name: str, setting: dict) -> list[Check]:
    """kvmem's numbers beside SGLang's own for one setting (a setting kvmem refuses is one check of the refusal)."""
    from kvmem.catalog import preset
    from kvmem.gpus import get_gpu
    ours = kvmem_numbers(setting["model"], gpu=setting["gpu"], tp=setting["tp"], attn_dp=setting["attn_dp"],
                         ep=setting["ep"], redundant=setting["redundant"], kv_dtype=setting["kv_dtype"],
                         context=setting["context"], a2a=setting.get("a2a", "none"))
    theirs = sglang_numbers(preset(setting["model"])["config"], gpu_mib=get_gpu(setting["gpu"]).memory_bytes // MIB,
                            tp=setting["tp"], attn_dp=setting["attn_dp"], ep=setting["ep"],
                            redundant=setting["redundant"], kv_dtype=setting["kv_dtype"], context=setting["context"],
                            pre_model_load_bytes=ours["pre_model_load_bytes"], weights_bytes=ours["weights_bytes"],
                            a2a=setting.get("a2a", "none"))
    checks = [Check(name, key, ours[key], theirs[key])
              for key in ("mem_fraction_static", "chunked_prefill_size", "tokens", "max_running_requests")]
    if setting["attn_dp"] > 1 and preset(setting["model"])["config"]["architectures"][0] in ATTENTION_CLASSES:
        weights = weights_case(setting["model"], tp=setting["tp"], attn_dp=setting["attn_dp"])
        checks.append(Check(name, weights.quantity, weights.kvmem, weights.engine))
    return checks
