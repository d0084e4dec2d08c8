"""SGLang's memory for kvmem.sizing: mem_fraction_static of the free memory, and its default by GPU."""

from __future__ import annotations

from fractions import Fraction

from ..base import (
    Budget,
    BudgetRequest,
    EngineDefaults,
    PrefixSharing,
    SizingRules,
    StartupNumbers,
    fraction_option,
    share_whole_blocks,
)
from ..budget import kv_budget
from ..results import Estimate
from .admission import pools_refuse
from .dp_weights import weights_per_device
from .encoder import budget_terms, vlm_defaults
from .hicache import HOST_INPUTS, host_terms
from .parallel import deepep, kv_groups

# ---- sizing: the memory budget and its default fraction ---------------------------------------
#
# kv = free_before_load x mem_fraction_static - weights, free_before_load = total - non-torch
# (ModelRunner profile_max_num_token: rest = avail_after_load - free_before_load x (1 -
# mem_fraction_static)). The default fraction (sglang@v0.5.23 python/sglang/srt/arg_groups/memory_hook.py#L47-L354
# handle_gpu_memory_settings,
# PR #10975, Oct 2025), from nvidia-smi's total in MiB (GPU.memory_bytes):
#     chunked_prefill_size, cuda_graph_max_bs by memory: < 20 GiB 2048, 8; < 35 GiB 4096, 48
#     (160 if tp >= 4; memory_hook.py#L101-L117, the 24/32 GB bucket); < 60 GiB 4096, 32 (160);
#     < 90 GiB and < 160 GiB 8192, 256 (512); else 16384, 512; a --max-running-requests below the
#     default max_bs lowers it (#L182-L188)
#     reserved MiB = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2
#                    + tp x pp / 8 x 1024, at least 10240 above 60 GiB
#     (reserve_for_graph_mb, #L357-L395: the decode graph's max_bs x 2; the prefill graph's term, len(bs) x 8
#     or 1.5 GiB with MLA, is 0 at 0.5.23's default prefill backend 'disabled'; judged by ServerArgs'
#     own resolution, kvmem/oracles/sglang_reserve.py)
#     mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3)
# (earlier releases used 0.88 / 0.87 / 0.85 / 0.81 / 0.79 by tp: pass it.) Non-torch: 512 MiB
# before SGLang loads weights (H100 log: 79.22 GiB total, "avail mem=78.81 GB"), a typical value.
# Replicated weights, as vLLM's: QKVParallelLinear (sglang@v0.5.23 python/sglang/srt/layers/linear.py#L1075-L1550,
# adapted from
# vLLM) keeps num_kv_heads = 1 and num_kv_head_replicas = tp // kv_heads per rank when tp >= kv_heads;
# MLA's fused_qkv_a_proj_with_mqa is a ReplicatedLinear (sglang@v0.5.23 python/sglang/srt/models/deepseek_v2.py#L2070).

MIB = 1 << 20
NON_TORCH_BYTES = 512 * MIB
SIZING_OPTIONS = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None,
                  "mem_fraction_static": None, "chunked_prefill_size": None, "cuda_graph_max_bs": None,
                  # --enable-hierarchical-cache and its host pool (kvmem.engines.sglang.hicache; its defaults
                  # there: ratio 2.0, fraction 0.8), host_memory_bytes the node's RAM (kvmem.host)
                  "enable_hierarchical_cache": False, "hicache_ratio": None, "hicache_size": 0,
                  "hicache_host_memory_fraction": 0.8, "host_memory_bytes": None}
_MEMORY_BUCKETS = ((20 * 1024, 2048, 8, 8), (35 * 1024, 4096, 48, 160), (60 * 1024, 4096, 32, 160),
                   (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512))   # MiB, chunk, bs tp<4, bs tp>=4
_LARGEST_BUCKET = (16384, 512)


def sglang_chunked_prefill_size(gpu_memory_bytes: int) -> int:
    """SGLang's default chunked_prefill_size for a GPU of ``gpu_memory_bytes`` (the buckets above)."""
    gpu_mem = gpu_memory_bytes // MIB
    for limit, chunk, _small_tp, _large_tp in _MEMORY_BUCKETS:
        if gpu_mem < limit:
            return chunk
    return _LARGEST_BUCKET[0]


# Architectures whose model override turns the prefill CUDA graph on (Backend.FULL) when no prefill-graph flag is
# given (sglang@v0.5.23 python/sglang/srt/arg_groups/cuda_graph_hook.py#L349-L372); 0.5.23's default is disabled
PREFILL_GRAPH_ARCHITECTURES = ("InklingForConditionalGeneration", "InklingForConditionalGenerationMTP")
PREFILL_GRAPH_MIB_PER_SIZE = 8   # arg_groups/memory_hook.py#L380-L386 reserve_for_graph_mb (non-MLA: 8 MiB a size)


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """The prefill graph's capture sizes up to ``max_bs`` tokens (sglang@v0.5.23
    python/sglang/srt/arg_groups/cuda_graph_hook.py#L480-L497 generate_prefill_cuda_graph_batch_sizes)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [size for size in sizes if size <= max_bs]


def prefill_graph_mib(architectures, gpu_memory_bytes: int, chunked_prefill_size: int | None = None) -> int:
    """The default reserve's prefill-graph term for a model (0 unless its architecture turns the graph on): 8 MiB
    for each capture size up to chunked_prefill_size (arg_groups/memory_hook.py#L233-L268: the graph's max_bs is
    chunked_prefill_size for a non-MLA model, its sizes generated from it)."""
    if not architectures or architectures[0] not in PREFILL_GRAPH_ARCHITECTURES:
        return 0
    chunk = chunked_prefill_size or sglang_chunked_prefill_size(gpu_memory_bytes)
    return PREFILL_GRAPH_MIB_PER_SIZE * len(prefill_graph_sizes(chunk))


def sglang_mem_fraction_static(gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                               chunked_prefill_size: int | None = None,
                               cuda_graph_max_bs: int | None = None, attn_dp_size: int = 1,
                               max_running_requests: int | None = None, deepep_a2a: bool = False,
                               prefill_graph_reserve_mib: int = 0) -> Fraction:
    """SGLang's default mem_fraction_static for a GPU of ``gpu_memory_bytes`` (nvidia-smi total);
    ``attn_dp_size`` > 1 (data-parallel attention) reserves more for the decode graph's padding;
    ``max_running_requests`` below the default decode graph's max_bs lowers it; ``prefill_graph_reserve_mib`` is
    the prefill graph's term for a model that turns it on (prefill_graph_mib)."""
    gpu_mem = gpu_memory_bytes // MIB
    cps, bs = _LARGEST_BUCKET
    for limit, chunk, small_tp, large_tp in _MEMORY_BUCKETS:
        if gpu_mem < limit:
            cps, bs = chunk, small_tp if tp < 4 else large_tp
            break
    cps = chunked_prefill_size if chunked_prefill_size is not None else cps
    if cuda_graph_max_bs is not None:
        bs = cuda_graph_max_bs
    elif max_running_requests is not None and max_running_requests < bs:
        bs = max_running_requests   # sglang@v0.5.23 python/sglang/srt/arg_groups/memory_hook.py#L182-L188
    reserved = 512 + Fraction(3, 2) * max(cps, 2048) + 2 * bs + Fraction(tp * pp, 8) * 1024 + prefill_graph_reserve_mib
    if attn_dp_size > 1:
        # sglang@v0.5.23 python/sglang/srt/arg_groups/memory_hook.py#L370-L378 reserve_for_graph_mb: DP attention
        # pads the decode graph, max_bs x attn_dp x 3 MiB, x 1.5 more above max_bs 300; before the 10 GiB floor
        # (#L313-L315), and from the chunk before _handle_data_parallelism divides it (parallel_hook.py#L326-L335)
        reserved += bs * attn_dp_size * 3 + (Fraction(3, 2) * bs * attn_dp_size if bs > 300 else 0)
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, Fraction(10 * 1024))
    if deepep_a2a:
        # sglang@v0.5.23 python/sglang/srt/arg_groups/memory_hook.py#L402-L414 reserve_for_deepep_a2a_mb: 2 GiB for
        # the DeepEP buffers the decode graph captures, on top of the floor (#L316-L317)
        reserved += 2 * 1024
    return round(Fraction(gpu_mem - reserved) / gpu_mem, 3)


def _defaults(gpu, _context: int, tp: int, pp: int, _engine_options: dict, sizing_options: dict):
    if sizing_options.get("mem_fraction_static") is not None:
        return EngineDefaults("sglang", {"mem_fraction_static": sizing_options["mem_fraction_static"]},
                              "mem_fraction_static given")
    mfs = sglang_mem_fraction_static(gpu.memory_bytes, tp=tp, pp=pp,
                                     chunked_prefill_size=sizing_options.get("chunked_prefill_size"),
                                     cuda_graph_max_bs=sizing_options.get("cuda_graph_max_bs"),
                                     attn_dp_size=kv_groups(_engine_options),
                                     deepep_a2a=deepep(_engine_options))
    # not passed: max_running_requests (SGLang's decode graph shrinks to it, #L182-L188): the plan re-sizes with
    # its batch as max_running_requests and pins --mem-fraction-static, so the fit's fraction must not move with it
    return EngineDefaults("sglang", {"mem_fraction_static": mfs},
                          f"SGLang's default mem_fraction_static for this GPU: {float(mfs):.3f}")


def model_defaults(model, gpu, context: int, tp: int, pp: int, engine_options: dict, sizing_options: dict):
    """_defaults for one model: with the prefill CUDA graph's reserve where its architecture turns the graph on
    (Inkling: SGLang resolves 0.830 on an 80 GB H100 where a plain model gets 0.835), and lowered for a multimodal
    model's vision tower (kvmem.engines.sglang.encoder: Qwen2.5-VL-7B 0.707315 there)."""
    defaults = _defaults(gpu, context, tp, pp, engine_options, sizing_options)
    given = sizing_options.get("mem_fraction_static") is not None
    extra = prefill_graph_mib(model.facts.architectures, gpu.memory_bytes, sizing_options.get("chunked_prefill_size"))
    if not given and extra:
        mfs = sglang_mem_fraction_static(gpu.memory_bytes, tp=tp, pp=pp,
                                         chunked_prefill_size=sizing_options.get("chunked_prefill_size"),
                                         cuda_graph_max_bs=sizing_options.get("cuda_graph_max_bs"),
                                         attn_dp_size=kv_groups(engine_options), deepep_a2a=deepep(engine_options),
                                         prefill_graph_reserve_mib=extra)
        defaults = EngineDefaults("sglang", {"mem_fraction_static": mfs},
                                  f"SGLang's default mem_fraction_static for this GPU and "
                                  f"{model.facts.architectures[0]}: {float(mfs):.3f} (its prefill CUDA graph reserves "
                                  f"{extra} MiB)")
    return vlm_defaults(model, gpu, defaults, given=given)


def _budget(req: BudgetRequest) -> Budget:
    defaults = model_defaults(req.model, req.gpu, req.context, req.tp, req.pp, req.engine_options, req.sizing_options)
    notes = () if req.sizing_options.get("mem_fraction_static") is not None else (defaults.reason,)
    mfs = fraction_option("mem_fraction_static", defaults.values["mem_fraction_static"])
    total = req.gpu.usable_memory_bytes
    free_before = total - req.non_torch_bytes
    # of total: SGLang's static pool (weights + KV) is mem_fraction_static of the memory free
    # before it loads anything, i.e. of the device less its CUDA context; the rest is activations
    kv = kv_budget("of_total", total=free_before, weights=req.weights_bytes, fraction=mfs)
    # a multimodal model's embedding cache comes out of the KV budget (kvmem.engines.sglang.encoder)
    cache, encoder_notes = budget_terms(req.model, req.gpu)
    kv -= cache
    return Budget(total, req.weights_bytes, free_before - (kv + req.weights_bytes), req.non_torch_bytes, kv,
                  notes + encoder_notes)


def prefix_sharing(options: dict, est: Estimate) -> PrefixSharing:
    """The radix cache shares whole pages (page_size tokens)."""
    return share_whole_blocks("page_size", options, est)


SIZING = SizingRules(budget=_budget, options=SIZING_OPTIONS, non_torch_bytes=NON_TORCH_BYTES, preallocates=True,
                     fraction_option="mem_fraction_static", defaults=_defaults, model_defaults=model_defaults,
                     loads_fp32_as_fp16=True,
                     replicates_kv_weights=True, pools_refuse=pools_refuse,
                     weights_per_device=weights_per_device, kv_groups=kv_groups, host_terms=host_terms,
                     host_inputs=HOST_INPUTS,
                     startup=StartupNumbers(
                         "max_total_num_tokens",
                         "the free memory SGLang measures before and after loading the weights, which kvmem estimates",
                         "outside SGLang's budget (1 − mem_fraction_static)"))
