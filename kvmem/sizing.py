"""Hardware sizing: does a workload fit, how many sequences and tokens, on how many GPUs, how fast.

    fit(model, gpu=..., context=..., engine="vllm") -> Fit

Per device, each engine splits memory its own way (``total`` = GPU.usable_memory_bytes, the
CUDA total where known; ``weights`` = kvmem.weights per device; KV bytes from the engine's own
module through kvmem.estimate):

    vllm      kv = total x gpu_memory_utilization - weights - activation peak - non-torch
              - CUDA-graph estimate                     (vllm/v1/worker/gpu_worker.py
              determine_available_memory; the graph estimate is subtracted from v0.21);
              ``kv_cache_memory_bytes`` replaces all of it. Weights include the rotary cos/sin
              cache vLLM keeps beside them: max_position_embeddings x rotary_dim x 2 B
              ("Loading model weights took 14.9888 GB" for Llama-3.1-8B = 14.9575 GiB of
              checkpoint + 0.03125 GiB of cache).
    sglang    kv = free_before_load x mem_fraction_static - weights, free_before_load = total
              - non-torch (ModelRunner profile_max_num_token: rest = avail_after_load -
              free_before_load x (1 - mem_fraction_static)). The default fraction
              (server_args.py _handle_gpu_memory_settings, PR #10975, Oct 2025), from
              nvidia-smi's total in MiB (GPU.memory_bytes):
                  chunked_prefill_size, cuda_graph_max_bs by memory: < 20 GiB 2048, 8;
                  < 35 GiB 2048, 24 (80 if tp >= 4); < 60 GiB 4096, 32 (160); < 90 GiB and
                  < 160 GiB 8192, 256 (512); else 16384, 512
                  reserved MiB = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2
                                 + tp x pp / 8 x 1024, at least 10240 above 60 GiB
                  mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3)
              (earlier releases used 0.88 / 0.87 / 0.85 / 0.81 / 0.79 by tp: pass it.)
    trtllm    kv = (total - weights - activation peak - non-torch) x free_gpu_memory_fraction (0.9)
              (tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator: the fraction applies to
              what the profiling peak leaves; checked: (119.70 - 113.65 + 0.56) x 0.9 = 5.95 GiB)
    llama.cpp weights + KV (its n_ctx cells, allocated up front) + compute buffer + non-torch;
              layers split over GPUs (-sm layer), so num_gpus becomes pp
    hf-*      weights + cache (its transient peak: DynamicCache grows by torch.cat) + activations
    ideal     weights + KV, nothing else

Activation models (bytes; documented estimates, overridable with ``activation_bytes``):
    forward, per token of a batch   (3 H + 3 I/tp [+ H when tp > 1]) x 2 B: at the MLP of a
        layer the residual, its norm, gate_up (2 I), act(I) and down (H) are alive, plus the
        all-reduce output under tp; an MoE layer's fused-MoE caches hold top_k x (3 I_moe/tp + H)
        per token instead. vLLM v0 logs: Llama-3.1-8B at 20,000 and 29,000 batched tokens
        2.06 / 2.99 GiB predicted, 2.07 / 2.99 printed; Qwen2.5-32B tp2 at 10,000: 1.15 vs 1.26.
    sampler (vLLM)  min(max_num_seqs, max_num_batched_tokens) x vocab x 28 B: the dummy sampler
        run's logits (bf16 2 + fp32 4), sort values 4 + int64 indices 8, softmax 4, mask 1,
        scatter 4, +1 (Sampler with top-k/top-p in vllm/v1/sample). Qwen2.5-7B-AWQ, 256 x
        152,064 logits: 1.015 GiB predicted, 1.04 printed.
    vllm  max(forward at max_num_batched_tokens, sampler); defaults from vllm/engine/arg_utils.py
          get_batch_defaults (API server): >= 70 GiB and not an A100: 8192 tokens, 1024 seqs;
          else 2048, 256; then min(seqs x context, tokens) and min(seqs, tokens).
          The v0 engine without chunked prefill batched max(max_model_len, 2048) tokens.
    trtllm forward at max_num_tokens (8192, the LLM API default).
    llama.cpp compute buffer (ggml-alloc reuses memory across layers, so the largest stage
          wins), f32, n_ub = min(n_ubatch, n_batch, n_ctx), n_kv = cells per stream:
              output    n_ub x (vocab + H)                     logits + the final norm
              attention n_ub x (n_kv x (heads + 1) + 4 H)      flash attention off: KQ, its
                                                               softmax in place, the f32 mask
                        n_ub x (n_kv / 2 + 4 H)                flash attention on: f16 mask only
              ffn       n_ub x (3 I + 2 H)                     gate, up, their product
          x 4 B, the largest. Flash attention off, checked exactly: Llama-3-8B n_ctx 512 / 8192
          "CUDA0 compute buffer size = 258.50 / 560.00 MiB"; Mistral-7B n_ctx 2048 / 32768
          164.00 / 2144.00 MiB (fedora-copr/logdetective#106). The flash-attention and ffn
          stages are not checked against a log.
    hf    batch x context x per-token forward (the prompt runs at once) + batch x vocab x 8 B
          (last-token logits in fp32 and their softmax).
Non-torch memory (CUDA context, NCCL, cuBLAS; overridable with ``non_torch_bytes``): 256 MiB
for vLLM (it measures only the increase after start-up) plus a 512 MiB CUDA-graph estimate
(``cudagraph_bytes``; 0 for enforce_eager or releases before v0.21), 512 MiB before SGLang
loads weights (H100 log: 79.22 GiB total, "avail mem=78.81 GB"), 1 GiB for TensorRT-LLM,
512 MiB for llama.cpp and transformers. These are typical values read off logs, not rules.

Options, beside each engine module's own (passed to kvmem.estimate / capacity): weights_bytes,
activation_bytes, non_torch_bytes (per device; replace the models above with measured figures),
vllm: max_num_seqs, max_num_batched_tokens, cudagraph_bytes, kv_cache_memory_bytes;
sglang: mem_fraction_static, chunked_prefill_size, cuda_graph_max_bs; trtllm:
free_gpu_memory_fraction, max_num_tokens. gpu_memory_utilization is vLLM's alone.
Under the engines' own defaults more memory can fit less: vLLM's batch defaults step up at
70 GiB (3.4 GiB of sampler peak for a 128k vocabulary) and SGLang's reserve jumps to 10 GiB
above 60 GiB. Pin those options to compare GPUs on equal terms.

Parallelism: tp x pp GPUs per replica; num_gpus / (tp x pp) data-parallel replicas, each with
its own copy of the weights; max_batch counts all replicas. tp must divide the attention heads.
transformers (hf-*) sizes one device per copy (tp = pp = 1; more GPUs are replicas).
A workload fits when the engine's estimate() for batch x context (its transient peak and, for
vLLM, the padding-layer slots included) is within the KV budget; for vLLM and full attention
that is its "Maximum concurrency" rounded down.

The results:
    max_batch    sequences of ``context`` tokens that fit at once (all replicas; llama.cpp
                 holds at most 256, LLAMA_MAX_SEQ in src/llama-cparams.h)
    max_context  the longest context for ``batch`` sequences (1 when batch is None), capped
                 at the model's max_position_embeddings
    min_gpus     the fewest GPUs (tp x pp, tp from 1, 2, 4, ... 64) that fit the workload
    decode bound a step reads the active weights once (MoE: the experts the batch touches)
                 and every sequence's KV (at ``context`` tokens: the last, slowest step):
                 tokens/s per sequence = bandwidth / (active weights / tp + KV read / tp);
                 pipeline stages run one after another for a token, so pp does not raise it;
                 the bound ignores compute, kernels' efficiency and communication.
    kv_crossover_tokens  the context at which the batch's KV reads equal the weight reads
fit() raises FitError (a ValueError) when not one sequence of ``context`` fits; its message
says by how much per device and what would fit, and its ``.fit`` holds the result.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction

from .engines import ENGINES, _spec, capacity as _capacity, estimate as _estimate
from .engines.base import Capacity, past_positions
from .gpus import GPU, get_gpu, list_gpus
from .model import CHUNKED, FULL, MLA, SLIDING, Model
from .units import MAX_COUNT, format_bytes, parse_bytes, parse_tokens, require_positive_int
from .catalog import as_model
from .weights import Weights, _fields, _moe_shape, weights as _weights

__all__ = ["Fit", "FitError", "fit", "vllm_activation_bytes", "sglang_mem_fraction_static",
           "llamacpp_compute_bytes", "kv_crossover_tokens"]

MIB, GIB = 1 << 20, 1 << 30
_ACT_BYTES = 2                       # activations in bf16/fp16
_SAMPLER_BYTES_PER_LOGIT = 28        # see the module docstring
_SEARCH_CAP = 1 << 24                # tokens / sequences searched at most when nothing else caps
_BATCH_CAP = {"llama.cpp": 256}      # LLAMA_MAX_SEQ (src/llama-cparams.h): n_seq_max <= 256

# Sizing options per engine, beside the engine module's own options (defaults: module docstring).
_COMMON = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None}
_SIZING = {
    "vllm": {**_COMMON, "max_num_seqs": None, "cudagraph_bytes": 512 * MIB, "kv_cache_memory_bytes": None},
    "sglang": {**_COMMON, "mem_fraction_static": None, "chunked_prefill_size": None, "cuda_graph_max_bs": None},
    "trtllm": {**_COMMON, "free_gpu_memory_fraction": 0.9, "max_num_tokens": 8192},
    "llama.cpp": {**_COMMON},
    "ideal": {"weights_bytes": None},
}
_NON_TORCH = {"vllm": 256 * MIB, "sglang": 512 * MIB, "trtllm": GIB, "llama.cpp": 512 * MIB}
_PREALLOCATING = ("vllm", "sglang", "trtllm")     # engines that reserve their whole KV budget
_SMALLER_FORMATS = {"serving": ("fp8", "int8", "awq", "nvfp4"),
                    "llama.cpp": ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k"),
                    "hf": ("int8", "awq")}


class FitError(ValueError):
    """The workload does not fit at all; ``.fit`` is the (not fitting) result."""

    def __init__(self, message: str, result: "Fit"):
        super().__init__(message)
        self.fit = result


@dataclass(frozen=True)
class Fit:
    """Whether a workload fits on a set of GPUs under one engine's rules (bytes per device)."""

    model: str
    gpu: str
    engine: str
    num_gpus: int
    tp: int
    pp: int
    replicas: int
    context: int
    batch: int | None
    weight_dtype: str
    kv_dtype: str
    fits: bool
    max_batch: int
    max_context: int
    min_gpus: int | None
    breakdown: dict
    kv_memory_bytes: int
    kv_bytes_per_sequence: int
    shortfall_bytes: int
    decode_tokens_per_s: float | None
    decode_tokens_per_s_aggregate: float | None
    kv_crossover_tokens: int | None
    suggestions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    capacity: Capacity | None = field(default=None, compare=False)
    breakdown_batch: int = 1       # sequences per replica the breakdown's "kv" is for
    breakdown_context: int = 0     # tokens per sequence the breakdown's "kv" is for
    engine_refuses: str | None = None   # why the engine itself would not start (context past its positions)
    engine_allows_with: str | None = None  # the setting that makes it start anyway

    def to_dict(self) -> dict:
        data = asdict(self)
        data["capacity"] = self.capacity.to_dict() if self.capacity else None
        data["suggestions"] = list(self.suggestions)
        data["notes"] = list(self.notes)
        return data


# ----------------------------------------------------------------------------- model shapes

@dataclass(frozen=True)
class _Shape:
    hidden: int
    intermediate: int        # dense MLP width (0 when every layer is MoE)
    moe_intermediate: int
    shared_intermediate: int
    top_k: int
    vocab: int
    heads: int


def _shape(model: Model) -> _Shape:
    f = _fields(model)
    experts, top_k = _moe_shape(f)
    hidden = model.hidden_size
    inter = f.int("intermediate_size", "n_inner", "ffn_hidden_size", default=0, minimum=0) or 0
    moe_inter = shared = 0
    if experts:
        moe_inter = f.int("moe_intermediate_size", default=0, minimum=0) or inter
        if f.get("n_shared_experts", default=None):
            shared = f.int("n_shared_experts") * moe_inter
        else:
            shared = f.int("shared_expert_intermediate_size", default=0, minimum=0) or 0
        inter = f.int("intermediate_size_mlp", default=0, minimum=0) or (
            inter if model.model_type in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe") else 0)
    elif not inter:
        inter = 4 * hidden
    vocab = f.int("vocab_size", "padded_vocab_size", default=0, minimum=0) or 0
    return _Shape(hidden, inter, moe_inter, shared, top_k, vocab, model.num_attention_heads)


def _forward_bytes_per_token(shape: _Shape, tp: int) -> int:
    h = shape.hidden
    dense = 3 * h + 3 * shape.intermediate // tp if shape.intermediate else 0
    moe = 0
    if shape.top_k:
        moe = 3 * h + shape.top_k * (3 * shape.moe_intermediate // tp + h) + 3 * shape.shared_intermediate // tp
    return (max(dense, moe) + (h if tp > 1 else 0)) * _ACT_BYTES


def vllm_activation_bytes(model, *, max_num_batched_tokens: int, max_num_seqs: int, tp: int = 1) -> int:
    """vLLM's profiled activation peak: max(forward at the batched tokens, the dummy sampler run)."""
    model = as_model(model)
    shape = _shape(model)
    forward = max_num_batched_tokens * _forward_bytes_per_token(shape, tp)
    sampler = min(max_num_seqs, max_num_batched_tokens) * shape.vocab * _SAMPLER_BYTES_PER_LOGIT
    return max(forward, sampler)


def sglang_mem_fraction_static(gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                               chunked_prefill_size: int | None = None,
                               cuda_graph_max_bs: int | None = None) -> Fraction:
    """SGLang's default mem_fraction_static for a GPU of ``gpu_memory_bytes`` (nvidia-smi total)."""
    gpu_mem = gpu_memory_bytes // MIB
    buckets = ((20 * 1024, 2048, 8, 8), (35 * 1024, 2048, 24, 80), (60 * 1024, 4096, 32, 160),
               (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512))
    cps, bs = 16384, 512
    for limit, chunk, small_tp, large_tp in buckets:
        if gpu_mem < limit:
            cps, bs = chunk, small_tp if tp < 4 else large_tp
            break
    cps = chunked_prefill_size if chunked_prefill_size is not None else cps
    bs = cuda_graph_max_bs if cuda_graph_max_bs is not None else bs
    reserved = 512 + Fraction(3, 2) * max(cps, 2048) + 2 * bs + Fraction(tp * pp, 8) * 1024
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, Fraction(10 * 1024))
    return round(Fraction(gpu_mem - reserved) / gpu_mem, 3)


def llamacpp_compute_bytes(model, *, n_ctx: int, n_ubatch: int = 512, flash_attn: bool = True,
                           cells_per_stream: int | None = None) -> int:
    """llama.cpp's compute buffer on one device (see the module docstring)."""
    model = as_model(model)
    shape = _shape(model)
    n_ub = min(n_ubatch, n_ctx)
    h = shape.hidden
    ffn = 3 * shape.intermediate if shape.intermediate else 3 * shape.top_k * shape.moe_intermediate
    cells = cells_per_stream if cells_per_stream is not None else -(-n_ctx // 256) * 256
    attention = cells // 2 + 4 * h if flash_attn else cells * (shape.heads + 1) + 4 * h
    return 4 * n_ub * max(shape.vocab + h, ffn + 2 * h, attention)


def _hf_activation_bytes(model: Model, batch: int, context: int) -> int:
    shape = _shape(model)
    return batch * context * _forward_bytes_per_token(shape, 1) + batch * shape.vocab * 8


def _vllm_rope_cache_bytes(model: Model) -> int:
    """vLLM's rotary cos/sin cache: max_position_embeddings x rotary_dim x 2 B, one per model."""
    if not model.max_position_embeddings:
        return 0
    f = _fields(model)
    for layer in model.layers:
        if layer.kind == MLA:
            return model.max_position_embeddings * layer.qk_rope_head_dim * 2
        if layer.kind in (FULL, SLIDING, CHUNKED):
            factor = f.get("partial_rotary_factor", "rotary_pct", default=1) or 1
            return model.max_position_embeddings * int(layer.head_dim_k * Fraction(str(factor))) * 2
    return 0


# ----------------------------------------------------------------------------- one set-up

@dataclass(frozen=True)
class _Setup:
    model: Model
    gpu: GPU
    engine: str
    tp: int
    pp: int
    num_gpus: int
    context: int
    batch: int | None
    weight_dtype: str
    kv_dtype: object
    utilization: Fraction
    engine_options: dict
    sizing: dict

    @property
    def replicas(self) -> int:
        return self.num_gpus // (self.tp * self.pp)

    @property
    def family(self) -> str:
        return "hf" if self.engine.startswith("hf-") else self.engine


@dataclass(frozen=True)
class _Budget:
    total: int
    weights: int
    activations: int
    overhead: int
    kv_memory: int
    weights_obj: Weights | None
    notes: tuple[str, ...]


def _need(s: _Setup, tokens: int, batch: int) -> int:
    """KV bytes one device needs for ``batch`` sequences of ``tokens`` tokens (transient peak included)."""
    est = _estimate(s.model, engine=s.engine, tokens=tokens, batch=batch, kv_dtype=s.kv_dtype,
                    tp=s.tp, pp=s.pp, **s.engine_options)
    # transformers' peak (torch.cat growth) includes its recurrent state; vLLM's pool also holds the
    # slots of padding layers (details["pool_bytes"])
    return max(est.total_bytes, est.peak_bytes, est.details.get("pool_bytes", 0))


_WEIGHTS_CACHE: dict = {}


def _model_weights(model: Model, weight_dtype) -> Weights:
    """kvmem.weights, remembered for the searches that re-budget a set-up many times."""
    key = (id(model), weight_dtype)
    hit = _WEIGHTS_CACHE.get(key)
    if hit is None or hit[0] is not model:
        if len(_WEIGHTS_CACHE) > 64:
            _WEIGHTS_CACHE.clear()
        hit = _WEIGHTS_CACHE[key] = (model, _weights(model, weight_dtype))
    return hit[1]


def _budget(s: _Setup, batch_for_activations: int) -> _Budget:
    opts, notes = s.sizing, []
    total = s.gpu.usable_memory_bytes
    weights_obj = None
    if opts.get("weights_bytes") is not None:
        weights_dev = parse_bytes(opts["weights_bytes"])
    else:
        weights_obj = _model_weights(s.model, s.weight_dtype)
        notes.extend(weights_obj.notes)
        weights_dev = weights_obj.per_device(tp=s.tp, pp=s.pp)
        if s.engine == "vllm":
            rope = _vllm_rope_cache_bytes(s.model)
            weights_dev += rope
            if rope:
                notes.append(f"weights include vLLM's rotary cos/sin cache, {format_bytes(rope)}")
            if weights_obj.weight_dtype == "mxfp4":
                notes.append("vLLM's MXFP4 MoE kernels pad the expert weights: logs show 7-9% above the "
                             "checkpoint (gpt-oss-20b 13.72 GiB loaded vs 12.82 GiB file; gpt-oss-120b "
                             "65.97 GiB on H100); pass weights_bytes= to use a measured figure")
    non_torch = opts.get("non_torch_bytes")
    non_torch = _NON_TORCH.get(s.family, 512 * MIB) if non_torch is None else _bytes0("non_torch_bytes", non_torch)
    act = opts.get("activation_bytes")
    act = None if act is None else _bytes0("activation_bytes", act)
    if s.engine == "ideal":
        return _Budget(total, weights_dev, 0, 0, total - weights_dev, weights_obj, tuple(notes))
    if s.engine == "vllm":
        graphs = _bytes0("cudagraph_bytes", opts["cudagraph_bytes"])
        if act is None:
            tokens, seqs = _vllm_batch_defaults(s)
            act = vllm_activation_bytes(s.model, max_num_batched_tokens=tokens, max_num_seqs=seqs, tp=s.tp)
        if opts.get("kv_cache_memory_bytes") is not None:
            kv = parse_bytes(opts["kv_cache_memory_bytes"])
            notes.append("kv_cache_memory_bytes given: vLLM skips profiling and gpu_memory_utilization")
        else:
            requested = total * s.utilization.numerator // s.utilization.denominator
            kv = requested - weights_dev - act - non_torch - graphs
        return _Budget(total, weights_dev, act, non_torch + graphs, kv, weights_obj, tuple(notes))
    if s.engine == "sglang":
        mfs = opts.get("mem_fraction_static")
        if mfs is None:
            mfs = sglang_mem_fraction_static(s.gpu.memory_bytes, tp=s.tp, pp=s.pp,
                                             chunked_prefill_size=opts.get("chunked_prefill_size"),
                                             cuda_graph_max_bs=opts.get("cuda_graph_max_bs"))
            notes.append(f"SGLang's default mem_fraction_static for this GPU: {float(mfs):.3f}")
        mfs = _fraction("mem_fraction_static", mfs)
        free_before = total - non_torch
        static = free_before * mfs.numerator // mfs.denominator
        return _Budget(total, weights_dev, free_before - static, non_torch, static - weights_dev,
                       weights_obj, tuple(notes))
    if s.engine == "trtllm":
        fraction = _fraction("free_gpu_memory_fraction", opts["free_gpu_memory_fraction"])
        if act is None:
            act = require_positive_int("max_num_tokens", opts["max_num_tokens"]) * _forward_bytes_per_token(
                _shape(s.model), s.tp)
        headroom = total - weights_dev - act - non_torch
        kv = headroom * fraction.numerator // fraction.denominator if headroom > 0 else headroom
        return _Budget(total, weights_dev, act, non_torch, kv, weights_obj, tuple(notes))
    if s.engine == "llama.cpp":
        if act is None:
            flash = s.engine_options.get("flash_attn")
            flash = flash is None or flash in (True, "on", "auto", 1)
            n_ubatch = min(s.engine_options.get("n_ubatch") or 512, s.engine_options.get("n_batch") or 2048)
            n_ctx = s.context * batch_for_activations
            stream = n_ctx if s.engine_options.get("kv_unified") else s.context
            act = llamacpp_compute_bytes(s.model, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=flash,
                                         cells_per_stream=-(-stream // 256) * 256)
        return _Budget(total, weights_dev, act, non_torch, total - weights_dev - act - non_torch,
                       weights_obj, tuple(notes))
    # transformers
    if act is None:
        act = _hf_activation_bytes(s.model, batch_for_activations, s.context)
    return _Budget(total, weights_dev, act, non_torch, total - weights_dev - act - non_torch,
                   weights_obj, tuple(notes))


def _vllm_batch_defaults(s: _Setup) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of vLLM's API server for this GPU and context."""
    big = s.gpu.usable_memory_bytes >= 70 * GIB and "a100" not in (s.gpu.name + s.gpu.label).lower()
    tokens = s.engine_options.get("max_num_batched_tokens")
    seqs = s.sizing.get("max_num_seqs")
    default_tokens, default_seqs = (8192, 1024) if big else (2048, 256)
    seqs = default_seqs if seqs is None else require_positive_int("max_num_seqs", seqs, MAX_COUNT)
    if tokens is not None:
        tokens = require_positive_int("max_num_batched_tokens", tokens, MAX_COUNT)
    if tokens is None:
        tokens = min(seqs * s.context, default_tokens)
    return tokens, min(seqs, tokens)


def _largest(fits, cap: int, guess: int = 1) -> int:
    """The largest n in [0, cap] with fits(n), for a monotone ``fits`` (fits(0) is True).

    Gallops from ``guess`` (a linear extrapolation lands within a few blocks), then bisects.
    """
    if cap < 1 or not fits(1):
        return 0
    guess = min(max(guess, 1), cap)
    step = 1
    if fits(guess):
        lo, hi = guess, cap + 1
        while lo + step <= cap:
            if not fits(lo + step):
                hi = lo + step
                break
            lo, step = lo + step, step * 2
    else:
        lo, hi = 1, guess
        while hi - step > 1:
            if fits(hi - step):
                lo = hi - step
                break
            hi, step = hi - step, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _linear_guess(measure, target: int, probe: int) -> int:
    """n with measure(n) ~ target, extrapolated from measure(probe)."""
    at_probe = measure(probe)
    return probe * target // at_probe if at_probe > 0 else probe


def _holds(s: _Setup, tokens: int, batch: int, kv_memory: int) -> bool:
    """Whether ``batch`` x ``tokens`` fits ``kv_memory``; a size the engine refuses (llama.cpp's
    256 sequences, a StaticCache shorter than the sequence) does not fit."""
    try:
        return _need(s, tokens, batch) <= kv_memory
    except ValueError:
        return False


def _batch_dependent(s: _Setup) -> bool:
    """llama.cpp's compute buffer and transformers' activations grow with the batch."""
    return s.family == "hf" or s.engine == "llama.cpp"


def _max_batch(s: _Setup, kv_memory: int) -> int:
    """Sequences of ``context`` one replica holds (``kv_memory``: the budget at batch 1)."""
    per_seq = _need(s, s.context, 1)
    if kv_memory <= 0 or per_seq > kv_memory:
        return 0
    cap = _BATCH_CAP.get(s.engine, _SEARCH_CAP)
    guess = kv_memory // per_seq if per_seq else cap
    upper = _largest(lambda b: _holds(s, s.context, b, kv_memory), cap, guess)
    if _batch_dependent(s):   # the batch-1 budget bounds it; activations only shrink it further
        return _largest(lambda b: _holds(s, s.context, b, _budget(s, b).kv_memory), upper, upper)
    return upper


def _context_cap(model: Model) -> int:
    return model.max_position_embeddings or _SEARCH_CAP


def _max_context(s: _Setup, kv_memory: int, batch: int) -> int:
    if kv_memory <= 0 or batch > _BATCH_CAP.get(s.engine, _SEARCH_CAP):
        return 0
    cap = _context_cap(s.model)
    def need_or_zero(n: int) -> int:
        try:
            return _need(s, n, batch)
        except ValueError:
            return 0

    guess = _linear_guess(need_or_zero, kv_memory, min(cap, s.context))
    upper = _largest(lambda n: _holds(s, n, batch, kv_memory), cap, guess)
    if _batch_dependent(s):
        return _largest(lambda n: _holds(s, n, batch, _budget(replace(s, context=n), batch).kv_memory),
                        upper, upper)
    return upper


def _per_replica(s: _Setup) -> int:
    return -(-(s.batch or 1) // s.replicas)


def _fits(s: _Setup) -> bool:
    """Whether the workload (batch, default 1, of ``context`` tokens) fits one replica."""
    n = _per_replica(s)
    kv_memory = _budget(s, n).kv_memory
    return kv_memory > 0 and _holds(s, s.context, n, kv_memory)


# ----------------------------------------------------------------------------- inputs

def _bytes0(name: str, value) -> int:
    if value == 0:
        return 0
    try:
        return parse_bytes(value)
    except ValueError:
        raise ValueError(f"{name} must be a byte count (an int or a string like '512MiB'), got {value!r}") from None


def _fraction(name: str, value) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    frac = Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    if not 0 < frac <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    return frac


def _split_options(engine: str, family: str, spec_options: dict, options: dict) -> tuple[dict, dict]:
    sizing_table = _COMMON if family == "hf" else _SIZING[engine]
    engine_opts, sizing = {}, dict(sizing_table)
    for name, value in options.items():
        if name in ("n_ctx", "n_seq") and engine == "llama.cpp":
            raise ValueError(f"fit sets llama.cpp's {name} itself (n_ctx = context x batch, n_seq = batch); "
                             "give context and batch instead")
        if name in spec_options:
            engine_opts[name] = value
        elif name in sizing_table:
            sizing[name] = value
        else:
            valid = sorted(set(spec_options) | set(sizing_table))
            raise ValueError(f"engine {engine!r} has no option {name!r} for fit; its options: {', '.join(valid)}")
    return engine_opts, sizing


def _setup(model, *, gpu, num_gpus, tp, pp, context, batch, weight_dtype, kv_dtype, engine,
           gpu_memory_utilization, options) -> tuple[_Setup, list[str]]:
    notes = []
    model = as_model(model)
    gpu = get_gpu(gpu)
    spec = _spec(engine)
    name = spec.name
    family = "hf" if name.startswith("hf-") else name
    if family != "hf" and name not in _SIZING:
        raise ValueError(f"fit has no memory budget rule for engine {name!r}; it sizes: "
                         + ", ".join(sorted(set(_SIZING) | {"hf-*"})))
    num_gpus = require_positive_int("num_gpus", num_gpus)
    pp = require_positive_int("pp", pp)
    context = parse_tokens(context)
    if batch is not None:
        batch = require_positive_int("batch", batch)
    utilization = _fraction("gpu_memory_utilization", gpu_memory_utilization)
    if name != "vllm" and utilization != Fraction(9, 10):
        knob = {"sglang": "mem_fraction_static", "trtllm": "free_gpu_memory_fraction"}.get(name)
        raise ValueError(f"gpu_memory_utilization is vLLM's setting; engine {name!r} "
                         + (f"takes {knob}=..." if knob else "has no such fraction"))
    if name == "llama.cpp":
        if tp not in (None, 1):
            raise ValueError(f"llama.cpp splits layers across GPUs (-sm layer), not tensors: use pp, got tp={tp}")
        tp = 1
        if pp == 1 and num_gpus > 1:
            pp = num_gpus
            notes.append(f"llama.cpp splits the layers over the {num_gpus} GPUs (pp={pp})")
    elif family == "hf" and (tp not in (None, 1) or pp != 1):
        raise ValueError(f"engine {name!r} sizes one device per model copy (tp and pp 1; extra GPUs "
                         f"serve as replicas), got tp={tp}, pp={pp}")
    if tp is None:
        tp = 1 if family == "hf" else max(1, num_gpus // pp)
    tp = require_positive_int("tp", tp)
    if tp * pp > num_gpus:
        raise ValueError(f"tp={tp} x pp={pp} needs {tp * pp} GPUs, but num_gpus={num_gpus}")
    if num_gpus % (tp * pp):
        notes.append(f"{num_gpus % (tp * pp)} of the {num_gpus} GPUs stay idle: replicas need tp x pp = {tp * pp}")
    if model.num_attention_heads % tp:
        raise ValueError(f"tp={tp} must divide the model's {model.num_attention_heads} attention heads")
    if pp > model.num_layers:
        raise ValueError(f"pp={pp} exceeds the model's {model.num_layers} layers")
    engine_opts, sizing = _split_options(name, family, spec.options, options)
    if isinstance(weight_dtype, str) and weight_dtype.strip().lower() == "auto" and sizing.get("weights_bytes") is None \
            and model.params_total and family in ("vllm", "sglang", "trtllm") and model.dtype == "fp32":
        weight_dtype = "fp16"
        notes.append("fp32 checkpoint: serving engines load it in fp16 (dtype 'auto')")
    s = _Setup(model=model, gpu=gpu, engine=name, tp=tp, pp=pp, num_gpus=num_gpus, context=context,
               batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype, utilization=utilization,
               engine_options=engine_opts, sizing=sizing)
    return s, notes


# ----------------------------------------------------------------------------- decode speed

def _kv_read_bytes(s: _Setup, tokens: int, batch: int) -> int:
    """KV (+ state) bytes one decode step reads, summed over the tp ranks and pp stages of a replica."""
    est = _estimate(s.model, engine=s.engine, tokens=tokens, batch=batch, kv_dtype=s.kv_dtype,
                    tp=s.tp, pp=s.pp, **s.engine_options)
    return est.kv_bytes_all_devices + est.state_bytes * s.tp * s.pp


def _active_weight_bytes(s: _Setup, budget: _Budget, batch: int) -> int:
    """Weight bytes one decode step reads over a replica (tp ranks x pp stages)."""
    if budget.weights_obj is not None:
        return budget.weights_obj.active_bytes(batch)
    whole = budget.weights * s.tp * s.pp
    if s.model.params_total and s.model.params_active:
        return whole * s.model.params_active // s.model.params_total
    return whole


def kv_crossover_tokens(model, *, batch: int = 1, weight_dtype="auto", kv_dtype="auto",
                        engine: str = "ideal", tp: int = 1, pp: int = 1, **options) -> int | None:
    """The context at which ``batch`` sequences' KV reads per decode step equal the weight reads.

    None when the KV never catches up within 2**24 tokens (sliding-window or linear models).
    """
    s, _ = _setup(model, gpu="custom:1TiB", num_gpus=tp * pp, tp=tp, pp=pp, context=1, batch=batch,
                  weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=engine, gpu_memory_utilization=0.9,
                  options=options)
    budget = _budget(s, batch)
    return _crossover(s, budget, batch)


def _crossover(s: _Setup, budget: _Budget, batch: int) -> int | None:
    weights_read = _active_weight_bytes(s, budget, batch)

    def accepted(n: int) -> bool:
        try:
            _kv_read_bytes(s, n, batch)
            return True
        except ValueError:        # longer than the engine takes (a StaticCache's max_cache_len)
            return False

    limit = _SEARCH_CAP if accepted(_SEARCH_CAP) else _largest(accepted, _SEARCH_CAP, s.context)
    if limit == 0 or _kv_read_bytes(s, limit, batch) < weights_read:
        return None
    guess = _linear_guess(lambda n: _kv_read_bytes(s, n, batch), weights_read, min(4096, limit))
    below = _largest(lambda n: _kv_read_bytes(s, n, batch) < weights_read, limit, guess)
    return below + 1


# ----------------------------------------------------------------------------- fit

def fit(model, *, gpu, num_gpus: int = 1, tp: int | None = None, pp: int = 1, context, batch: int | None = None,
        weight_dtype="auto", kv_dtype="auto", engine: str = "vllm", gpu_memory_utilization=0.9,
        **options) -> Fit:
    """Does ``batch`` x ``context`` fit on ``num_gpus`` x ``gpu`` under ``engine``? (module docstring)"""
    s, notes = _setup(model, gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, context=context, batch=batch,
                      weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine=engine,
                      gpu_memory_utilization=gpu_memory_utilization, options=options)
    if s.gpu.usable_memory_source == "vendor_tool" and s.gpu.name in list_gpus():
        notes.append(f"{s.gpu.name}: sized from the vendor tool's total; CUDA sees a few hundred MiB less")
    wanted = s.batch or 1
    per_replica = _per_replica(s)
    budget = _budget(s, per_replica)
    notes.extend(budget.notes)
    at_one = _budget(s, 1) if _batch_dependent(s) else budget
    per_replica_max = _max_batch(s, at_one.kv_memory)
    max_batch = per_replica_max * s.replicas
    fits = max_batch >= wanted
    max_context = _max_context(s, at_one.kv_memory, per_replica)
    if max_context == _context_cap(s.model) and s.model.max_position_embeddings:
        notes.append(f"max_context stops at the model's max_position_embeddings ({max_context:,})")
    if per_replica_max == _BATCH_CAP.get(s.engine):
        notes.append(f"max_batch stops at {s.engine}'s limit of {per_replica_max} sequences per replica")
    min_gpus = _min_gpus(s)
    kv_per_seq = _need(s, s.context, 1)
    work_batch = per_replica if s.batch is not None else max(per_replica_max, 1)
    kv_work = _need(s, s.context, work_batch)
    shortfall = 0 if fits else max(_need(s, s.context, per_replica) - budget.kv_memory, 0)
    past = past_positions(s.model, s.engine, s.context)
    if past:
        notes.append(past[0])
    if budget.kv_memory < 0:
        notes.append(f"no memory left for KV: weights, activations and overhead exceed the budget by "
                     f"{format_bytes(-budget.kv_memory)} per device")
    kv_pool = max(budget.kv_memory, 0) if s.engine in _PREALLOCATING else kv_work
    breakdown = {"total": budget.total, "weights": budget.weights, "kv": kv_work, "kv_pool": kv_pool,
                 "activations": budget.activations, "overhead": budget.overhead}
    breakdown["free"] = (budget.total - budget.weights - max(kv_pool, kv_work) - budget.activations
                         - budget.overhead)
    speed = speed_all = crossover = None
    if s.gpu.bandwidth_bytes_per_s:
        step_bytes = (_active_weight_bytes(s, budget, work_batch) + _kv_read_bytes(s, s.context, work_batch))
        speed = s.gpu.bandwidth_bytes_per_s * s.tp / step_bytes
        speed_all = speed * work_batch * s.replicas
    crossover = _crossover(s, budget, work_batch)
    cap = None
    if ENGINES[s.engine].capacity is not None and budget.kv_memory > 0:
        cap = _capacity(s.model, engine=s.engine, kv_memory=budget.kv_memory, kv_dtype=s.kv_dtype, tp=s.tp,
                        pp=s.pp, max_model_len=s.context, **s.engine_options)
    est_dtype = _estimate(s.model, engine=s.engine, tokens=1, batch=1, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
                          **s.engine_options).kv_dtype
    weight_name = budget.weights_obj.weight_dtype if budget.weights_obj else "given"
    suggestions = () if fits else tuple(_suggest(s, budget, max_context, per_replica_max, min_gpus))
    result = Fit(model=s.model.name, gpu=s.gpu.name, engine=s.engine, num_gpus=s.num_gpus, tp=s.tp, pp=s.pp,
                 replicas=s.replicas, context=s.context, batch=s.batch, weight_dtype=weight_name,
                 kv_dtype=est_dtype, fits=fits, max_batch=max_batch, max_context=max_context, min_gpus=min_gpus,
                 breakdown=breakdown, kv_memory_bytes=max(budget.kv_memory, 0), kv_bytes_per_sequence=kv_per_seq,
                 shortfall_bytes=shortfall, decode_tokens_per_s=speed, decode_tokens_per_s_aggregate=speed_all,
                 kv_crossover_tokens=crossover, suggestions=suggestions, notes=tuple(dict.fromkeys(notes)),
                 capacity=cap, breakdown_batch=work_batch, breakdown_context=s.context,
                 engine_refuses=past[1].get("engine_refuses") if past else None,
                 engine_allows_with=past[1].get("engine_allows_with") if past else None)
    if max_batch == 0:
        raise FitError(_not_fitting_message(s, budget, result), result)
    return result


def _tp_candidates(s: _Setup) -> list[int]:
    heads = s.model.num_attention_heads
    return [tp for tp in (1, 2, 4, 8, 16, 32, 64) if heads % tp == 0]


def _min_gpus(s: _Setup) -> int | None:
    """The fewest GPUs (one replica: tp x pp) that fit the workload."""
    wanted = s.batch or 1
    if s.family == "hf":
        return 1 if _fits(replace(s, num_gpus=1, batch=wanted)) else None
    if s.engine == "llama.cpp":
        for pp in range(1, min(64, s.model.num_layers) + 1):
            trial = replace(s, pp=pp, num_gpus=pp, batch=wanted)
            if _fits(trial):
                return pp
        return None
    for tp in _tp_candidates(s):
        trial = replace(s, tp=tp, num_gpus=tp * s.pp, batch=wanted)
        try:
            if _fits(trial):
                return tp * s.pp
        except ValueError:       # tp not allowed for this model's KV heads or state
            continue
    return None


def _suggest(s: _Setup, budget: _Budget, max_context: int, per_replica_max: int,
             min_gpus: int | None) -> list[str]:
    out = []
    gpus_per_replica = s.tp * s.pp
    if min_gpus and min_gpus > gpus_per_replica:
        how = f"pp={min_gpus}" if s.engine == "llama.cpp" or s.family == "hf" else f"tp={min_gpus // s.pp}"
        out.append(f"{min_gpus} GPUs per replica ({how})")
    if s.batch and per_replica_max:
        replicas = -(-s.batch // per_replica_max)
        if replicas > s.replicas:
            out.append(f"{replicas * gpus_per_replica} GPUs as {replicas} replicas of tp={s.tp} x pp={s.pp} "
                       f"({per_replica_max} sequences each)")
    current = budget.weights_obj.weight_dtype if budget.weights_obj else None
    if current and s.sizing.get("weights_bytes") is None:
        family = s.family if s.family in _SMALLER_FORMATS else "serving"
        if s.engine == "ideal":
            family = "serving"
        current_bytes = budget.weights_obj.total_bytes
        for name in _SMALLER_FORMATS[family]:
            try:
                smaller = _weights(s.model, name).total_bytes < current_bytes
                if smaller and _fits(replace(s, weight_dtype=name)):
                    out.append(f"weight_dtype={name!r}")
                    break
            except ValueError:
                continue
    kv_alt = "q8_0" if s.engine == "llama.cpp" else "fp8"
    if s.family != "hf":
        try:
            here = _estimate(s.model, engine=s.engine, tokens=1, batch=1, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
                             **s.engine_options)
            if here.kv_dtype in ("bf16", "fp16", "fp32", "f16") and _fits(replace(s, kv_dtype=kv_alt)):
                out.append(f"kv_dtype={kv_alt!r}")
        except ValueError:
            pass
    if 0 < max_context < s.context:
        out.append(f"context <= {max_context:,} tokens" + (f" at batch {s.batch}" if s.batch else ""))
    max_batch = per_replica_max * s.replicas
    if s.batch and 0 < max_batch < s.batch:
        out.append(f"batch <= {max_batch} at {s.context:,} tokens")
    return out


def _not_fitting_message(s: _Setup, budget: _Budget, result: Fit) -> str:
    where = (f"{s.num_gpus} x {s.gpu.name} ({s.engine}, tp={s.tp}, pp={s.pp}, "
             f"weights {result.weight_dtype}, KV {result.kv_dtype})")
    need = result.kv_bytes_per_sequence
    if budget.kv_memory <= 0:
        why = (f"the weights ({format_bytes(budget.weights)} per device) and the engine's reserve leave "
               f"{format_bytes(budget.kv_memory)} for KV")
    else:
        why = f"{format_bytes(budget.kv_memory)} is left for KV per device"
    short = need - budget.kv_memory
    text = (f"{s.model.name} does not fit on {where}: one sequence of {s.context:,} tokens needs "
            f"{format_bytes(need)} of KV per device and {why} — short by {format_bytes(short)} "
            f"({short:,} B) per device.")
    if result.suggestions:
        text += " What would fit: " + "; ".join(result.suggestions) + "."
    else:
        text += " Nothing tried fits (more GPUs up to 64, smaller weight and KV formats, shorter context)."
    return text
