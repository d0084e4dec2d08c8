"""Layer and expert offload for llama.cpp: the flags that keep the most on the GPUs, what ``--fit on``
picks, the llama-server commands, the decode bound at each step of offload.

The memory of one set of flags and its decode bound: kvmem.engines.llamacpp.layouts; --fit on:
kvmem.engines.llamacpp.fitting. This module searches and reports:

kvmem's placement (``offload``): the most on the GPUs at the given context. One GPU: MoE, every
    layer offloaded (-ngl 999) and the fewest --n-cpu-moe that fits, and if even all experts on
    the host do not fit, fewer layers; dense, the largest -ngl that fits. Several GPUs: --fit's own
    search (kvmem.engines.llamacpp.fitting), which gives every GPU layers: the dense parts back to
    front, then whole layers with their experts front to back, one layer split over two GPUs (MoE:
    with its 1 GiB margin per card, which is then filled; dense: with no margin). Then, MoE
    (best.top_up): while a GPU has room for a routed expert tensor that sits on the host, the
    largest such tensor that fits is moved there (one -ot naming the tensor and the GPU, ahead of
    the other patterns: llama.cpp takes the first pattern that matches). So no GPU is left with
    room for an expert tensor, or a layer, while one sits on the host.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ...model import Model
from ...records import Record
from .best import best_layout, fit_searched, held_layout
from .fitting import FIT_CTX, FIT_MARGIN_BYTES, fit_on, layout
from .host_memory import host_bandwidth, host_memory_presets
from .layouts import CUDA_CONTEXT_BYTES, Layout
from .nextn import gguf_nextn_layers
from .placement import free_split
from .tensors import tensors_for

__all__ = ["Layout", "OffloadPlan", "DecodeStep", "layout", "offload", "fit_on", "llamacpp_offload", "decode_curve",
           "mmproj_memory", "mmproj_option",
           "llamacpp_decode_curve", "host_memory_presets", "host_bandwidth", "FIT_MARGIN_BYTES", "FIT_CTX",
           "CUDA_CONTEXT_BYTES"]


@dataclass(frozen=True)
class OffloadPlan:
    """kvmem's placement and --fit's for the same model, context and free memory."""

    model: str
    tensors_source: str
    gpus: tuple                   # names
    budgets: dict                 # device -> bytes a layout may use (GPU: memory - CUDA context)
    context: int
    best: Layout | None           # kvmem: the most on the GPUs at this context
    fit: Layout | None            # what --fit on would choose
    fit_note: str
    decode_best: float | None     # tokens/s bound
    decode_fit: float | None
    command_best: str
    command_fit: str
    notes: tuple = ()

    def to_dict(self) -> dict:
        return {"model": self.model, "tensors_source": self.tensors_source, "gpus": list(self.gpus),
                "budgets": self.budgets, "context": self.context,
                "best": self.best.to_dict() if self.best else None, "fit": self.fit.to_dict() if self.fit else None,
                "fit_note": self.fit_note, "decode_tokens_per_s_best": self.decode_best,
                "decode_tokens_per_s_fit": self.decode_fit, "command_best": self.command_best,
                "command_fit": self.command_fit, "notes": list(self.notes)}


@dataclass(frozen=True)
class DecodeStep(Record):
    """One step of decode_curve (``step.tokens_per_s``; ``to_dict()`` under the same names): the flag
    and its value, whether the layout fits the GPUs, its decode bound in tokens/s (None without a
    bandwidth for every device it reads from) and its bytes per device."""

    flag: str
    value: int
    fits: bool
    tokens_per_s: float | None
    total_bytes: dict


# ---- kvmem's placement ------------------------------------------------------------------------

def _command(model_path: str, lay: Layout | None, n_ctx: int | None, kw: dict, fit: bool) -> str:
    """The llama-server command of a placement (``fit``: --fit on's): the cache's flags are kvmem plan's
    (launch.cache_words), so both commands and plan's size the same server."""
    from ...launch.base import as_value, shell_word  # a name is a value, one shell word (kvmem plan's rules)
    from .launch import cache_words
    parts = ["llama-server", "-m", as_value(model_path)]
    if n_ctx is not None:
        parts += ["-c", str(n_ctx)]
    # -nkvo and -lm none: kvmem's layout writes them with its flags (Layout.flags), --fit on's here
    switches = {} if fit else {"kv_offload": True, "mmap": True}
    parts += [word for flag, value in cache_words({**kw, **switches}) for word in (flag, value) if word != ""]
    if kw.get("mmproj"):
        parts += ["--mmproj", as_value(kw["mmproj"])] + ([] if kw.get("mmproj_offload", True)
                                                          else ["--no-mmproj-offload"])
    if fit:
        parts += ["--fit", "on"] + ([] if n_ctx is not None else ["--fit-ctx", str(FIT_CTX)])
    elif lay is None:
        return ""
    else:
        parts += ["--fit", "off", *lay.flags()]
    return " ".join(shell_word(part) for part in parts)


def offload(model: Model, *, gpus, context: int, weight_format=None, host_bandwidth_bytes_per_s=None,
            n_ubatch: int = 512, type_k="f16", type_v="f16", flash_attn=None, mmap: bool = True,
            kv_offload: bool = True, n_seq: int = 1, context_set: bool = True,
            model_path: str = "model.gguf", mmproj_bytes: int = 0, mmproj_offload: bool = True,
            mmproj_path: str | None = None, mmproj_compute=None, mmproj_note: str = "", n_batch: int = 2048,
            swa_full: bool = False, kv_unified: bool = False, build=None, mla=None, nextn: bool = False,
            n_rs_seq=None, hold: Layout | None = None) -> OffloadPlan:
    """kvmem's placement and --fit's for ``model`` on ``gpus`` (kvmem.gpus.GPU values) at ``context``
    tokens (-c); ``context_set`` False lets --fit lower it as it does when -c is not given. A projector:
    ``mmproj_bytes`` its weights, ``mmproj_compute`` its compute buffers ((device, bytes) pairs; None: not
    computed, ``mmproj_note`` says why), counted in both placements (layouts.layout). ``n_batch``, ``swa_full``,
    ``kv_unified``, ``build``, ``mla``, ``nextn``, ``n_rs_seq``: the cache's settings, as kvmem.estimate takes
    them (settings.DEFAULTS), in both placements and both commands. ``hold``: a placement whose flags are laid out
    at this workload instead of searching (best None where they do not fit; no --fit emulation)."""
    from .launch import cache_settings, unflagged_notes
    names = tuple(f"CUDA{i}" for i in range(len(gpus)))
    usable = {n: g.usable_memory_bytes for n, g in zip(names, gpus, strict=True)}
    budgets = dict(usable)
    kw = dict(n_ctx=context, n_ubatch=n_ubatch, type_k=type_k, type_v=type_v, flash_attn=flash_attn, mmap=mmap,
              kv_offload=kv_offload, n_seq=n_seq, mmproj_bytes=mmproj_bytes, mmproj_offload=mmproj_offload,
              mmproj_compute=mmproj_compute, **cache_settings(n_batch=n_batch, swa_full=swa_full,
                                                              kv_unified=kv_unified, build=build, mla=mla,
                                                              nextn=nextn, n_rs_seq=n_rs_seq))
    free = {n: usable[n] - CUDA_CONTEXT_BYTES for n in names}
    kw_fit = {k: v for k, v in kw.items() if k != "n_ctx"}
    if hold is None:
        best, tensors, source = best_layout(model, weight_format, tuple(usable.items()), tuple(sorted(kw.items())))
        fit, fit_note = fit_searched(model, tensors, names, free, context if context_set else None, kw_fit)
    else:       # a placement's flags at another workload: how much they hold, not a new search
        best, tensors, source = held_layout(model, weight_format, hold, tuple(sorted(kw.items())))
        best = best if best.fits(budgets) else None
        fit, fit_note = None, "not searched: kvmem's placement's flags held at this workload"
    bws = {n: g.bandwidth_bytes_per_s for n, g in zip(names, gpus, strict=True)}
    notes = (f"tensors: {source}", _compute_note(best, fit)) + ((mmproj_note,) if mmproj_note else ()) \
        + unflagged_notes(kw)
    return OffloadPlan(model=model.name, tensors_source=source, gpus=tuple(g.name for g in gpus), budgets=budgets,
                       context=context, best=best, fit=fit, fit_note=fit_note,
                       decode_best=best.decode_tokens_per_s(bws, host_bandwidth_bytes_per_s) if best else None,
                       decode_fit=fit.decode_tokens_per_s(bws, host_bandwidth_bytes_per_s) if fit else None,
                       command_best=_command(model_path, best, context, {**kw, "mmproj": mmproj_path}, fit=False),
                       command_fit=_command(model_path, fit, context if context_set else None,
                                            {**kw, "mmproj": mmproj_path}, fit=True),
                       notes=notes)


def _compute_note(*layouts) -> str:
    """Which compute buffers the placements shown carry as estimates (compute.estimate_bytes) rather than
    llama.cpp's own graph sizes (Layout.compute_exact); model and KV bytes are exact for the tensors either way."""
    estimated = sorted({device for lay in layouts if lay is not None
                        for device in lay.compute_bytes if not lay.compute_exact.get(device)})
    if not estimated:
        return ("compute buffers: llama.cpp's graphs as ggml_backend_sched splits and allocates them "
                "(kvmem/engines/llamacpp/scheduled.py); model and KV bytes are exact for the tensors given")
    return (f"compute buffers on {', '.join(estimated)} are estimates (see kvmem/engines/llamacpp/layouts.py); "
            "model and KV bytes are exact for the tensors given")


def llamacpp_offload(model, *, gpus, context, weight_dtype="auto", host_memory=None, kv_dtype="auto",
                     type_k=None, type_v=None, flash_attn=None, n_ubatch: int = 512, n_seq: int = 1,
                     mmap: bool = True, kv_offload: bool = True, context_set: bool = True,
                     model_path: str | None = None, mmproj=None, mmproj_offload: bool = True, n_batch: int = 2048,
                     swa_full: bool = False, kv_unified: bool = False, build=None, mla=None, nextn: bool = False,
                     n_rs_seq=None, hold: Layout | None = None) -> OffloadPlan:
    """kvmem.llamacpp_offload: the llama.cpp placement that keeps the most on ``gpus`` (a GPU name,
    a list of them — mixed cards allowed — or kvmem.GPU values) at ``context`` tokens, what
    ``--fit on`` would choose, MiB per device and on the host, the decode bound with
    ``host_memory`` (a preset of data/host_memory.json, bytes/s or "NGB/s") and both commands.
    ``weight_dtype`` "auto": the GGUF's own tensors, else the config's dtype (f16/bf16).
    ``mmproj``: a multimodal projector GGUF (path) or its weight bytes (an int or "858MB"), loaded on the first
    GPU (mtmd's default; --no-mmproj-offload keeps it on the host: ``mmproj_offload=False``), its compute
    buffers beside it (mmproj_memory); 0 (or "0MB"): no projector, nothing charged and no --mmproj.
    ``n_batch``, ``swa_full``, ``kv_unified``, ``build``, ``mla``, ``nextn``, ``n_rs_seq``: the cache's settings as
    kvmem.estimate takes them (settings.DEFAULTS; offload). ``hold``: another workload's placement, whose flags
    are laid out at this one (offload)."""
    from ...catalog import as_model
    from ...gpus import get_gpu
    from ...units import parse_tokens
    model = as_model(model)
    if isinstance(gpus, str):
        gpus = [g.strip() for g in gpus.split(",") if g.strip()]
    elif not isinstance(gpus, (list, tuple)):
        gpus = [gpus]
    gpus = [get_gpu(g) for g in gpus]
    if not gpus:
        raise ValueError("gpus: give at least one GPU")
    context = parse_tokens(context)
    cache = "f16" if kv_dtype in (None, "auto") else kv_dtype
    fmt = weight_format(model, weight_dtype)
    path = model_path or (model.name if model.name.endswith(".gguf") else f"{model.name}-{fmt or 'gguf'}.gguf")
    weights, compute, note = mmproj_option(model, {"mmproj": mmproj, "mmproj_offload": mmproj_offload}, flash_attn)
    path_given = isinstance(mmproj, str) and mmproj.lower().endswith(".gguf")
    if not path_given and not weights and compute is None:
        mmproj = None       # mmproj=0: no projector (mmproj_option)
    return offload(model, gpus=gpus, context=context, weight_format=fmt,
                   host_bandwidth_bytes_per_s=host_bandwidth(host_memory), n_ubatch=n_ubatch,
                   type_k=type_k or cache, type_v=type_v or cache, flash_attn=flash_attn, mmap=mmap,
                   kv_offload=kv_offload, n_seq=n_seq, context_set=context_set, model_path=path,
                   mmproj_bytes=weights, mmproj_offload=mmproj_offload, mmproj_compute=compute, mmproj_note=note,
                   mmproj_path=mmproj if path_given else ("mmproj.gguf" if mmproj is not None else None),
                   n_batch=n_batch, swa_full=swa_full, kv_unified=kv_unified, build=build, mla=mla, nextn=nextn,
                   n_rs_seq=n_rs_seq, hold=hold)


def weight_format(model: Model, weight_dtype) -> str | None:
    """The tensors' format: None for a GGUF's own ("auto"), else the one asked, else the config's dtype."""
    fmt = None if weight_dtype in (None, "auto") else weight_dtype
    if fmt is None and getattr(model.checkpoint, "format", None) != "gguf":
        fmt = {"fp16": "f16", "float16": "f16", "bfloat16": "bf16"}.get(model.dtype, model.dtype)
    return fmt


def mmproj_memory(model: Model, mmproj, *, gpu: str | None, flash_attn=None) -> tuple:
    """(weight bytes, compute buffers as (device, bytes) pairs or None, note) of a projector loaded beside
    ``model`` with its clip backend on ``gpu`` (None: --no-mmproj-offload). ``mmproj``: an mmproj GGUF (its
    tensors padded as the clip backend's buffer pads them, its clip.* keys for the graph) or its weight bytes
    (the graph then from ``model``'s config: Gemma 3's vision_config). The compute buffers are mtmd's
    (graphs_mmproj.clip_compute_buffers) where kvmem has the projector's graph, else None and the note says
    that they are not computed, and why."""
    from .graphs_mmproj import (
        clip_compute_buffers,
        clip_log_lines,
        mmproj_shape,
        mmproj_shape_from_header,
        mmproj_weight_bytes,
    )
    if mmproj is None:
        return 0, None, ""
    model_size = mmproj
    if isinstance(mmproj, str):
        from ...sources.gguf import read_header
        header = read_header(mmproj)
        weights = mmproj_weight_bytes(header, offload=gpu is not None)
        model_size = sum(t.nbytes for t in header.tensors)
        try:
            shape = mmproj_shape_from_header(header)
        except ValueError as exc:
            return weights, None, _not_computed(str(exc))
    elif isinstance(mmproj, int) and not isinstance(mmproj, bool) and mmproj >= 0:
        weights, from_config = mmproj, mmproj_shape(model)
        if from_config is None:
            from .graphs_mmproj_config import config_projector_names
            return weights, None, _not_computed(
                f"{model.name}'s config has no vision_config kvmem builds a projector's graph from "
                f"({config_projector_names()}); give the mmproj GGUF itself")
        shape = from_config
    else:
        raise ValueError(f"mmproj must be a GGUF path or a byte count, got {mmproj!r}")
    try:
        compute = clip_compute_buffers(shape, gpu=gpu, flash_attn=flash_attn)
    except ValueError as exc:
        return weights, None, _not_computed(str(exc))
    where = ", ".join(f"{device} {nbytes:,} B" for device, nbytes in compute.items())
    lines = "; ".join(f"'{line}'" for line in clip_log_lines(compute, model_size))
    return weights, tuple(compute.items()), (
        f"mmproj: weights {weights:,} B on {gpu or 'CPU'}; its compute buffers {where} (mtmd's warmup reserve, "
        f"counted where they are: in the placements" + (f", and with {gpu}'s weights and activations" if gpu else
                                                         ", on the host") + f"); llama-server prints {lines}")


def mmproj_option(model: Model, options: dict, flash_attn=None) -> tuple:
    """mmproj_memory for the sizing options "mmproj" (an mmproj GGUF path, or its weight bytes: an int or
    "858MB") and "mmproj_offload" (False: --no-mmproj-offload) that kvmem fit, plan and the verdict take;
    (0, None, "") without an mmproj. Remembered per (model, options): a fit asks it for every workload."""
    value, on_gpu = options.get("mmproj"), options.get("mmproj_offload", True)
    if value is None:
        return 0, None, ""
    if not isinstance(on_gpu, bool):
        raise ValueError(f"mmproj_offload must be true or false, got {on_gpu!r}")
    from .launch import no_projector
    if no_projector(value):     # 0 B of projector weights: no projector, nothing charged
        return 0, None, ""
    if isinstance(value, str) and not value.lower().endswith(".gguf"):
        from ...units import parse_bytes
        value = parse_bytes(value)
    fa = flash_attn.strip().lower() if isinstance(flash_attn, str) else flash_attn
    return _mmproj_remembered(model, value, on_gpu, fa)


@functools.lru_cache(maxsize=16)
def _mmproj_remembered(model: Model, value, on_gpu: bool, flash_attn) -> tuple:
    return mmproj_memory(model, value, gpu="CUDA0" if on_gpu else None, flash_attn=flash_attn)


def _not_computed(why: str) -> str:
    return (f"mmproj: its compute buffer is NOT COMPUTED and not counted in these placements ({why}): they "
            "overcommit by that much")


def decode_curve(model, *, gpus, context, weight_dtype="auto", host_memory=None, kv_dtype="auto", type_k=None,
                 type_v=None, flash_attn=None, n_ubatch: int = 512, n_seq: int = 1, mmap: bool = True,
                 kv_offload: bool = True, mmproj=None, mmproj_offload: bool = True, n_batch: int = 2048,
                 swa_full: bool = False, kv_unified: bool = False, build=None, mla=None, nextn: bool = False,
                 n_rs_seq=None) -> list[DecodeStep]:
    """kvmem.llamacpp_decode_curve: the decode bound and memory at each step of offload, one
    DecodeStep per -ngl (dense: 0 .. n_layer + 1) or per --n-cpu-moe (MoE, every layer offloaded:
    n_layer .. 0), each saying whether it fits the GPUs (keys "flag", "value", "fits",
    "tokens_per_s", "total_bytes"); ``mmproj``, ``mmproj_offload``: a projector, counted as llamacpp_offload
    counts it."""
    from ...catalog import as_model
    from ...gpus import get_gpu
    from ...units import parse_tokens
    from .launch import cache_settings
    model = as_model(model)
    gpu_list = [get_gpu(g) for g in ([x.strip() for x in gpus.split(",")] if isinstance(gpus, str) else gpus)]
    names = tuple(f"CUDA{i}" for i in range(len(gpu_list)))
    tensors, _ = tensors_for(model, weight_format(model, weight_dtype), build)
    cache = "f16" if kv_dtype in (None, "auto") else kv_dtype
    mm_weights, mm_compute, _ = mmproj_option(model, {"mmproj": mmproj, "mmproj_offload": mmproj_offload}, flash_attn)
    kw = dict(n_ctx=parse_tokens(context), n_ubatch=n_ubatch, type_k=type_k or cache, type_v=type_v or cache,
              flash_attn=flash_attn, mmap=mmap, kv_offload=kv_offload, n_seq=n_seq, mmproj_bytes=mm_weights,
              mmproj_offload=mmproj_offload, mmproj_compute=mm_compute,
              **cache_settings(n_batch=n_batch, swa_full=swa_full, kv_unified=kv_unified, build=build, mla=mla,
                               nextn=nextn, n_rs_seq=n_rs_seq))
    # no -ts: llama.cpp's split by free memory, as kvmem's placement and --fit on take it (placement.free_split)
    split = free_split([g.usable_memory_bytes - CUDA_CONTEXT_BYTES for g in gpu_list]) if len(names) > 1 else None
    budgets = {n: g.usable_memory_bytes for n, g in zip(names, gpu_list, strict=True)}
    bws = {n: g.bandwidth_bytes_per_s for n, g in zip(names, gpu_list, strict=True)}
    host = host_bandwidth(host_memory)
    n = model.num_layers
    top = n + 1 + gguf_nextn_layers(model, build)   # every layer: the build's file's MTP blocks count in -ngl
    steps = [("--n-cpu-moe", k, dict(n_gpu_layers=top, n_cpu_moe=k)) for k in range(n, -1, -1)] \
        if model.facts.moe is not None else [("-ngl", g, dict(n_gpu_layers=g)) for g in range(top + 1)]
    rows = []
    for flag, value, flags in steps:
        lay = layout(model, tensors, gpus=names, tensor_split=split, **flags, **kw)
        rows.append(DecodeStep(flag=flag, value=value, fits=lay.fits(budgets),
                               tokens_per_s=lay.decode_tokens_per_s(bws, host), total_bytes=dict(lay.total_bytes)))
    return rows


llamacpp_decode_curve = decode_curve
