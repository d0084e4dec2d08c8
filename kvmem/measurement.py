"""Measuring for real: build the real transformers cache objects with torch and count them.

``measure`` builds a transformers 5.24 cache (DynamicCache(config=...), StaticCache,
QuantizedCache with the hqq, quanto or fp8 backend) -- or the seed's plain ``torch.cat``
cache, engine ``"toy"`` -- from the model's real ``config.json`` and drives it with K/V
tensors of the model's real per-layer shapes through ``cache.update`` (plus
``update_conv_state`` / ``update_recurrent_state`` for linear-attention layers and
``update_indexer`` for DeepSeek-V3.2), exactly as a forward pass does, layer by layer: one
prefill of ``prompt_tokens`` tokens, then one decode token per step up to ``tokens``. No
weights, no Hub, no download. The shapes come from the transformers config object, read the
way the modeling files read it, independently of kvmem's own config reader; the prediction
comes from ``kvmem.estimate``.

What is compared:

* ``tensor_bytes`` -- the unique storages the cache object holds at the end, deduplicated by
  ``untyped_storage().data_ptr()``; a view over a larger buffer (a sliding layer's last
  window - 1 tokens) counts the whole buffer. It must equal ``predicted_bytes`` (K + V +
  recurrent state of the estimate) to the byte.
* ``allocated_bytes`` / ``peak_bytes`` -- the allocator's view of the build: net and high-water
  mark above the start. CPU: the profiler's memory events (``torch.profiler`` with
  ``profile_memory=True``, its event tree in time order); the CPU allocator reports the bytes
  requested, so the net equals ``tensor_bytes`` (plus the int64 counter a DeepSeek-V3.2 static
  layer creates lazily). The peak must equal the estimate's ``peak_bytes`` to the byte for
  hf-dynamic, hf-static and toy; for hqq and quanto it depends on their working sets (counted
  in kvmem/engines/hf/quantized.py; exact on torch 2.13 CPU) and is allowed 1 %. CUDA:
  ``torch.cuda.memory_allocated`` / ``max_memory_allocated`` deltas after ``synchronize``,
  with the rounding slack below. The incoming K/V of each step are views of one buffer
  allocated before the start, so the step's own activations are not counted (the estimate
  does not count them either).

PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp) rounds every request up
to a multiple of 512 bytes. Requests up to 1 MiB are carved from 2 MiB segments (the small
pool); larger ones from 20 MiB segments while below 10 MiB, else from segments rounded up to
2 MiB. A cached block is split only when the remainder is worth keeping (> 1 MiB in the large
pool), so a reused block may be larger than the request. ``memory_allocated`` counts these
block sizes, hence on CUDA ``allocated_bytes`` is at least the sum of the storages rounded up
to 512 B and may exceed it by up to 1 MiB per large tensor; ``memory_reserved`` counts whole
segments, so ``reserved_bytes`` can be far above ``allocated_bytes`` when many mid-size
tensors each take part of a 20 MiB segment. ``torch.cuda.empty_cache()`` is called before
each CUDA measurement so that the reserved delta is this cache's own.

A run is refused before any K/V is allocated (a transformers cache object is empty until its
first update) when its predicted peak plus the input buffer exceeds 80 % of the device's free
memory (CPU: the least of MemAvailable, the cgroup's limit and RLIMIT_AS; CUDA:
``torch.cuda.mem_get_info``; less what runs already admitted hold -- kvmem.admission); the
message says how many tokens fit at this batch. Measurements run one at a time per process,
imports included (the torch profiler is not safe in two threads: kvmem.admission); a caller
queued behind another is told so through ``on_wait``.

The CUDA path is the same drive with the allocator's counters instead of the profiler; its
test (tests/test_measure.py::test_cuda_allocator_view) runs where torch sees a GPU. The
rounding rules above are read from the allocator's source and have not been confirmed on a
GPU by this project yet.

torch and transformers are imported inside the functions: ``import kvmem`` never loads them.
The validation suite that runs ``measure`` over the presets is kvmem.validation.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

from . import admission, catalog
from .engines import estimate
from .engines.hf import DynamicGrowth, Slot, prompt_tokens_of
from .model import FULL, Model
from .units import format_bytes, parse_tokens, require_positive_int

__all__ = ["Measurement", "measure", "ENGINES", "MEMORY_FRACTION", "resolve_device", "backend_problem"]

ENGINES = ("hf-dynamic", "hf-static", "hf-quantized", "toy")
MEMORY_FRACTION = admission.MEMORY_FRACTION  # refuse a run whose need exceeds this share of the free memory
# Published model_types transformers reads with another family's config class.
_SAME_AS = {"kimi_k2": "deepseek_v3"}
_QUANTIZED_PEAK_TOLERANCE = 0.01  # hqq/quanto working sets on CPU (see the module docstring)
_CUDA_SLACK_PER_LAYER = 2 * 2**20  # CUDA rounding: up to 1 MiB of unsplit block per K and V


@dataclass(frozen=True)
class Measurement:
    """A real cache built with torch, its bytes counted three ways, and kvmem's prediction."""

    model: str
    engine: str
    tokens: int
    batch: int
    kv_dtype: str
    device: str
    predicted_bytes: int
    tensor_bytes: int
    allocated_bytes: int
    peak_bytes: int
    predicted_peak_bytes: int
    peak_tolerance_bytes: int
    reserved_bytes: int | None = None
    options: dict = field(default_factory=dict)
    storages: int = 0
    predicted_per_layer: tuple[int, ...] = ()
    measured_per_layer: tuple[int, ...] = ()
    seconds: float = 0.0
    cuda: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def bytes_match(self) -> bool:
        """The storages held are exactly the predicted bytes."""
        return self.tensor_bytes == self.predicted_bytes

    @property
    def peak_matches(self) -> bool:
        """The measured high-water mark is within the stated tolerance of the predicted one."""
        return abs(self.peak_bytes - self.predicted_peak_bytes) <= self.peak_tolerance_bytes

    @property
    def matches(self) -> bool:
        return self.bytes_match and self.peak_matches

    @property
    def difference_bytes(self) -> int:
        """tensor_bytes - predicted_bytes."""
        return self.tensor_bytes - self.predicted_bytes

    def to_dict(self) -> dict:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["predicted_per_layer"] = list(self.predicted_per_layer)
        data["measured_per_layer"] = list(self.measured_per_layer)
        data["notes"] = list(self.notes)
        data.update(matches=self.matches, bytes_match=self.bytes_match, peak_matches=self.peak_matches,
                    difference_bytes=self.difference_bytes, skipped=None)
        return data


# ---------------------------------------------------------------------------------------------
# Inputs


def resolve_device(device: str):
    import torch
    name = str(device).strip().lower()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name != "cpu" and not name.startswith("cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch {torch.__version__} sees no CUDA GPU")
    dev = torch.device(name)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _free_memory_bytes(device) -> int:
    """Memory a run may take on ``device`` now (kvmem.admission.free_bytes: process limits and
    the ledger of admitted runs included)."""
    return admission.free_bytes(device)


def _torch_dtype(name: str):
    import torch
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' config warnings off; and hqq's import of torch.utils.mkldnn, which trips
    torch 2.13's own DeprecationWarning for torch.jit.script_method, kept quiet."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.jit.script_method.*", category=DeprecationWarning)
        from transformers.utils import logging
        level = logging.get_verbosity()
        logging.set_verbosity_error()
        try:
            yield
        finally:
            logging.set_verbosity(level)


def _hf_config(model: Model):
    """The transformers config object for a model's own config.json (kvmem's preset data)."""
    if not model.config:
        raise ValueError(f"measure needs the model's config.json; {model.name!r} has none "
                         "(use a preset name, a config dict or Model.from_hf_config)")
    from transformers import CONFIG_MAPPING
    raw = dict(model.config)
    model_type = _SAME_AS.get(raw.get("model_type"), raw.get("model_type"))
    if model_type not in CONFIG_MAPPING:
        raise ValueError(f"transformers has no config class for model_type {raw.get('model_type')!r}")
    with _quiet_transformers():
        return CONFIG_MAPPING[model_type](**{k: v for k, v in raw.items() if k != "model_type"})


# ---------------------------------------------------------------------------------------------
# What each layer hands to its cache, read from the transformers config


@dataclass(frozen=True)
class _LayerPlan:
    kind: str                      # "attention", "linear", "dummy"
    k_shape: tuple = ()            # per token: (heads, k_dim)
    v_shape: tuple = ()
    index_dim: int = 0
    conv: tuple = ()               # (channels, kernel)
    recurrent: tuple = ()          # per sequence, fp32


def _attention_shape(text) -> tuple[tuple, tuple, int]:
    """(K (heads, dim), V (heads, dim), indexer dim) as the family's attention module caches them."""
    if getattr(text, "kv_lora_rank", None):
        # modeling_deepseek_v3.py: cache.update(latent [B,1,S,kv_lora_rank], rope key [B,1,S,rope])
        return (1, text.kv_lora_rank), (1, text.qk_rope_head_dim), 0
    heads = text.num_attention_heads
    if text.model_type == "falcon":
        # modeling_falcon.py: num_kv_heads = num_heads if new_decoder_architecture else self.num_kv_heads
        multi_query = getattr(text, "multi_query", True)
        own = text.num_kv_heads if (text.new_decoder_architecture or not multi_query) else 1
        kv_heads = heads if text.new_decoder_architecture else own
    else:
        kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return (kv_heads, head_dim), (kv_heads, head_dim), 0


def _linear_shape(text) -> tuple[tuple, tuple]:
    """(conv (channels, kernel), recurrent state shape) per sequence, from the modeling files."""
    t = text.model_type
    if t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        # modeling_qwen3_next.py GatedDeltaNet: conv_dim = 2 key_dim + value_dim; state [nv, dk, dv]
        nk, nv = text.linear_num_key_heads, text.linear_num_value_heads
        dk, dv = text.linear_key_head_dim, text.linear_value_head_dim
        return (2 * nk * dk + nv * dv, text.linear_conv_kernel_dim), (nv, dk, dv)
    if t == "jamba":
        # modeling_jamba.py JambaMambaMixer: conv over intermediate_size, state [inner, d_state]
        inner = text.mamba_expand * text.hidden_size
        return (inner, text.mamba_d_conv), (inner, text.mamba_d_state)
    if t == "nemotron_h":
        # modeling_nemotron_h.py NemotronHMamba2Mixer: conv_dim = inner + 2 n_groups d_state
        inner = text.mamba_num_heads * text.mamba_head_dim
        conv = inner + 2 * text.n_groups * text.ssm_state_size
        return (conv, text.conv_kernel), (text.mamba_num_heads, text.mamba_head_dim, text.ssm_state_size)
    raise ValueError(f"measure does not know the linear-attention state layout of model_type {t!r}")


def _plan(config, cache) -> list[_LayerPlan]:
    from transformers.cache_utils import DummyLayer, LinearAttentionCacheLayerMixin
    text = config.get_text_config(decoder=True)
    plans = []
    for layer in cache.layers:
        if isinstance(layer, DummyLayer):
            plans.append(_LayerPlan("dummy"))
        elif isinstance(layer, LinearAttentionCacheLayerMixin):
            conv, recurrent = _linear_shape(text)
            plans.append(_LayerPlan("linear", conv=conv, recurrent=recurrent))
        else:
            k, v, _ = _attention_shape(text)
            index = text.index_head_dim if hasattr(layer, "update_indexer") else 0
            plans.append(_LayerPlan("attention", k, v, index_dim=index))
    return plans


def _toy_plan(model: Model) -> list[_LayerPlan]:
    kinds = {layer.kind for layer in model.layers}
    if kinds != {FULL}:
        raise ValueError(f"engine 'toy' is the seed's cache, every layer full attention with per-head K/V; "
                         f"{model.name} has {model.kinds}: measure it with engine='hf-dynamic'")
    return [_LayerPlan("attention", (layer.kv_heads, layer.head_dim_k), (layer.kv_heads, layer.head_dim_v))
            for layer in model.layers]


def _buffer_elements(plans, *, batch: int, prompt: int) -> tuple[int, int]:
    """Elements of the compute-dtype input buffer and of the fp32 state buffer (the prefill's)."""
    compute = state = 0
    for p in plans:
        if p.kind == "attention":
            need = batch * prompt * (p.k_shape[0] * p.k_shape[1] + p.v_shape[0] * p.v_shape[1] + p.index_dim)
            compute = max(compute, need)
        elif p.kind == "linear":
            compute = max(compute, batch * p.conv[0] * prompt)
            recurrent = batch
            for size in p.recurrent:
                recurrent *= size
            state = max(state, recurrent)
    return compute, state


# ---------------------------------------------------------------------------------------------
# Building and counting


class _Inputs:
    """Views of one buffer allocated before the measurement starts: the steps' K/V."""

    def __init__(self, compute, state):
        self.compute, self.state = compute, state

    def view(self, offset: int, shape: tuple, *, fp32: bool = False):
        buf = self.state if fp32 else self.compute
        n = 1
        for size in shape:
            n *= size
        return buf[offset:offset + n].view(shape), offset + n


def _drive(cache, plans, inputs: _Inputs, *, batch: int, prompt: int, steps: int, toy: bool) -> None:
    """One prefill of ``prompt`` tokens, then ``steps`` decode tokens, every layer in order."""
    import torch
    for j in range(steps + 1):
        s = prompt if j == 0 else 1
        for i, p in enumerate(plans):
            if p.kind == "dummy":
                continue
            if p.kind == "linear":
                if j == 0:
                    conv, _ = inputs.view(0, (batch, p.conv[0], s))
                    out = cache.update_conv_state(conv, i, conv_kernel_size=p.conv[1])
                    del out
                recurrent, _ = inputs.view(0, (batch, *p.recurrent), fp32=True)
                out = cache.update_recurrent_state(recurrent, i)
                del out
                continue
            k, offset = inputs.view(0, (batch, p.k_shape[0], s, p.k_shape[1]))
            v, offset = inputs.view(offset, (batch, p.v_shape[0], s, p.v_shape[1]))
            if toy:
                cache[i][0] = torch.cat([cache[i][0], k], dim=2)
                cache[i][1] = torch.cat([cache[i][1], v], dim=2)
            else:
                out = cache.update(k, v, i)
                del out
            if p.index_dim:
                index, _ = inputs.view(offset, (batch, s, p.index_dim))
                out = cache.update_indexer(index, i)
                del out
            del k, v


def _leaves(obj):
    """Plain tensors inside a cache entry: tensors, quanto QTensors (flattened), tuples, dicts."""
    import torch
    if obj is None:
        return
    if isinstance(obj, torch.Tensor):
        if hasattr(obj, "__tensor_flatten__") and type(obj) is not torch.Tensor:
            names, _ = obj.__tensor_flatten__()
            for name in names:
                yield from _leaves(getattr(obj, name))
        else:
            yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _leaves(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _leaves(item)


def _layer_tensors(layer):
    for name in ("keys", "values", "indexer_keys", "_quantized_keys", "_quantized_values",
                 "conv_states", "recurrent_states"):
        yield from _leaves(getattr(layer, name, None))


def _count_storages(layers, device) -> tuple[int, int, tuple[int, ...]]:
    """(unique storage bytes, storage count, bytes per layer) of the tensors the cache holds."""
    seen = set()
    per_layer = []
    for layer in layers:
        total = 0
        tensors = layer if isinstance(layer, list) else _layer_tensors(layer)
        for t in tensors:
            storage = t.untyped_storage()
            key = (str(t.device), storage.data_ptr())
            if storage.nbytes() == 0 or key in seen:
                continue
            if t.device.type != device.type:
                raise RuntimeError(f"a cache tensor is on {t.device}, not on {device}")
            seen.add(key)
            total += storage.nbytes()
        per_layer.append(total)
    return sum(per_layer), len(seen), tuple(per_layer)


def _cpu_allocations(prof) -> list[int]:
    """Signed CPU allocation sizes in time order, from the profiler's memory events."""
    from torch._C._profiler import _EventType
    events = []

    def walk(nodes):
        for node in nodes:
            if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
                events.append((node.start_time_ns, len(events), node.extra_fields.alloc_size))
            walk(node.children)

    walk(prof.profiler.kineto_results.experimental_event_tree())
    return [size for _, _, size in sorted(events)]


def _running(sizes: list[int]) -> tuple[int, int]:
    """(net, high-water mark) of a sequence of signed allocation sizes."""
    running = peak = 0
    for size in sizes:
        running += size
        peak = max(peak, running)
    return running, peak


def backend_problem(backend: str) -> str | None:
    """Why a quantisation backend cannot run here, or None when it can."""
    try:
        with _quiet_transformers():
            if backend == "quanto":
                import optimum.quanto  # noqa: F401
                from optimum.quanto.library.extensions import is_extension_available
                if not is_extension_available("quanto_cpp"):
                    return "optimum-quanto's C++ extension (quanto_cpp) cannot be built or loaded on this machine"
            elif backend == "hqq":
                import hqq.core.quantize  # noqa: F401
    except Exception as exc:  # an optional library failing to import or build: say why
        return f"{backend} cannot run here: {type(exc).__name__}: {exc}"
    return None


def _need_bytes(model: Model, engine: str, *, tokens: int, batch: int, kv_name: str, options: dict,
                plans) -> int:
    """Predicted peak plus the input buffer: what a run allocates at most."""
    peak = _prediction(model, engine, tokens=tokens, batch=batch, kv_name=kv_name, options=options)[1]
    prompt = min(options.get("prompt_tokens") or tokens, tokens)
    compute, state = _buffer_elements(plans, batch=batch, prompt=prompt)
    element = {"fp32": 4, "fp16": 2, "bf16": 2}[kv_name]
    return peak + compute * element + state * 4


def _prediction(model: Model, engine: str, *, tokens: int, batch: int, kv_name: str, options: dict):
    """(predicted bytes, predicted peak, per layer, notes) from kvmem.estimate."""
    if engine == "toy":
        ideal = estimate(model, engine="ideal", tokens=tokens, batch=batch, kv_dtype=kv_name)
        prompt = options.get("prompt_tokens") or tokens
        own = tuple(Slot("attention", "full_attention", layer.kv_heads, layer.head_dim_k, layer.head_dim_v)
                    for layer in model.layers)
        work = DynamicGrowth(own, batch=batch, prompt=min(prompt, tokens), tokens=tokens,
                        e={"fp32": 4, "fp16": 2, "bf16": 2}[kv_name])
        return ideal.total_bytes, max(work.peak(), ideal.total_bytes), ideal.per_layer, ()
    result = estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_name, **options)
    return result.total_bytes, result.peak_bytes, result.per_layer, result.notes


def _guard(model: Model, engine: str, device, *, tokens: int, batch: int, kv_name: str, options: dict,
           plans) -> int:
    """The bytes the run needs, when they fit the budget; else a ValueError saying what fits."""
    budget = int(_free_memory_bytes(device) * MEMORY_FRACTION)
    need = _need_bytes(model, engine, tokens=tokens, batch=batch, kv_name=kv_name, options=options, plans=plans)
    if need <= budget:
        return need

    def fits(t: int) -> bool:
        opts = dict(options)
        if opts.get("prompt_tokens"):
            opts["prompt_tokens"] = min(opts["prompt_tokens"], t)
        try:
            return _need_bytes(model, engine, tokens=t, batch=batch, kv_name=kv_name, options=opts,
                               plans=plans) <= budget
        except ValueError:
            return False

    low, high = 0, tokens - 1
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    hint = (f"at batch {batch} up to {low:,} tokens fit" if low else
            f"not even 1 token fits at batch {batch}")
    raise ValueError(f"measure refuses to build {model.name} ({engine}, {tokens:,} tokens x batch {batch}) on "
                     f"{device}: it needs {format_bytes(need)} ({need:,} B: predicted peak plus the input "
                     f"buffer) but {int(MEMORY_FRACTION * 100)}% of the free memory is {format_bytes(budget)}; "
                     f"{hint}")


def _build_cache(engine: str, config, *, tokens: int, options: dict):
    with _quiet_transformers():
        from transformers import DynamicCache, QuantizedCache, StaticCache
        if engine == "hf-dynamic":
            return DynamicCache(config=config)
        if engine == "hf-static":
            return StaticCache(config=config, max_cache_len=options.get("max_cache_len") or tokens)
        return QuantizedCache(backend=options.get("backend", "quanto"), config=config,
                              nbits=options.get("nbits"), q_group_size=options.get("q_group_size"),
                              residual_length=options.get("residual_length"))


_PROFILER_NOISE = ("USDT:", "STAGE:")  # kineto's own lines ("USDT: ... profiler_start", stage markers)


@contextlib.contextmanager
def _quiet_native_stderr():
    """Keep what the profiler's C++ side (kineto) writes straight to file descriptor 2 out of
    the CLI's progress bar, without losing a real error: fd 2 goes to a temporary file whose
    lines other than kineto's own are written back afterwards, and a fatal signal meanwhile
    (a segfault) is still reported on the real stderr by faulthandler."""
    import faulthandler
    import tempfile
    sys.stderr.flush()
    saved = os.dup(2)
    real = os.fdopen(saved, "w", closefd=False)
    was_enabled = faulthandler.is_enabled()
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        faulthandler.enable(file=real, all_threads=True)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            faulthandler.disable()
            if was_enabled:  # as before, on file descriptor 2 (sys.stderr may be a capture without one)
                with contextlib.suppress(ValueError, OSError, AttributeError):
                    faulthandler.enable(file=sys.__stderr__, all_threads=True)
            capture.seek(0)
            kept = [line for line in capture.read().decode("utf-8", "replace").splitlines()
                    if line.strip() and not line.lstrip().startswith(_PROFILER_NOISE)]
            real.close()
            os.close(saved)
            if kept:
                print("\n".join(kept), file=sys.stderr, flush=True)


def _run_cpu(drive) -> tuple[int, int, None, dict]:
    """(allocated, peak, reserved, CUDA stats): the profiler's CPU memory events of ``drive()``."""
    from torch.profiler import ProfilerActivity, profile
    with _quiet_native_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        drive()
    allocated, peak = _running(_cpu_allocations(prof))
    return allocated, peak, None, {}


def _run_cuda(drive, device) -> tuple[int, int, int, dict]:
    """(allocated, peak, reserved, CUDA stats): the caching allocator's counters around ``drive()``."""
    import torch
    gc.collect()  # free any unreachable tensors of an earlier run before the baseline
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    base_allocated = torch.cuda.memory_allocated(device)
    base_reserved = torch.cuda.memory_reserved(device)
    base_segments = torch.cuda.memory_stats(device).get("segment.all.current", 0)
    torch.cuda.reset_peak_memory_stats(device)
    drive()
    torch.cuda.synchronize(device)
    stats = torch.cuda.memory_stats(device)
    return (torch.cuda.memory_allocated(device) - base_allocated,
            torch.cuda.max_memory_allocated(device) - base_allocated,
            torch.cuda.memory_reserved(device) - base_reserved,
            {"peak_reserved_bytes": torch.cuda.max_memory_reserved(device) - base_reserved,
             "segments": stats.get("segment.all.current", 0) - base_segments,
             "device_name": torch.cuda.get_device_name(device)})


def _peak_tolerance(engine: str, options: dict, device, predicted_peak: int, layers: int) -> int:
    """How far the measured peak may be from the predicted one (see the module docstring)."""
    quantized = engine == "hf-quantized"
    if device.type == "cuda":
        return _CUDA_SLACK_PER_LAYER * layers + (predicted_peak // 2 if quantized else 0)
    if quantized and options.get("backend", "quanto") != "fp8":
        return int(predicted_peak * _QUANTIZED_PEAK_TOLERANCE)
    if quantized:
        return 64 * layers  # fp8: the scale's 0-dim temporaries (amax, float, clamp) are not replayed
    return 0


def measure(model, *, engine: str = "hf-dynamic", tokens, batch: int = 1, kv_dtype="bf16", device="auto",
            on_wait=None, **options) -> Measurement:
    """Build ``engine``'s real cache for ``batch`` sequences of ``tokens`` with torch on ``device``.

    ``engine`` is "hf-dynamic", "hf-static", "hf-quantized" (options as in kvmem.estimate) or
    "toy" (the seed's cat-grown per-layer K/V list; option ``prompt_tokens``). One measurement
    runs at a time per process; ``on_wait(message)`` is called if this one has to queue.
    """
    with admission.serialised(on_wait):
        return _measure(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, device=device,
                        **options)


def _measure(model, *, engine: str, tokens, batch: int, kv_dtype, device, **options) -> Measurement:
    import torch
    from .dtypes import dtype as _dtype
    model = catalog.as_model(model)
    name = str(engine).strip().lower()
    if name not in ENGINES:
        raise ValueError(f"engine for measure must be one of {', '.join(ENGINES)}, got {engine!r}")
    if name == "toy" and set(options) - {"prompt_tokens"}:
        raise ValueError(f"engine 'toy' has only the option 'prompt_tokens', got {sorted(options)}")
    tokens = parse_tokens(tokens)
    batch = require_positive_int("batch", batch)
    plans = _toy_plan(model) if name == "toy" else None
    kv_name = _dtype(kv_dtype, model_dtype=model.dtype).name
    if kv_name not in ("fp32", "fp16", "bf16"):
        raise ValueError(f"kv_dtype for measure is the compute dtype (fp32, fp16 or bf16), got {kv_name!r}")
    predicted, predicted_peak, predicted_layers, notes = _prediction(
        model, name, tokens=tokens, batch=batch, kv_name=kv_name, options=options)
    if name == "hf-quantized":
        problem = backend_problem(options.get("backend", "quanto"))
        if problem:
            raise RuntimeError(problem)
    dev = resolve_device(device)
    element = _torch_dtype(kv_name)
    prompt = prompt_tokens_of(tokens, options.get("prompt_tokens"))

    if name == "toy":
        cache = [[torch.empty((batch, p.k_shape[0], 0, p.k_shape[1]), dtype=element, device=dev),
                  torch.empty((batch, p.v_shape[0], 0, p.v_shape[1]), dtype=element, device=dev)] for p in plans]
    else:
        config = _hf_config(model)
        cache = _build_cache(name, config, tokens=tokens, options=options)
        plans = _plan(config, cache)
    need = _guard(model, name, dev, tokens=tokens, batch=batch, kv_name=kv_name, options=options, plans=plans)
    with admission.reserve(str(dev), need):
        return _run(model, name, dev, cache, plans, tokens=tokens, batch=batch, kv_name=kv_name, element=element,
                    prompt=prompt, options=options, predicted=predicted, predicted_peak=predicted_peak,
                    predicted_layers=predicted_layers, notes=notes)


def _run(model, name, dev, cache, plans, *, tokens, batch, kv_name, element, prompt, options, predicted,
         predicted_peak, predicted_layers, notes) -> Measurement:
    """Drive the cache, count it, and compare (the admitted part of a measurement)."""
    import torch
    compute, state = _buffer_elements(plans, batch=batch, prompt=prompt)
    generator = torch.Generator(device="cpu").manual_seed(0)
    inputs = _Inputs(torch.randn(max(compute, 1), generator=generator).to(dev, element),
                     torch.randn(max(state, 1), generator=generator).to(dev))

    def drive():
        _drive(cache, plans, inputs, batch=batch, prompt=prompt, steps=tokens - prompt, toy=name == "toy")

    started = time.perf_counter()
    if dev.type == "cuda":
        allocated, peak, reserved, cuda_stats = _run_cuda(drive, dev)
    else:
        allocated, peak, reserved, cuda_stats = _run_cpu(drive)
    seconds = time.perf_counter() - started
    tensor_bytes, storages, per_layer = _count_storages(cache if name == "toy" else cache.layers, dev)
    return Measurement(
        model=model.name, engine=name, tokens=tokens, batch=batch, kv_dtype=kv_name, device=str(dev),
        predicted_bytes=predicted, tensor_bytes=tensor_bytes, allocated_bytes=allocated, peak_bytes=peak,
        predicted_peak_bytes=predicted_peak,
        peak_tolerance_bytes=_peak_tolerance(name, options, dev, predicted_peak, len(plans)),
        reserved_bytes=reserved, options=dict(options), storages=storages,
        predicted_per_layer=tuple(predicted_layers), measured_per_layer=per_layer, seconds=round(seconds, 3),
        cuda=cuda_stats, notes=tuple(notes))
