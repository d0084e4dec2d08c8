""""Will MY llama-server command fit?": the user's own placement flags (``kvmem fit/plan --llama-args "-ngl 99 -ts
3,1 --n-cpu-moe 30"``, the Fit page's "your llama-server flags") laid out at the workload by the one layout function
(layouts.layout, through best.held_layout), with their verdict per device and on the host, the largest workloads
those flags hold (one layout a probe, as panel.mixed_cards), what --fit on and kvmem's own placement do instead,
and the lines llama.cpp would print at start-up.

The flags are read by check-log's own reader (logs.READER through kvmem.logcheck.command.read_flags, strictly: a
flag it does not read is refused by name), with the two switches a placement needs that check-log reads from the
log itself (-nkvo, --fit), so a command pasted above a log and the same flags given here cannot be read apart.
What llama.cpp does with them is transcribed from the vendored build 0c1e57098:

- -ngl N | auto | all (common/arg.cpp#L2788-L2806): auto -1 and all -2; a negative count offloads every layer
  (src/llama-model.cpp#L2002-L2005); anything else std::stoi refuses (its error, common/arg.cpp#L870-L875);
- -ts split on ',' and '/', 16 values or more refused (common/arg.cpp#L2830-L2853); each device takes its value
  in CUDA order, a device past the list 0; all zero (or no -ts): the split by each device's free memory
  (src/llama-model.cpp#L1557-L1576), which kvmem takes as its usable memory less the CUDA context;
- -ot PATTERN=BUFT with a buffer type of a device present: CPU or CUDA0..CUDAn-1, else "unknown buffer type"
  (common/arg.cpp#L251-L282); --n-cpu-moe N past the last layer matches no more tensors (no error);
- --fit on (the default, common/common.h#L478) places the model only while -ngl, -ts (several GPUs) and -ot /
  --cpu-moe / --n-cpu-moe are unset (common/fit.cpp#L463-L486): then the placement is --fit on's
  (fitting.fit_on); -c is always given here (kvmem's --context), so fit does not lower the context;
- no -np: llama-server's auto, 4 slots in one unified KV pool (tools/server/server.cpp#L156-L160).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from .own_flags_read import (
    CACHE_OPTIONS,
    MAX_ARGS_CHARS,
    WHAT,
    agree_cache,
    check_buffer_types,
    older_words,
    read_layers,
    read_llama_args,
    read_split,
    workload,
)
from .own_flags_record import OwnFlags, start_up_lines

__all__ = ["MAX_ARGS_CHARS", "OwnFlags", "own_flags", "read_llama_args"]


@dataclass(frozen=True)
class _Held:
    """The flags as best.held_layout reads a placement's (a Layout's fields of the same names)."""

    n_gpu_layers: int
    tensor_split: tuple
    override_tensor: tuple
    placement: Any
    n_cpu_moe: int = 0


def own_flags(model, gpus, *, llama_args: str, context: int, batch: int | None = None, weight_dtype="auto",
              kv_dtype="auto", host_memory=None, options: dict | None = None) -> OwnFlags:
    """The flags ``llama_args`` (a llama-server command's flags, e.g. "-ngl 99 -ts 3,1 --n-cpu-moe 30") on
    ``gpus`` (card names in CUDA order, mixed allowed) for ``batch`` sequences (-np; default llama-server's -np
    auto) of ``context`` tokens: the record kvmem fit prints (module doc). ``options``: llama.cpp's engine and
    sizing options (-o), which the flags must not contradict; ``host_memory``: the host RAM bandwidth of the decode
    bound. A flag kvmem does not read, a contradiction, or a value llama.cpp refuses: ValueError naming it."""
    from ...catalog import as_model
    from ...gpus import get_gpu
    from ...sizing.search import largest_fitting
    from .. import engine_spec
    from ..base import byte_option
    from .best import held_layout
    from .ctx_train import n_ctx_train
    from .launch import cache_settings
    from .layouts import CUDA_CONTEXT_BYTES, MAX_LAYERS
    from .offload import llamacpp_offload, mmproj_option, weight_format
    from .panel import host_shortfall, offload_options
    from .placement import CPU, free_split
    from .server_slots import held as slots_held
    from .settings import LLAMA_MAX_SEQ
    model, options = as_model(model), dict(options or {})
    gpus = tuple(g.strip() for g in gpus.split(",")) if isinstance(gpus, str) else tuple(gpus)
    cards = [get_gpu(g) for g in gpus]
    if not cards:
        raise ValueError("gpus: give at least one GPU")
    names = tuple(f"CUDA{i}" for i in range(len(cards)))
    settings = read_llama_args(llama_args)
    for name in ("weights_bytes", "activation_bytes"):
        if options.get(name) is not None:
            raise ValueError(f"{name}: kvmem lays out llama.cpp's tensors and buffers for your flags itself (they "
                             "take no byte counts); leave it out")
    opts = offload_options(options)              # refuses an option the placement does not take, by name
    opts.pop("n_seq", None)
    cache = agree_cache(settings, opts, kv_dtype)
    auto = settings.get("n_seq") is None and batch is None and options.get("n_seq") is None
    n_ctx, n_seq, sequences, kv_unified, notes = workload(settings, context, batch, options,
                                                           bool(cache.pop("kv_unified", False)))
    notes = older_words(llama_args) + notes
    ngl = read_layers(settings.get("n_gpu_layers"))
    split = read_split(settings.get("tensor_split"), len(names))
    rules = tuple(settings.get("override_tensor", ()))
    check_buffer_types(rules, names)
    fit = settings.get("fit", True)
    usable = {n: g.usable_memory_bytes for n, g in zip(names, cards, strict=True)}
    if split and not any(split) and len(names) > 1:
        split = ()
    if not split and len(names) > 1:    # llama.cpp's split by free memory (src/llama-model.cpp#L1557-L1576)
        notes.append("no -ts: llama.cpp splits the layers by each device's free memory (src/llama-model.cpp"
                     "#L1557-L1576); kvmem takes it as each card's usable memory less the CUDA context, in whole MiB "
                     "as llama.cpp prints it")
    raw_split = settings.get("tensor_split")
    if raw_split is not None and len(re.split(r"[,/]+", str(raw_split))) > len(names):
        notes.append(f"-ts {settings['tensor_split']} gives more values than the {len(names)} GPU"
                     f"{'s' * (len(names) != 1)} given: llama.cpp reads the first {len(names)} "
                     "(src/llama-model.cpp#L1557-L1576)")
    fit_places = fit and ngl == -1 and (len(names) == 1 or not any(split)) and not rules

    common = {k: v for k, v in opts.items() if k not in CACHE_OPTIONS.values()}
    place_kw = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, host_memory=host_memory, **common, **cache,
                    kv_unified=kv_unified)

    def offloaded(ctx_cells: int, seqs: int, hold=None):
        return llamacpp_offload(model, gpus=list(gpus), context=ctx_cells, n_seq=seqs, hold=hold, **place_kw)

    plan = offloaded(n_ctx, n_seq)
    fmt = weight_format(model, weight_dtype)
    if fit_places:
        lay, placed_by = plan.fit, "--fit on"
        notes.append("-ngl, -ts and -ot unset and --fit on (llama.cpp's default): --fit on places the model "
                     "(common/fit.cpp#L463-L486)")
        if lay is None:
            raise ValueError(f"{WHAT}: the flags leave the placement to --fit on, which places nothing: "
                             f"{plan.fit_note}")
    else:
        free = {n: usable[n] - CUDA_CONTEXT_BYTES for n in names}
        held: Any = _Held(n_gpu_layers=MAX_LAYERS if ngl < 0 else ngl,
                     tensor_split=tuple(split) if any(split) else free_split([free[n] for n in names]),
                     override_tensor=rules, placement=SimpleNamespace(gpus=names))
        given: dict[str, Any] = {k: place_kw[k] for k in ("n_batch", "swa_full", "build", "mla", "nextn", "n_rs_seq")
                                 if k in place_kw}
        cache_kw = cache_settings(**given, kv_unified=kv_unified)
        flash = place_kw.get("flash_attn")
        mm_weights, mm_compute, _ = mmproj_option(model, {"mmproj": place_kw.get("mmproj"), "mmproj_offload":
                                                          place_kw.get("mmproj_offload", True)}, flash)
        type_cache = "f16" if kv_dtype in (None, "auto") else kv_dtype
        kw = dict(n_ctx=n_ctx, n_ubatch=place_kw.get("n_ubatch", 512), type_k=place_kw.get("type_k") or type_cache,
                  type_v=place_kw.get("type_v") or type_cache, flash_attn=flash, mmap=place_kw.get("mmap", True),
                  kv_offload=place_kw.get("kv_offload", True), n_seq=n_seq, mmproj_bytes=mm_weights,
                  mmproj_offload=place_kw.get("mmproj_offload", True), mmproj_compute=mm_compute, **cache_kw)
        lay = held_layout(model, fmt, held, tuple(sorted(kw.items())))[0]
        placed_by = "your flags"
    short = host_shortfall(SimpleNamespace(best=lay), options)
    if short:       # the bound panel.host_shortfall holds a placement to, said of these flags
        short = (f"your flags keep {lay.total_bytes[CPU]:,} B in host RAM, more than host_memory_bytes "
                 f"{byte_option('host_memory_bytes', options['host_memory_bytes']):,}: they do not run")
    devices = []
    for d in lay.placement.devices:
        gpu = d.device != CPU
        memory = usable.get(d.device) if gpu else options.get("host_memory_bytes")
        if memory is not None and not gpu:
            memory = byte_option("host_memory_bytes", memory)
        total = lay.total_bytes[d.device]
        # the host's weights: its resident tensors (an mmap span's printed buffer also covers GPU tensors between
        # them: placement.DeviceMemory.model_bytes), as layouts.layout counts its total
        devices.append({"device": d.device, "buffer": d.buffer_name, "model_buffer_bytes": d.model_bytes,
                        "model_bytes": d.model_bytes if gpu else sum(d.group_bytes.values()),
                        "kv_bytes": d.kv_bytes, "compute_bytes": lay.compute_bytes[d.device],
                        "compute_exact": bool(lay.compute_exact.get(d.device)),
                        "context_bytes": CUDA_CONTEXT_BYTES if gpu else 0, "total_bytes": total,
                        "memory_bytes": memory, "fits": memory is None or total <= memory})
    fits = all(d["fits"] for d in devices)

    def runs(ctx: int, seqs: int) -> bool:
        """These flags hold ``seqs`` sequences of ``ctx`` tokens (one layout a probe, no search): as many slots
        (a unified pool: at least the slots given)."""
        try:
            p = offloaded(ctx * seqs, max(seqs, n_seq) if kv_unified else seqs, hold=lay)
        except ValueError:
            return False
        return p.best is not None and host_shortfall(p, options) is None

    max_batch = largest_fitting(lambda b: runs(context, b), LLAMA_MAX_SEQ, sequences) if fits else 0
    cap = max(n_ctx_train(model) or context, context)
    units = (largest_fitting(lambda u: runs(min(u * 256, cap), sequences), -(-cap // 256), -(-context // 256))
             if fits else 0)
    notes += [f"compute buffers on {', '.join(d['device'] for d in devices if not d['compute_exact'])} are "
              "estimates (kvmem/engines/llamacpp/layouts.py)"] if not all(d["compute_exact"] for d in devices) else []
    notes += [n for n in plan.notes if n.startswith("tensors:")]
    cache_lines = _cache_lines(model, kv_dtype, {**place_kw, **cache, "n_ctx": n_ctx, "n_seq": n_seq,
                                                 "kv_unified": kv_unified}, notes)
    pool_sequences, slot_context = slots_held(n_ctx, n_seq, kv_unified, context, n_ctx_train(model))
    max_context = min(units * 256, cap)
    # the -c and -np runs() probed for each (a pool: at least the flags' slots)
    raised = {"max_batch": {"n_ctx": context * max_batch,
                            "n_seq": max(max_batch, n_seq) if kv_unified else max_batch},
              "max_context": {"n_ctx": max_context * sequences,
                              "n_seq": max(sequences, n_seq) if kv_unified else sequences}}
    return OwnFlags(engine=engine_spec("llama.cpp").name, gpus=gpus, given=shlex.join(shlex.split(llama_args)),
                    settings=settings, context=context, batch=sequences, n_ctx=n_ctx, n_seq=n_seq,
                    kv_unified=kv_unified,
                    placed_by=placed_by, layout=lay, devices=tuple(devices), host_bytes=lay.total_bytes.get(CPU, 0),
                    host_shortfall=short, fits=fits, max_batch=max_batch, max_context=max_context,
                    pool_sequences=pool_sequences if fits else 0, slot_context=slot_context if fits else 0,
                    raised=raised,
                    command=_sized(model, fmt, llama_args, settings, n_ctx, n_seq, cache, auto),
                    plan=plan, log_lines=tuple(start_up_lines(lay, cache_lines)), notes=tuple(notes))


def _cache_lines(model, kv_dtype, kw: dict, notes: list) -> tuple:
    """The cache's "size =" lines at these settings (kvmem.engines.engine_estimate's log_lines, as check-log checks
    them); where the model has several caches, a note that their per-device buffers are printed each apart."""
    from .. import engine_estimate
    given = {k: kw[k] for k in ("n_ctx", "n_seq", "n_ubatch", "type_k", "type_v", "kv_unified", "flash_attn",
                                "build", "swa_full", "mla", "nextn", "n_rs_seq") if kw.get(k) is not None}
    try:
        lines = tuple(engine_estimate(model, engine="llama.cpp", tokens=1, batch=1, kv_dtype=kv_dtype,
                                      **given).log_lines)
    except ValueError as exc:
        notes.append(f"the cache's size lines are not predicted: {exc}")
        return ()
    if len(lines) != 1:
        notes.append("llama.cpp prints each cache's buffers apart (" + ", ".join(line.split(":")[0] for line in lines)
                     + "): their sum a device is the table's KV; the per-device buffer lines are not predicted")
    return lines


def _sized(model, fmt, llama_args: str, settings: dict, n_ctx: int, n_seq: int, cache: dict, auto: bool) -> str:
    """The command kvmem sized: llama-server, the model, the flags as given, then what kvmem's arguments add
    (-c, -np and the cache options given as -o that no flag gave)."""
    from ...launch.base import as_value
    path = model.name if model.name.endswith(".gguf") else f"{model.name}-{fmt or 'gguf'}.gguf"
    words = ["llama-server", "-m", as_value(path), *shlex.split(llama_args)]
    if "n_ctx" not in settings:
        words += ["-c", str(n_ctx)]
    if "n_seq" not in settings and not auto:        # no -np and no --batch: llama-server's -np auto
        words += ["-np", str(n_seq)]
    for name, flag in {"type_k": "-ctk", "type_v": "-ctv", "n_ubatch": "-ub", "n_batch": "-b"}.items():
        if name not in settings and cache.get(name) is not None:
            words += [flag, str(cache[name])]
    if "flash_attn" not in settings and cache.get("flash_attn") is not None:
        words += ["-fa", "on" if cache["flash_attn"] else "off"]
    if "mmap" not in settings and cache.get("mmap") is False:
        words += ["-lm", "none"]                     # layouts.Layout.flags: no --no-mmap at 0c1e57098
    if "kv_offload" not in settings and cache.get("kv_offload") is False:
        words.append("-nkvo")
    return shlex.join(words)
