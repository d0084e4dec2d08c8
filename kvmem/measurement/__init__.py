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

The parts, one module each:

* caches.py -- the empty cache object per engine, the device, the transformers config;
* plans.py -- what each layer hands to its cache, read from the config (the modeling files);
* driving.py -- the prefill and decode steps, K/V as views of one input buffer;
* storages.py -- ``tensor_bytes``: the unique storages the cache holds at the end;
* allocators.py -- ``allocated_bytes`` / ``peak_bytes`` / ``reserved_bytes``: the CPU
  profiler's memory events or the CUDA caching allocator's counters (and its rounding);
* result.py -- the ``Measurement`` row and the peak's tolerance.

A run is refused before any K/V is allocated (a transformers cache object is empty until its
first update) when its predicted peak plus the input buffer exceeds 80 % of the device's free
memory (CPU: the least of MemAvailable, the cgroup's limit and RLIMIT_AS; CUDA:
``torch.cuda.mem_get_info``; less what runs already admitted hold -- kvmem.admission); the
message says how many tokens fit at this batch. Measurements run one at a time per process,
imports included (the torch profiler is not safe in two threads: kvmem.admission); a caller
queued behind another is told so through ``on_wait``.

The CUDA path is the same drive with the allocator's counters instead of the profiler; its
test (tests/test_measure.py::test_cuda_allocator_view) runs where torch sees a GPU.

torch and transformers are imported inside the functions: ``import kvmem`` never loads them.
The validation suite that runs ``measure`` over the presets is kvmem.validation.
"""

from __future__ import annotations

import time

from .. import admission, catalog
from ..dtypes import FLOAT_NAMES, float_bytes
from ..engines import engine_estimate
from ..engines.hf import DynamicGrowth, Slot, prompt_tokens_of
from ..model import Model
from ..units import format_bytes, parse_tokens, require_positive_int
from .allocators import cuda_block_model, run_cpu, run_cuda
from .caches import backend_problem, build_cache, build_toy_cache, hf_config, resolve_device, torch_dtype
from .driving import Inputs
from .driving import drive as _drive  # called through this module's name: tests patch kvmem.measurement._drive
from .plans import buffer_elements, plan, toy_plan
from .result import Measurement, peak_tolerance
from .storages import count_storages, storage_sizes

__all__ = ["Measurement", "measure", "ENGINES", "MEMORY_FRACTION", "resolve_device", "backend_problem"]

ENGINES = ("hf-dynamic", "hf-static", "hf-quantized", "toy")
MEMORY_FRACTION = admission.MEMORY_FRACTION  # refuse a run whose need exceeds this share of the free memory


def _free_memory_bytes(device) -> int:
    """Memory a run may take on ``device`` now (kvmem.admission.free_bytes: process limits and
    the ledger of admitted runs included)."""
    return admission.free_bytes(device)


def _need_bytes(model: Model, engine: str, *, tokens: int, batch: int, kv_name: str, options: dict,
                plans) -> int:
    """Predicted peak plus the input buffer: what a run allocates at most."""
    peak = _prediction(model, engine, tokens=tokens, batch=batch, kv_name=kv_name, options=options)[1]
    prompt = min(options.get("prompt_tokens") or tokens, tokens)
    compute, state = buffer_elements(plans, batch=batch, prompt=prompt)
    element = float_bytes(kv_name)
    return peak + compute * element + state * 4


def _prediction(model: Model, engine: str, *, tokens: int, batch: int, kv_name: str, options: dict):
    """(predicted bytes, predicted peak, per layer, notes) from kvmem.estimate."""
    if engine == "toy":
        ideal = engine_estimate(model, engine="ideal", tokens=tokens, batch=batch, kv_dtype=kv_name)
        prompt = options.get("prompt_tokens") or tokens
        own = tuple(Slot("attention", "full_attention", layer.kv_heads, layer.head_dim_k, layer.head_dim_v)
                    for layer in model.layers)
        work = DynamicGrowth(own, batch=batch, prompt=min(prompt, tokens), tokens=tokens,
                        e=float_bytes(kv_name))
        return ideal.total_bytes, max(work.peak(), ideal.total_bytes), ideal.per_layer, ()
    result = engine_estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_name, **options)
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
    from ..dtypes import dtype as _dtype
    model = catalog.as_model(model)
    name = str(engine).strip().lower()
    if name not in ENGINES:
        raise ValueError(f"engine for measure must be one of {', '.join(ENGINES)}, got {engine!r}")
    if name == "toy" and set(options) - {"prompt_tokens"}:
        raise ValueError(f"engine 'toy' has only the option 'prompt_tokens', got {sorted(options)}")
    if any(layer.kind == "compressed" for layer in model.layers):
        # modeling_deepseek_v4.py writes the compressor's rows and buffers from its attention, not through
        # cache.update, which is all measure drives
        raise ValueError("measure drives each cache layer's update() only; DeepSeek-V4's compressed layers are "
                         "filled by its modeling code: `kvmem validate --engine transformers --types deepseek_v4` "
                         "runs the model itself")
    tokens = parse_tokens(tokens)
    batch = require_positive_int("batch", batch)
    plans = toy_plan(model) if name == "toy" else None
    kv_name = _dtype(kv_dtype, model_dtype=model.dtype).name
    if kv_name not in FLOAT_NAMES:
        raise ValueError(f"kv_dtype for measure is the compute dtype (fp32, fp16 or bf16), got {kv_name!r}")
    predicted, predicted_peak, predicted_layers, notes = _prediction(
        model, name, tokens=tokens, batch=batch, kv_name=kv_name, options=options)
    if name == "hf-quantized":
        problem = backend_problem(options.get("backend", "quanto"))
        if problem:
            raise RuntimeError(problem)
    dev = resolve_device(device)
    element = torch_dtype(kv_name)
    prompt = prompt_tokens_of(tokens, options.get("prompt_tokens"))

    if name == "toy":
        cache = build_toy_cache(plans, batch=batch, element=element, device=dev)
    else:
        config = hf_config(model)
        cache = build_cache(name, config, tokens=tokens, options=options)
        plans = plan(config, cache)
    need = _guard(model, name, dev, tokens=tokens, batch=batch, kv_name=kv_name, options=options, plans=plans)
    with admission.reserve(str(dev), need):
        return _run(model, name, dev, cache, plans, tokens=tokens, batch=batch, kv_name=kv_name, element=element,
                    prompt=prompt, options=options, predicted=predicted, predicted_peak=predicted_peak,
                    predicted_layers=predicted_layers, notes=notes)


def _run(model, name, dev, cache, plans, *, tokens, batch, kv_name, element, prompt, options, predicted,
         predicted_peak, predicted_layers, notes) -> Measurement:
    """Drive the cache, count it, and compare (the admitted part of a measurement)."""
    import torch
    compute, state = buffer_elements(plans, batch=batch, prompt=prompt)
    generator = torch.Generator(device="cpu").manual_seed(0)
    inputs = Inputs(torch.randn(max(compute, 1), generator=generator).to(dev, element),
                    torch.randn(max(state, 1), generator=generator).to(dev))

    def drive():
        _drive(cache, plans, inputs, batch=batch, prompt=prompt, steps=tokens - prompt, toy=name == "toy")

    started = time.perf_counter()
    if dev.type == "cuda":
        allocated, peak, reserved, cuda_stats = run_cuda(drive, dev)
    else:
        allocated, peak, reserved, cuda_stats = run_cpu(drive)
    seconds = time.perf_counter() - started
    held = cache if name == "toy" else cache.layers
    tensor_bytes, storages, per_layer = count_storages(held, dev)
    if dev.type == "cuda":  # the caching allocator's rounding rules applied to what the cache holds
        cuda_stats = {**cuda_stats, **cuda_block_model(n for layer in storage_sizes(held, dev) for n in layer)}
    return Measurement(
        model=model.name, engine=name, tokens=tokens, batch=batch, kv_dtype=kv_name, device=str(dev),
        predicted_bytes=predicted, tensor_bytes=tensor_bytes, allocated_bytes=allocated, peak_bytes=peak,
        predicted_peak_bytes=predicted_peak,
        peak_tolerance_bytes=peak_tolerance(name, options, dev, predicted_peak, len(plans)),
        reserved_bytes=reserved, options=dict(options), storages=storages,
        predicted_per_layer=tuple(predicted_layers), measured_per_layer=per_layer, seconds=round(seconds, 3),
        cuda=cuda_stats, notes=tuple(notes))
