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
    (``_top_up``): while a GPU has room for a routed expert tensor that sits on the host, the
    largest such tensor that fits is moved there (one -ot naming the tensor and the GPU, ahead of
    the other patterns: llama.cpp takes the first pattern that matches). So no GPU is left with
    room for an expert tensor, or a layer, while one sits on the host.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

from ...model import Model
from ...records import Record
from .fitting import FIT_CTX, FIT_MARGIN_BYTES, fit_on, largest, layout
from .layouts import CUDA_CONTEXT_BYTES, Layout
from .placement import CPU, cuda_alloc_bytes
from .tensors import tensors_for

__all__ = ["Layout", "OffloadPlan", "DecodeStep", "layout", "offload", "fit_on", "llamacpp_offload", "decode_curve",
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


@dataclass(frozen=True, eq=False)
class DecodeStep(Record):
    """One step of decode_curve, read like the dict it was (``row["tokens_per_s"]``, equal to that
    dict): the flag and its value, whether the layout fits the GPUs, its decode bound in tokens/s
    (None without a bandwidth for every device it reads from) and its bytes per device."""

    flag: str
    value: int
    fits: bool
    tokens_per_s: float | None
    total_bytes: dict


# ---- host memory bandwidth presets ------------------------------------------------------------

def host_memory_presets() -> dict:
    """name -> {"bandwidth_bytes_per_s", "source"} (data/host_memory.json)."""
    text = resources.files("kvmem").joinpath("data/host_memory.json").read_text(encoding="utf-8")
    return {e["name"]: e for e in json.loads(text)["presets"]}


def host_bandwidth(value) -> int | None:
    """A host bandwidth: a preset name, bytes/s (int), or "89.6GB/s" text."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    presets = host_memory_presets()
    if isinstance(value, str) and value in presets:
        return presets[value]["bandwidth_bytes_per_s"]
    if isinstance(value, str) and value.strip().lower().endswith("/s"):
        from ...units import parse_bytes
        return parse_bytes(value.strip()[:-2])
    raise ValueError(f"host_bandwidth must be a preset ({', '.join(presets)}), bytes per second or 'NGB/s', "
                     f"got {value!r}")


# ---- kvmem's placement ------------------------------------------------------------------------

def _best(model, tensors, gpus, split, budgets, kw) -> Layout | None:
    n = model.num_layers
    cache = {}

    def at(ngl, ncm):
        if (ngl, ncm) not in cache:
            cache[(ngl, ncm)] = layout(model, tensors, gpus=gpus, n_gpu_layers=ngl, tensor_split=split,
                                       n_cpu_moe=ncm, **kw)
        return cache[(ngl, ncm)]

    if model.facts.moe is not None and gpus:
        def keeps(k):       # k = the last layers keeping their experts on the GPU (--n-cpu-moe n - k)
            return at(n + 1, n - k).fits(budgets)

        if keeps(0):
            # a guess from the bytes alone (each layer's experts as the GPU allocates them, in the room every
            # expert on the host leaves), then checked layout by layout from there: 2 or 3 layouts, not a bisection
            base = at(n + 1, n)
            room = min(budgets[g] - base.total_bytes[g] for g in gpus)
            per_layer = [0] * n
            for t in base.placement.tensors:
                if t.device == CPU and t.group == "experts" and t.layer is not None:
                    per_layer[t.layer] += cuda_alloc_bytes(t)
            k = 0
            while k < n and per_layer[n - k - 1] <= room:
                room -= per_layer[n - k - 1]
                k += 1
            while k > 0 and not keeps(k):
                k -= 1
            while k < n and keeps(k + 1):
                k += 1
            return at(n + 1, n - k)
        ngl = largest(0, n + 1, lambda g: at(g, n).fits(budgets))
        return at(ngl, n) if ngl is not None else None
    if not gpus:
        return at(0, 0)
    # from one layer up: -ngl 0 lays everything out on the host, whose compute graph costs the most to size
    ngl = largest(1, n + 1, lambda g: at(g, 0).fits(budgets))
    if ngl is None:
        ngl = 0 if at(0, 0).fits(budgets) else None
    return at(ngl, 0) if ngl is not None else None


def _host_experts(lay: Layout) -> list:
    """The routed expert tensors a layout keeps on the host, largest first."""
    out = [t for t in lay.placement.tensors if t.device == CPU and t.group == "experts" and "_exps" in t.name]
    return sorted(out, key=lambda t: (-t.nbytes, t.layer, t.name))


def _moved(model, tensors, lay: Layout, t, device, kw) -> Layout:
    """``lay`` with expert tensor ``t`` on ``device`` (an -ot ahead of the layout's own)."""
    rule = (re.escape(t.name), device)
    return layout(model, tensors, gpus=lay.placement.gpus, n_gpu_layers=lay.n_gpu_layers,
                  tensor_split=lay.tensor_split if len(lay.placement.gpus) > 1 else None, n_cpu_moe=lay.n_cpu_moe,
                  override_tensor=(rule,) + tuple(lay.override_tensor), **{**kw, "n_ctx": lay.n_ctx})


def _top_up(model, tensors, lay: Layout | None, budgets: dict, kw: dict) -> Layout | None:
    """Move host expert tensors to GPUs with room for them until no GPU has room for one (module doc)."""
    if lay is None or model.facts.moe is None:
        return lay
    moved = True
    while moved:        # until a pass over the GPUs moves nothing: a move can change another card's compute buffer
        moved = False
        for device in lay.placement.gpus:
            failed = set()      # one try per size (the same bytes fail alike, and fail again once the room shrinks)
            while True:
                # a tensor moved here can also shrink this card's compute buffer (the host experts it no longer
                # copies in): up to the room plus that buffer
                room = budgets[device] - lay.total_bytes[device] + lay.compute_bytes[device]
                for t in _host_experts(lay):
                    size = cuda_alloc_bytes(t)
                    if size > room or size in failed:
                        continue
                    trial = _moved(model, tensors, lay, t, device, kw)
                    if trial.fits(budgets):
                        lay, moved = trial, True
                        break
                    failed.add(size)
                else:
                    break
        moved = moved and len(lay.placement.gpus) > 1     # one card: its own pass saw every change
    return lay


def room_left(model, tensors, lay: Layout, budgets: dict, kw: dict) -> list:
    """(GPU, tensor name) for each GPU that could still take a routed expert tensor kept on the host:
    the smallest one, moved there, fits every budget. Empty for kvmem's placements (the invariant
    tests/engines/test_llamacpp_placement.py asserts)."""
    host = _host_experts(lay)
    if not host:
        return []
    smallest = min(host, key=cuda_alloc_bytes)
    return [(d, smallest.name) for d in lay.placement.gpus
            if _moved(model, tensors, lay, smallest, d, kw).fits(budgets)]


_BEST: dict = {}      # (model, weight format, budgets, options) -> (Layout | None, tensors, source)
_BEST_KEPT = 64
# kvmem's placement over several GPUs: the margins tried. MoE: --fit's own, which _top_up then fills with
# expert tensors; dense (whole layers only, nothing to fill with): none first
_MARGINS = (FIT_MARGIN_BYTES, 2 * FIT_MARGIN_BYTES)
_MARGINS_DENSE = (0, 128 << 20, 512 << 20, FIT_MARGIN_BYTES)
_FITS: dict = {}      # fit_searched's answers: kvmem's placement and the --fit report ask the same search


def fit_searched(model, tensors, names, free: dict, n_ctx, kw: dict, margin: int = FIT_MARGIN_BYTES) -> tuple:
    """fit_on, remembered for the last few asked with these very tensors."""
    key = (model, id(tensors), names, tuple(free.items()), n_ctx, tuple(sorted(kw.items())), margin)
    if key in _FITS and _FITS[key][0] is tensors:
        return _FITS[key][1]
    found = fit_on(model, tensors, names, free, n_ctx=n_ctx, kw=kw, margin=margin)
    if len(_FITS) >= _BEST_KEPT:
        _FITS.pop(next(iter(_FITS)))
    _FITS[key] = (tensors, found)
    return found


_TENSORS: dict = {}   # (model, weight format) -> (tensors, source): one object per model, so layouts are remembered


def _tensors(model, weight_format) -> tuple:
    key = (model, weight_format)
    if key not in _TENSORS:
        if len(_TENSORS) >= 8:
            _TENSORS.pop(next(iter(_TENSORS)))
        _TENSORS[key] = tensors_for(model, weight_format)
    return _TENSORS[key]


def best_layout(model, weight_format, budgets: tuple, options: tuple) -> tuple:
    """(kvmem's placement or None, the tensors, their source) for ``model``'s tensors in
    ``weight_format`` (kvmem.engines.llamacpp.tensors.tensors_for), ``budgets`` ((device, bytes), ...)
    and layout ``options`` ((name, value), ...); None when the GPUs cannot hold even what the
    smallest placement leaves them. Remembered for the last few asked: kvmem fit's verdict, its
    report and the Fit page ask the same."""
    key = (model, weight_format, budgets, options)
    if key in _BEST:
        return _BEST[key]
    tensors, source = _tensors(model, weight_format)
    names, usable, kw = tuple(d for d, _ in budgets), dict(budgets), dict(options)
    kw_fit = {k: v for k, v in kw.items() if k != "n_ctx"}
    if len(names) > 1:   # several GPUs: --fit's own search with no margin kept (module doc)
        free = {n: usable[n] - CUDA_CONTEXT_BYTES for n in names}
        for margin in _MARGINS if model.facts.moe is not None else _MARGINS_DENSE:
            # --fit's own search (the one its report shows, searched once), then _top_up fills the margin it
            # keeps; fit.cpp checks each device when it fills it, and a later device's split layer can change an
            # earlier one's compute buffer (kvmem's estimate stands in for the scheduled graph once a non-expert
            # tensor moves), so a search can end over a card: then a wider margin
            best, _ = fit_searched(model, tensors, names, free, kw["n_ctx"], kw_fit, margin)
            if best.fits(usable):
                break
        else:
            best = None
    else:
        best = _best(model, tensors, names, None, usable, kw)
    best = _top_up(model, tensors, best, usable, kw_fit)
    if len(_BEST) >= _BEST_KEPT:
        _BEST.pop(next(iter(_BEST)))
    _BEST[key] = (best, tensors, source)
    return _BEST[key]


# ---- the plan ---------------------------------------------------------------------------------

def _command(model_path: str, lay: Layout | None, n_ctx: int | None, kw: dict, fit: bool) -> str:
    from ...launch.base import as_value, shell_word      # a name is a value, one shell word (kvmem plan's rules)
    parts = ["llama-server", "-m", as_value(model_path)]
    if n_ctx is not None:
        parts += ["-c", str(n_ctx)]
    if kw.get("n_ubatch", 512) != 512:
        parts += ["-ub", str(kw["n_ubatch"])]
    if kw.get("type_k", "f16") != "f16":
        parts += ["-ctk", kw["type_k"]]
    if kw.get("type_v", "f16") != "f16":
        parts += ["-ctv", kw["type_v"]]
    if kw.get("flash_attn") is True:
        parts += ["-fa", "on"]
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
            mmproj_path: str | None = None) -> OffloadPlan:
    """kvmem's placement and --fit's for ``model`` on ``gpus`` (kvmem.gpus.GPU values) at ``context``
    tokens (-c); ``context_set`` False lets --fit lower it as it does when -c is not given."""
    names = tuple(f"CUDA{i}" for i in range(len(gpus)))
    usable = {n: g.usable_memory_bytes for n, g in zip(names, gpus, strict=True)}
    budgets = dict(usable)
    kw = dict(n_ctx=context, n_ubatch=n_ubatch, type_k=type_k, type_v=type_v, flash_attn=flash_attn, mmap=mmap,
              kv_offload=kv_offload, n_seq=n_seq, mmproj_bytes=mmproj_bytes, mmproj_offload=mmproj_offload)
    free = {n: usable[n] - CUDA_CONTEXT_BYTES for n in names}
    kw_fit = {k: v for k, v in kw.items() if k != "n_ctx"}
    best, tensors, source = best_layout(model, weight_format, tuple(usable.items()), tuple(sorted(kw.items())))
    fit, fit_note = fit_searched(model, tensors, names, free, context if context_set else None, kw_fit)
    bws = {n: g.bandwidth_bytes_per_s for n, g in zip(names, gpus, strict=True)}
    notes = (f"tensors: {source}",
             "compute buffers on GPUs are estimates (see kvmem/engines/llamacpp/layouts.py); model and KV bytes "
             "are exact for the tensors given")
    return OffloadPlan(model=model.name, tensors_source=source, gpus=tuple(g.name for g in gpus), budgets=budgets,
                       context=context, best=best, fit=fit, fit_note=fit_note,
                       decode_best=best.decode_tokens_per_s(bws, host_bandwidth_bytes_per_s) if best else None,
                       decode_fit=fit.decode_tokens_per_s(bws, host_bandwidth_bytes_per_s) if fit else None,
                       command_best=_command(model_path, best, context, {**kw, "mmproj": mmproj_path}, fit=False),
                       command_fit=_command(model_path, fit, context if context_set else None,
                                            {**kw, "mmproj": mmproj_path}, fit=True),
                       notes=notes)


def llamacpp_offload(model, *, gpus, context, weight_dtype="auto", host_memory=None, kv_dtype="auto",
                     type_k=None, type_v=None, flash_attn=None, n_ubatch: int = 512, n_seq: int = 1,
                     mmap: bool = True, kv_offload: bool = True, context_set: bool = True,
                     model_path: str | None = None, mmproj=None, mmproj_offload: bool = True) -> OffloadPlan:
    """kvmem.llamacpp_offload: the llama.cpp placement that keeps the most on ``gpus`` (a GPU name,
    a list of them — mixed cards allowed — or kvmem.GPU values) at ``context`` tokens, what
    ``--fit on`` would choose, MiB per device and on the host, the decode bound with
    ``host_memory`` (a preset of data/host_memory.json, bytes/s or "NGB/s") and both commands.
    ``weight_dtype`` "auto": the GGUF's own tensors, else the config's dtype (f16/bf16).
    ``mmproj``: a multimodal projector GGUF (path) or its bytes, loaded on the first GPU
    (mtmd's default; --no-mmproj-offload keeps it on the host: ``mmproj_offload=False``)."""
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
    return offload(model, gpus=gpus, context=context, weight_format=fmt,
                   host_bandwidth_bytes_per_s=host_bandwidth(host_memory), n_ubatch=n_ubatch,
                   type_k=type_k or cache, type_v=type_v or cache, flash_attn=flash_attn, mmap=mmap,
                   kv_offload=kv_offload, n_seq=n_seq, context_set=context_set, model_path=path,
                   mmproj_bytes=_mmproj_bytes(mmproj), mmproj_offload=mmproj_offload,
                   mmproj_path=mmproj if isinstance(mmproj, str) else ("mmproj.gguf" if mmproj else None))


def weight_format(model: Model, weight_dtype) -> str | None:
    """The tensors' format: None for a GGUF's own ("auto"), else the one asked, else the config's dtype."""
    fmt = None if weight_dtype in (None, "auto") else weight_dtype
    if fmt is None and getattr(model.checkpoint, "format", None) != "gguf":
        fmt = {"fp16": "f16", "float16": "f16", "bfloat16": "bf16"}.get(model.dtype, model.dtype)
    return fmt


def _mmproj_bytes(mmproj) -> int:
    """The projector's weight bytes: a GGUF file's tensor infos, or a byte count."""
    if mmproj is None:
        return 0
    if isinstance(mmproj, int) and not isinstance(mmproj, bool) and mmproj >= 0:
        return mmproj
    if isinstance(mmproj, str):
        from ...sources.gguf import read_header
        return sum(t.nbytes for t in read_header(mmproj).tensors)
    raise ValueError(f"mmproj must be a GGUF path or a byte count, got {mmproj!r}")


def decode_curve(model, *, gpus, context, weight_dtype="auto", host_memory=None, kv_dtype="auto", type_k=None,
                 type_v=None, flash_attn=None, n_ubatch: int = 512, n_seq: int = 1, mmap: bool = True,
                 kv_offload: bool = True) -> list[DecodeStep]:
    """kvmem.llamacpp_decode_curve: the decode bound and memory at each step of offload, one
    DecodeStep per -ngl (dense: 0 .. n_layer + 1) or per --n-cpu-moe (MoE, every layer offloaded:
    n_layer .. 0), each saying whether it fits the GPUs (keys "flag", "value", "fits",
    "tokens_per_s", "total_bytes")."""
    from ...catalog import as_model
    from ...gpus import get_gpu
    from ...units import parse_tokens
    model = as_model(model)
    gpu_list = [get_gpu(g) for g in ([x.strip() for x in gpus.split(",")] if isinstance(gpus, str) else gpus)]
    names = tuple(f"CUDA{i}" for i in range(len(gpu_list)))
    tensors, _ = tensors_for(model, weight_format(model, weight_dtype))
    cache = "f16" if kv_dtype in (None, "auto") else kv_dtype
    kw = dict(n_ctx=parse_tokens(context), n_ubatch=n_ubatch, type_k=type_k or cache, type_v=type_v or cache,
              flash_attn=flash_attn, mmap=mmap, kv_offload=kv_offload, n_seq=n_seq)
    split = tuple(g.usable_memory_bytes - CUDA_CONTEXT_BYTES for g in gpu_list) if len(names) > 1 else None
    budgets = {n: g.usable_memory_bytes for n, g in zip(names, gpu_list, strict=True)}
    bws = {n: g.bandwidth_bytes_per_s for n, g in zip(names, gpu_list, strict=True)}
    host = host_bandwidth(host_memory)
    n = model.num_layers
    steps = [("--n-cpu-moe", k, dict(n_gpu_layers=n + 1, n_cpu_moe=k)) for k in range(n, -1, -1)] \
        if model.facts.moe is not None else [("-ngl", g, dict(n_gpu_layers=g)) for g in range(n + 2)]
    rows = []
    for flag, value, flags in steps:
        lay = layout(model, tensors, gpus=names, tensor_split=split, **flags, **kw)
        rows.append(DecodeStep(flag=flag, value=value, fits=lay.fits(budgets),
                               tokens_per_s=lay.decode_tokens_per_s(bws, host), total_bytes=dict(lay.total_bytes)))
    return rows


llamacpp_decode_curve = decode_curve
