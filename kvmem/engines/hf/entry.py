"""estimate_dynamic, estimate_static and estimate_quantized: the common checks, notes and Estimate.details.

Each entry point checks the inputs transformers would refuse (a non-float compute dtype, tp or
pp above 1, a prompt longer than ``tokens``), replays its cache (kvmem.engines.hf.growth,
kvmem.engines.hf.quantized) and assembles the Estimate with its details Record.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...configs.fields import Fields
from ...dtypes import dtype as _dtype
from ...dtypes import float_bytes
from ...model import Model
from ...records import Record
from ...units import require_positive_int
from ..results import assemble
from .growth import DynamicGrowth, StaticGrowth, Workload
from .quantized import QuantizedGrowth, check_quantized
from .slots import Slot, slots

# Engine defaults, each with its source (transformers 5.24.0).
DEFAULTS = {
    # kvmem's workload: one prefill of every token (no decode steps).
    "prompt_tokens": None,
    # StaticCache(config, max_cache_len): kvmem sizes it to hold `tokens`; generate() uses
    # prompt + max_new_tokens - 1 (generation/utils.py, _prepare_cache_for_generation).
    "max_cache_len": None,
    # generation/utils.py _prepare_cache_for_generation: cache_config.pop("backend", "quanto").
    "backend": "quanto",
    # QuantizedLayer.__init__: nbits=4, q_group_size=64, residual_length=128 (None = these).
    "nbits": None,
    "q_group_size": None,
    "residual_length": None,
}


def _compute_dtype(model: Model, kv_dtype, engine: str) -> tuple[str, int]:
    name = _dtype(kv_dtype, model_dtype=model.dtype).name
    if float_bytes(name) is None:
        hint = "; for a quantised cache use engine='hf-quantized'" if engine != "hf-quantized" else ""
        raise ValueError(f"kv_dtype for {engine} is the model's compute dtype (fp32, fp16 or bf16): "
                         f"transformers caches K/V as the attention layer computes them, got {name!r}{hint}")
    return name, float_bytes(name)


def _single_device(engine: str, tp: int, pp: int) -> None:
    """transformers keeps these caches on the device of each layer; kvmem models one device, so tp and pp
    must be 1 (with a device_map split every GPU holds the ``per_layer`` bytes of its own layers)."""
    for field_name, value in (("tp", tp), ("pp", pp)):
        if value != 1:
            raise ValueError(
                f"{field_name} must be 1 for {engine}, got {value}: transformers builds the cache on the "
                "device of each layer and kvmem models one device (with a device_map split, each GPU "
                "holds the per_layer bytes of its own layers)")


def prompt_tokens_of(tokens: int, prompt_tokens) -> int:
    """The prompt length (tokens when not given), checked to be at most ``tokens``."""
    if prompt_tokens is None:
        return tokens
    prompt = require_positive_int("prompt_tokens", prompt_tokens)
    if prompt > tokens:
        raise ValueError(f"prompt_tokens must be at most tokens ({tokens}), got {prompt}")
    return prompt


def prepended_tokens(model: Model) -> int:
    """Tokens the model itself puts ahead of every input, which its cache holds beside the user's.

    CPM-Ant (transformers 5.24.0 models/cpmant/modeling_cpmant.py): CpmAntModel.forward puts
    prompt_length prompt ids ahead of input_ids (#L612-L622) and runs every position the cache does
    not hold yet through the layers (#L633, #L647), so the prefill caches prompt_length + P and each
    decode step one more; generate feeds it the whole sequence for that (prepare_inputs_for_generation,
    #L702-L704). prompt_length is the config's, else CpmAntConfig's default 32.
    """
    if model.model_type != "cpmant":
        return 0
    return Fields(model.config, "cpmant").int("prompt_length")


def _prepended_note(extra: int) -> list[str]:
    return [f"CPM-Ant puts its {extra} prompt tokens ahead of every input: the cache holds them too "
            "(modeling_cpmant.py CpmAntModel.forward)"] if extra else []


@dataclass(frozen=True)
class HfDetails(Record):
    """Estimate.details of hf-dynamic: the prefill, the decode steps, each layer's cache class."""

    prompt_tokens: int
    decode_steps: int
    cache_layers: list           # transformers' cache layer class per layer


@dataclass(frozen=True)
class HfStaticDetails(HfDetails):
    """hf-static adds the StaticCache length."""

    max_cache_len: int


@dataclass(frozen=True)
class HfQuantizedDetails(HfDetails):
    """hf-quantized adds the quantiser and how many tokens it holds quantised vs in the residual."""

    backend: str
    nbits: int | None
    q_group_size: int | None
    residual_length: int
    quantized_tokens: int
    residual_tokens: int


def _finish(model: Model, engine: str, work: Workload, *, tokens, batch, kv_name, notes, kind=HfDetails,
            **details):
    rows = [work.rows(i) for i in range(len(work.slots))]
    steady = sum(sum(row) for row in rows)
    kv = sum(row[0] + row[1] for row in rows)
    peak = max(work.peak(), steady)
    details = kind(prompt_tokens=work.prompt, decode_steps=work.steps,
                   cache_layers=[s.hf_type for s in work.slots], **details)
    return assemble(model, engine, tokens=tokens, batch=batch, kv_dtype=kv_name, tp=1, pp=1, rows=rows,
                    peak_extra=peak - kv, notes=notes, details=details)


def _common_notes(model: Model, found: tuple[Slot, ...]) -> list[str]:
    notes = []
    if model.model_type == "falcon" and model.facts.new_decoder_architecture:
        # a what-if variant may have no per-head layer left (MLA, shared): no note then
        kv_heads = next((layer.kv_heads for layer in model.layers if layer.kv_heads), None)
        if kv_heads is not None:
            notes.append(f"transformers caches Falcon's K/V broadcast to all {model.num_attention_heads} query "
                         f"heads, not its {kv_heads} KV heads (modeling_falcon.py)")
    if any(s.kind == "linear" for s in found):
        notes.append("linear/SSM layers: conv state of the whole kernel in the compute dtype, recurrent "
                     "state in fp32 (transformers' torch paths)")
    return notes


def estimate_dynamic(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, prompt_tokens=None):
    _single_device("hf-dynamic", tp, pp)
    kv_name, e = _compute_dtype(model, kv_dtype, "hf-dynamic")
    found = slots(model)
    prompt = prompt_tokens_of(tokens, prompt_tokens)
    extra = prepended_tokens(model)
    work = DynamicGrowth(found, batch=batch, prompt=prompt + extra, tokens=tokens + extra, e=e)
    notes = _common_notes(model, found) + _prepended_note(extra)
    pinned = [s.window for s in found if s.kind == "sliding" and prompt >= s.window and prompt == tokens]
    if pinned:
        notes.append(f"sliding layers keep a view of the last window - 1 tokens, which pins the whole "
                     f"{prompt}-token prefill buffer until the next decode step (DynamicSlidingWindowLayer)")
    if any(s.compressor for s in found):
        notes.append("compressed layers (DeepSeek-V4): the compressor's buffers are views that pin the step's "
                     "whole projection (the prompt's after the prefill); the overlap gate is fp32 "
                     "(modeling_deepseek_v4.py)")
    return _finish(model, "hf-dynamic", work, tokens=tokens, batch=batch, kv_name=kv_name, notes=notes)


def estimate_static(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int,
                    max_cache_len=None, prompt_tokens=None):
    _single_device("hf-static", tp, pp)
    kv_name, e = _compute_dtype(model, kv_dtype, "hf-static")
    found = slots(model)
    prompt = prompt_tokens_of(tokens, prompt_tokens)
    extra = prepended_tokens(model)    # the cache receives tokens + extra positions
    held = tokens + extra
    length = held if max_cache_len is None else require_positive_int("max_cache_len", max_cache_len)
    if length < held and any(s.kind == "attention" for s in found):
        also = f" and the model's {extra} prepended prompt tokens" if extra else ""
        raise ValueError(f"max_cache_len ({length}) must be at least tokens ({tokens}){also}: a StaticCache "
                         "full-attention layer holds at most max_cache_len tokens")
    work = StaticGrowth(found, max_cache_len=length, batch=batch, prompt=prompt + extra, tokens=held, e=e)
    return _finish(model, "hf-static", work, tokens=tokens, batch=batch, kv_name=kv_name,
                   notes=_common_notes(model, found) + _prepended_note(extra), kind=HfStaticDetails,
                   max_cache_len=length)


def estimate_quantized(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, backend="quanto",
                       nbits=None, q_group_size=None, residual_length=None, prompt_tokens=None):
    _single_device("hf-quantized", tp, pp)
    kv_name, e = _compute_dtype(model, kv_dtype, "hf-quantized")
    found = slots(model)
    prompt = prompt_tokens_of(tokens, prompt_tokens)
    extra = prepended_tokens(model)
    nbits, group, residual = check_quantized(model, found, backend, nbits, q_group_size, residual_length,
                                             prompt + extra, tokens + extra, batch)
    work = QuantizedGrowth(found, backend=backend, nbits=nbits, q_group_size=group, residual_length=residual,
                           batch=batch, prompt=prompt + extra, tokens=tokens + extra, e=e)
    quantised, held_residual = work.split(work.steps)
    label = "fp8_e4m3 per-tensor" if backend == "fp8" else f"{backend} int{nbits} g{group}"
    notes = _common_notes(model, found) + _prepended_note(extra)
    notes.append(f"{label}: {quantised} tokens quantised, {held_residual} in the {kv_name} residual; "
                 f"scales in {'fp32' if backend == 'fp8' else kv_name}")
    return _finish(model, "hf-quantized", work, tokens=tokens, batch=batch, kv_name=kv_name, notes=notes,
                   kind=HfQuantizedDetails, backend=backend, nbits=nbits, q_group_size=group,
                   residual_length=residual, quantized_tokens=quantised, residual_tokens=held_residual)
