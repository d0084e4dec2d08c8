"""vLLM's memory budget for kvmem.sizing: profiling, activations, batch defaults by device, the rotary cache."""

from __future__ import annotations

from fractions import Fraction

from ...activations import forward_bytes_per_token, forward_shape
from ...layer import MLA
from ...model import Model
from ...units import MAX_COUNT, format_bytes, parse_bytes, require_positive_int
from ..base import (
    Budget,
    BudgetRequest,
    EngineDefaults,
    PrefixSharing,
    SizingRules,
    StartupNumbers,
    byte_option,
    share_whole_blocks,
)
from ..budget import kv_budget
from .admission import pools_refuse
from .cudagraph import CUDAGRAPH_BYTES, GRAPHS_IN_BUDGET, graph_note
from .device import device_options
from .offload import HOST_INPUTS, host_terms
from .options import VllmOptions, check_options, parse_release
from .parallel import PARALLEL_OPTIONS, weights_per_device

# ----------------------------------------------------------------------------- sizing: budget, activations, defaults
#
# The memory budget (vllm@v0.33.0 vllm/v1/worker/gpu_worker.py#L640-L820 determine_available_memory):
#     kv = total x gpu_memory_utilization - weights - activation peak - non-torch - CUDA-graph estimate
# (the graph estimate is subtracted from v0.21, GRAPHS_IN_BUDGET; the v0 engine has none); ``kv_cache_memory_bytes``
# replaces all of it. Weights include the rotary cos/sin cache vLLM keeps beside them:
# max_position_embeddings x rotary_dim x 2 B (vllm@v0.33.0 vllm/model_executor/layers/rotary_embedding/base.py#L94-L103;
# "Loading model weights took 14.9888 GB" for
# Llama-3.1-8B = 14.9575 GiB of checkpoint + 0.03125 GiB of cache).
# The activation peak is what profile_run leaves (vllm@v0.33.0 vllm/v1/worker/gpu_model_runner.py#L6072-L6145;
# the sampler run #L5865-L5983): max(forward at max_num_batched_tokens, the dummy
# sampler run), the forward from kvmem.activations; the sampler run holds
# min(max_num_seqs, max_num_batched_tokens) x vocab x 28 B: its logits (bf16 2 + fp32 4), sort
# values 4 + int64 indices 8, softmax 4, mask 1, scatter 4, +1 (Sampler with top-k/top-p in
# vllm/v1/sample). Qwen2.5-7B-AWQ, 256 x 152,064 logits: 1.015 GiB predicted, 1.04 printed.
# vLLM v0 logs: Llama-3.1-8B at 20,000 and 29,000 batched tokens 2.06 / 2.99 GiB predicted,
# 2.07 / 2.99 printed; Qwen2.5-32B tp2 at 10,000: 1.15 vs 1.26.
# Replicated weights: QKVParallelLinear (vllm@v0.33.0 vllm/model_executor/layers/linear.py#L1011-L1362) gives each rank
# num_kv_heads = 1 and num_kv_head_replicas = tp // kv_heads when tp >= kv_heads, so a rank keeps a
# whole K and V head's projections; MLA's fused_qkv_a_proj / kv_a_proj_with_mqa are ReplicatedLinear
# (vllm/model_executor/models/deepseek_v2.py): whole on every rank.

SAMPLER_BYTES_PER_LOGIT = 28
NON_TORCH_BYTES = 256 << 20           # vLLM measures only the increase after start-up
SIZING_OPTIONS = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None,
                  "max_num_seqs": None, "cudagraph_bytes": CUDAGRAPH_BYTES, "kv_cache_memory_bytes": None,
                  # --kv-offloading-size GiB / --kv-offloading-backend (vllm/config/cache.py#L383-L392) and
                  # the LMCache server's --l1-size-gb (kvmem.engines.vllm.offload); host_memory_bytes the node's
                  # RAM (kvmem.host)
                  "kv_offloading_size": None, "kv_offloading_backend": "native", "lmcache_l1_size_gb": None,
                  # LMCacheConnectorV1's max_local_cpu_size / max_local_disk_size, GiB per rank (offload.py)
                  "lmcache_max_local_cpu_size": None, "lmcache_max_local_disk_size": None,
                  "host_memory_bytes": None, **PARALLEL_OPTIONS}
# get_batch_defaults (vllm@v0.33.0 vllm/engine/arg_utils.py#L2939-L3039), OPENAI_API_SERVER usage context:
#     device_memory >= 70 GiB and "a100" not in the device name: 8192 tokens, 1024 sequences
#     else: 2048 tokens, 256 sequences
BIG_DEVICE_BYTES = 70 << 30
BATCH_DEFAULTS = {"big": (8192, 1024), "small": (2048, 256)}
V0_MIN_BATCHED_TOKENS = 2048          # v0 without chunked prefill: max(max_model_len, 2048)
V0_MAX_NUM_SEQS = 256


def vllm_activation_bytes(model, *, max_num_batched_tokens: int, max_num_seqs: int, tp: int = 1) -> int:
    """vLLM's profiled activation peak: max(forward at the batched tokens, the dummy sampler run)."""
    from ...catalog import as_model
    model = as_model(model)
    shape = forward_shape(model)
    forward = max_num_batched_tokens * forward_bytes_per_token(shape, tp)
    sampler = min(max_num_seqs, max_num_batched_tokens) * shape.vocab * SAMPLER_BYTES_PER_LOGIT
    return max(forward, sampler)


def batch_defaults(gpu, *, context: int, version="latest", max_num_batched_tokens=None,
                   max_num_seqs=None) -> EngineDefaults:
    """vLLM's max_num_batched_tokens and max_num_seqs in force on ``gpu`` (a kvmem GPU), and why.

    v1 (get_batch_defaults): the device's defaults, then min(seqs x context, tokens) tokens and
    min(seqs, tokens) sequences. v0 without chunked prefill: max(context, 2048) tokens, 256 sequences.
    """
    return _batch_defaults(gpu, context, parse_release(version), max_num_batched_tokens, max_num_seqs)


def _batch_defaults(gpu, context: int, release, max_num_batched_tokens, max_num_seqs) -> EngineDefaults:
    """batch_defaults for a release already parsed (None: the v0 engine)."""
    seqs_given, tokens_given = max_num_seqs is not None, max_num_batched_tokens is not None
    if tokens_given:
        max_num_batched_tokens = require_positive_int("max_num_batched_tokens", max_num_batched_tokens, MAX_COUNT)
    if release is None:
        seqs = require_positive_int("max_num_seqs", max_num_seqs, MAX_COUNT) if seqs_given else V0_MAX_NUM_SEQS
        tokens = max_num_batched_tokens if tokens_given else max(context, V0_MIN_BATCHED_TOKENS)
        why = ("the v0 engine without chunked prefill batches max(max_model_len, 2048) tokens "
               f"and {V0_MAX_NUM_SEQS} sequences")
    else:
        device = f"{gpu.name} {gpu.label}".lower()
        big = gpu.usable_memory_bytes >= BIG_DEVICE_BYTES and "a100" not in device
        default_tokens, default_seqs = BATCH_DEFAULTS["big" if big else "small"]
        seqs = require_positive_int("max_num_seqs", max_num_seqs, MAX_COUNT) if seqs_given else default_seqs
        tokens = max_num_batched_tokens if tokens_given else min(seqs * context, default_tokens)
        rule = ("70 GiB or more and not an A100" if big else
                "an A100" if "a100" in device and gpu.usable_memory_bytes >= BIG_DEVICE_BYTES else "under 70 GiB")
        why = (f"vLLM's API-server batch defaults for {gpu.name} ({rule}; get_batch_defaults in "
               f"vllm/engine/arg_utils.py): {default_tokens} tokens, {default_seqs} sequences")
    seqs = min(seqs, tokens)
    if tokens_given and seqs_given:
        why = "max_num_batched_tokens and max_num_seqs given"
    return EngineDefaults("vllm", {"max_num_batched_tokens": tokens, "max_num_seqs": seqs}, why)


def rope_cache_bytes(model: Model) -> int:
    """vLLM's rotary cos/sin cache: max_position_embeddings x rotary_dim x 2 B, one per model."""
    if not model.max_position_embeddings:
        return 0
    for layer in model.layers:
        if layer.kind == MLA:
            return model.max_position_embeddings * layer.qk_rope_head_dim * 2
        if layer.kind.per_head:
            factor = Fraction(model.facts.partial_rotary_factor)
            return model.max_position_embeddings * int(layer.head_dim_k * factor) * 2
    return 0


def _weights_extra(model: Model) -> tuple[int, tuple[str, ...]]:
    rope = rope_cache_bytes(model)
    return rope, ((f"weights include vLLM's rotary cos/sin cache, {format_bytes(rope)}",) if rope else ())


def _weight_notes(weight_dtype: str) -> tuple[str, ...]:
    if weight_dtype != "mxfp4":
        return ()
    return ("vLLM's MXFP4 MoE kernels pad the expert weights: logs show 7-9% above the checkpoint "
            "(gpt-oss-20b 13.72 GiB loaded vs 12.82 GiB file; gpt-oss-120b 65.97 GiB on H100); "
            "pass weights_bytes= to use a measured figure",)


def _defaults(gpu, context: int, _tp: int, _pp: int, engine_options: dict, sizing_options: dict):
    return _defaults_of(gpu, context, check_options(engine_options), engine_options, sizing_options)


def _defaults_of(gpu, context: int, resolved: VllmOptions, engine_options: dict, sizing_options: dict):
    """The batch defaults under options resolved once; max_num_batched_tokens counts as given only
    when the caller gave it (``engine_options`` holds just those), else the device's default rules."""
    given = resolved.max_num_batched_tokens if "max_num_batched_tokens" in engine_options else None
    return _batch_defaults(gpu, context, resolved.release, given, sizing_options["max_num_seqs"])


def _budget(req: BudgetRequest) -> Budget:
    opts, notes = req.sizing_options, []
    resolved = check_options(req.engine_options)
    graphs = 0 if resolved.release is None or resolved.release < GRAPHS_IN_BUDGET else \
        byte_option("cudagraph_bytes", opts["cudagraph_bytes"])
    if graphs and opts["kv_cache_memory_bytes"] is None:
        notes.append(graph_note(graphs))          # how the graph term was come by (kvmem.engines.vllm.cudagraph)
    act = req.activation_bytes
    if act is None:
        # max_num_seqs not given: the batch sized, as `kvmem plan` sets --max-num-seqs to it, so that fit,
        # plan and sweep size one workload with one setting (kvmem.launch.vllm)
        planned = opts if opts["max_num_seqs"] is not None else {**opts, "max_num_seqs": req.batch}
        defaults = _defaults_of(req.gpu, req.context, resolved, req.engine_options, planned)
        act = vllm_activation_bytes(req.model, tp=req.tp, **defaults.values)
        seqs = defaults.values["max_num_seqs"]
        why = defaults.reason if opts["max_num_seqs"] is not None else (
            f"the batch sized (kvmem plan sets --max-num-seqs to it; vLLM's own default is "
            f"{_defaults_of(req.gpu, req.context, resolved, req.engine_options, opts).values['max_num_seqs']:,})")
        notes.append(f"activations at max_num_batched_tokens={defaults.values['max_num_batched_tokens']:,}, "
                     f"max_num_seqs={seqs}: {why}")
    total = req.gpu.usable_memory_bytes
    if opts["kv_cache_memory_bytes"] is not None:
        kv = parse_bytes(opts["kv_cache_memory_bytes"])
        notes.append("kv_cache_memory_bytes given: vLLM skips profiling and gpu_memory_utilization")
    else:
        # of total: vLLM requests gpu_memory_utilization of the whole device and gives the KV cache
        # what the weights, the profiled activations, non-torch memory and CUDA graphs leave of it
        kv = kv_budget("of_total", total=total, weights=req.weights_bytes, activations=act,
                       overhead=req.non_torch_bytes + graphs, fraction=req.utilization)
    return Budget(total, req.weights_bytes, act, req.non_torch_bytes + graphs, kv, tuple(notes))


def prefix_sharing(options: dict, est) -> PrefixSharing:
    """Prefix caching shares whole blocks only (vLLM hashes full blocks, docs.vllm.ai design/prefix_caching)."""
    notes = ()
    if options.get("enable_prefix_caching") is False:
        notes = ("vLLM shares prefix blocks through prefix caching: counted as if enable_prefix_caching=True",)
    return share_whole_blocks("block_size", options, est, notes)


SIZING = SizingRules(budget=_budget, options=SIZING_OPTIONS, non_torch_bytes=NON_TORCH_BYTES, preallocates=True,
                     takes_utilization=True, weights_extra=_weights_extra, weight_notes=_weight_notes,
                     defaults=_defaults, device_options=device_options, loads_fp32_as_fp16=True,
                     replicates_kv_weights=True,
                     batch_dependent=True, pools_refuse=pools_refuse, weights_per_device=weights_per_device,
                     moe_over_replicas=True, host_terms=host_terms, host_inputs=HOST_INPUTS,
                     startup=StartupNumbers(
                         "GPU KV cache size (tokens)",
                         "the profile run's peak (activations, CUDA graphs, non-torch memory), which kvmem estimates",
                         "reserve outside vLLM's budget (1 − gpu_memory_utilization)",
                         "Available KV cache memory: {gib} GiB"))
