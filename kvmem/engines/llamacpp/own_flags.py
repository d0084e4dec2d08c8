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
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

__all__ = ["MAX_ARGS_CHARS", "OwnFlags", "own_flags", "read_llama_args"]

MAX_ARGS_CHARS = 2000         # the flags given: a llama-server command line's placement part, bounded
WHAT = "--llama-args"
LLAMA_MAX_DEVICES = 16        # llama.cpp@0c1e57098 src/llama.cpp#L86-L88 llama_max_devices
AUTO_SLOTS = 4                # tools/server/server.cpp#L156-L160: -np auto -> 4 slots, kv_unified

# beside check-log's reader: -kvo/-nkvo (common/arg.cpp#L2413-L2420, a bool pair), -no-kvu (#L1723-L1730, -kvu's
# negative) and -fit/--fit on|off (#L2867-L2879); the values of --fit and -fa are common_arg_utils::is_truthy /
# is_falsey / is_autoy's (#L1334-L1344; -fa #L1754-L1768)
_SWITCHES = {"-nkvo": ("kv_offload", False), "--no-kv-offload": ("kv_offload", False),
             "-kvo": ("kv_offload", True), "--kv-offload": ("kv_offload", True),
             "-no-kvu": ("kv_unified", False), "--no-kv-unified": ("kv_unified", False),
             "-fit": ("fit", True), "--fit": ("fit", True)}
_TRUTHY = {**dict.fromkeys(("on", "enabled", "true", "1"), True), **dict.fromkeys(("off", "disabled", "false", "0"),
                                                                                  False)}
_VALUES = {"fit": _TRUTHY, "flash_attn": {**_TRUTHY, "auto": None, "-1": None}}
# words the pinned build reads otherwise than the builds check-log reads them for: said, read as those builds did
_OLDER = {"--no-mmap": "llama.cpp@0c1e57098 common/arg.cpp#L2690-L2708 has no --no-mmap (-lm none replaced it): "
                       "that build refuses it ('error: invalid argument'); read as -lm none, as the builds that had it"}
# a flag's kvmem name -> the llama_offload option it sets (and the -o option it must agree with)
_OPTIONS = {"type_k": "type_k", "type_v": "type_v", "n_ubatch": "n_ubatch", "n_batch": "n_batch",
            "flash_attn": "flash_attn", "kv_unified": "kv_unified", "mmap": "mmap", "kv_offload": "kv_offload"}
_FLAG_OF = {"type_k": "-ctk", "type_v": "-ctv", "n_ubatch": "-ub", "n_batch": "-b", "flash_attn": "-fa",
            "kv_unified": "-kvu", "mmap": "-lm / --no-mmap", "kv_offload": "-nkvo", "n_ctx": "-c", "n_seq": "-np"}


def _reader():
    from .logs import READER
    return replace(READER, command_switches={**READER.command_switches, **_SWITCHES},
                   switch_values={**READER.switch_values, **_VALUES})


def _older_words(text: str) -> list[str]:
    """Notes on the words of ``text`` that the pinned build reads otherwise (_OLDER; a -fa with no value, which
    builds from 2025-08 read the next word as: common/arg.cpp#L1754-L1768)."""
    words = shlex.split(text)
    notes = [why for word, why in _OLDER.items() if word in words]
    for at, word in enumerate(words):
        if word in ("-fa", "--flash-attn") and (at + 1 == len(words) or words[at + 1] not in _VALUES["flash_attn"]):
            notes.append(f"{word} with no value: llama.cpp@0c1e57098 common/arg.cpp#L1754-L1768 takes -fa "
                         f"on|off|auto and reads the next word as its value; read as -fa on, as earlier builds")
            break
    return notes


def read_llama_args(text) -> dict:
    """The flags of ``text`` (a llama-server command's flags, without the command word), read by check-log's
    reader: kvmem name -> value. A flag it does not read, -m (the model is kvmem's own argument) or a value
    llama.cpp refuses: ValueError naming it."""
    from ...logcheck.command import read_flags
    if not isinstance(text, str):
        raise ValueError(f"{WHAT} must be text (the flags of a llama-server command), got {type(text).__name__}")
    got = {name: value for name, (value, _) in read_flags(text, _reader(), max_chars=MAX_ARGS_CHARS,
                                                            what=WHAT).items()}
    if "model" in got:
        raise ValueError(f"{WHAT}: -m {got['model']}: give the model as kvmem's MODEL argument (a preset, a config "
                         "or the .gguf), not among the flags")
    return got


def _layers(raw) -> int:
    """-ngl as llama.cpp reads it (common/arg.cpp#L2788-L2806): auto -1, all -2, else std::stoi."""
    if raw is None or raw == "auto":
        return -1
    if raw == "all":
        return -2
    text = str(raw)
    if not re.fullmatch(r"[+-]?\d{1,9}", text):
        raise ValueError(f'{WHAT}: llama.cpp: error while handling argument "-ngl": stoi ({text!r} is not a whole '
                         "number, auto or all; common/arg.cpp#L2788-L2806)")
    return int(text)


def _split(raw, n_gpus: int) -> tuple:
    """-ts as llama.cpp keeps it for ``n_gpus`` devices (common/arg.cpp#L2830-L2853): one value each, 0 past the
    list; () for none given."""
    if raw is None:
        return ()
    parts = [p for p in re.split(r"[,/]+", str(raw))]
    if len(parts) >= LLAMA_MAX_DEVICES:
        raise ValueError(f'{WHAT}: llama.cpp: error while handling argument "-ts": got {len(parts)} input configs, '
                         f"but system only has {LLAMA_MAX_DEVICES} devices")
    values = []
    for part in parts:
        if not re.fullmatch(r"\s*\d+(\.\d*)?|\s*\.\d+", part):
            raise ValueError(f'{WHAT}: llama.cpp: error while handling argument "-ts": stof ({part!r} is not a '
                             "proportion)")
        values.append(float(part))
    return tuple((values + [0.0] * n_gpus)[:n_gpus])


def _buffer_types(rules, names: tuple) -> None:
    """-ot's buffer types: a device's present (common/arg.cpp#L251-L282: CPU, CUDA0..), else llama.cpp's error."""
    known = ("CPU", *names)
    for pattern, buft in rules:
        if buft not in known:
            raise ValueError(f'{WHAT}: llama.cpp: error while handling argument "-ot": unknown buffer type '
                             f"({buft!r} in {pattern}={buft}; with {len(names)} GPU{'s' * (len(names) != 1)} the "
                             f"buffer types are {', '.join(known)})")


@dataclass(frozen=True)
class _Held:
    """The flags as best.held_layout reads a placement's (a Layout's fields of the same names)."""

    n_gpu_layers: int
    tensor_split: tuple
    override_tensor: tuple
    placement: Any
    n_cpu_moe: int = 0


@dataclass(frozen=True)
class OwnFlags:
    """The user's llama-server flags at one workload: ``kvmem fit --llama-args``, ``kvmem plan --llama-args
    --json`` and the Fit page read this one record (to_dict, lines).

    ``layout``: the flags laid out (layouts.Layout; --fit on's where the flags leave it to place: ``placed_by``);
    ``devices``: per device its weights, KV, compute, total and the memory it has (None on the host unless
    host_memory_bytes bounds it) and whether it holds them; ``fits``: every device holds its share;
    ``pool_sequences`` / ``slot_context``: what the flags' own -c and -np give (0 where they do not fit): the
    sequences of ``context`` tokens the KV pool holds at once and the longest context one sequence (slot) gets;
    ``max_batch`` / ``max_context``: the largest workloads these flags' placement holds with -c (and -np) raised to
    what they need, ``raised``'s n_ctx and n_seq for each (0 where they do not fit);
    ``plan``: kvmem's placement and --fit on's at the same workload (offload.OffloadPlan); ``log_lines``: what
    llama.cpp prints for these buffers at start-up."""

    engine: str
    gpus: tuple
    given: str                    # the flags as given, shell-quoted back
    settings: dict                # the flags as read (kvmem names)
    context: int
    batch: int
    n_ctx: int
    n_seq: int
    kv_unified: bool
    placed_by: str                # "your flags" or "--fit on" (the flags leave the placement to it)
    layout: Any = field(repr=False)
    devices: tuple
    host_bytes: int
    host_shortfall: str | None
    fits: bool
    max_batch: int
    max_context: int
    pool_sequences: int
    slot_context: int
    raised: dict                  # {"max_batch" | "max_context": {"n_ctx", "n_seq"}}: the -c and -np each needs
    command: str                  # the command kvmem sized: llama-server, the model, -c, -np and the flags
    plan: Any = field(repr=False)
    log_lines: tuple
    notes: tuple

    def to_dict(self) -> dict:
        p = self.plan
        return {"engine": self.engine, "gpus": list(self.gpus), "llama_args": self.given,
                "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.settings.items()},
                "context": self.context, "batch": self.batch, "n_ctx": self.n_ctx, "n_seq": self.n_seq,
                "kv_unified": self.kv_unified, "placed_by": self.placed_by, "fits": self.fits,
                "devices": [dict(d) for d in self.devices], "host_bytes": self.host_bytes,
                "host_shortfall": self.host_shortfall, "pool_sequences": self.pool_sequences,
                "slot_context": self.slot_context, "max_batch": self.max_batch, "max_context": self.max_context,
                "raised": {k: dict(v) for k, v in self.raised.items()},
                "command": self.command, "layout": self.layout.to_dict(),
                "instead": {"kvmem": _alternative(p.best, p.budgets, p.command_best),
                            "fit_on": _alternative(p.fit, p.budgets, p.command_fit)},
                "log_lines": list(self.log_lines), "notes": list(self.notes)}

    def lines(self) -> list[str]:
        """The record as kvmem fit prints it: the verdict first, per device, what it holds, the other placements."""
        from ...units import format_bytes
        from .server_slots import raised_words
        head = (f"your flags on {' + '.join(self.gpus)} · llama.cpp: "
                + ("fit" if self.fits else "do not fit") + f" — {self.batch} x {self.context:,} tokens "
                f"(-c {self.n_ctx:,}, {self.n_seq} slot{'s' * (self.n_seq != 1)}"
                f"{', one unified KV pool' if self.kv_unified else ''})")
        out = [head, f"  flags: {self.given or '(none)'}" + (" (placed by --fit on: they leave -ngl, -ts and -ot to it)"
                                                  if self.placed_by == "--fit on" else "")]
        if self.host_shortfall:
            out.append(f"  {self.host_shortfall}")
        for d in self.devices:
            have = (f" of {format_bytes(d['memory_bytes'])}" if d["memory_bytes"] is not None else
                    " (host RAM not given: not checked)")
            verdict = "" if d["memory_bytes"] is None else (" ok" if d["fits"] else " OVER")
            out.append(f"  {d['device']}: weights {format_bytes(d['model_bytes'])}, KV {format_bytes(d['kv_bytes'])}"
                       f", compute {format_bytes(d['compute_bytes'])}{'' if d['compute_exact'] else ' (estimate)'}"
                       + (f", CUDA context {format_bytes(d['context_bytes'])}" if d["context_bytes"] else "")
                       + f" = {format_bytes(d['total_bytes'])}{have}{verdict}")
        slots = f"{self.n_seq} slot{'s' * (self.n_seq != 1)}" + (", one pool" if self.kv_unified else "")
        out += [f"  with -c {self.n_ctx:,} ({slots}): " + (
                    f"{self.pool_sequences} sequence{'s' * (self.pool_sequences != 1)} of {self.context:,} tokens at "
                    f"once; a sequence up to {self.slot_context:,} tokens" if self.fits else "nothing runs"),
                f"  max batch at {self.context:,} tokens: {self.max_batch}, {raised_words(self, 'max_batch')}",
                f"  max context at batch {self.batch}: {self.max_context:,} tokens a sequence, "
                f"{raised_words(self, 'max_context')}",
                f"  sized as: {self.command}"]
        p = self.plan
        for label, lay, cmd in (("instead, kvmem", p.best, p.command_best), ("instead, --fit on", p.fit,
                                                                              p.command_fit)):
            alt = _alternative(lay, p.budgets, cmd)
            out.append(f"  {label}: " + ("nothing fits" if alt is None else
                                         f"{' '.join(alt['flags'])}; " + ", ".join(
                                             f"{dev} {format_bytes(n)}" for dev, n in alt["total_bytes"].items())
                                         + ("" if alt["fits"] else " (over)")))
        out.append("  llama.cpp would print:")
        out += [f"    {line}" for line in self.log_lines]
        out += [f"  note: {note}" for note in self.notes]
        return out


def _alternative(lay, budgets: dict, command: str) -> dict | None:
    if lay is None:
        return None
    return {"flags": lay.flags(), "total_bytes": dict(lay.total_bytes), "fits": lay.fits(budgets),
            "command": command}


def _agree(settings: dict, options: dict, kv_dtype) -> dict:
    """The cache's options from the flags and from ``options`` (-o), a contradiction refused naming both."""
    merged = {}
    for name, option in _OPTIONS.items():
        flag, given = settings.get(name), options.get(option)
        if name in settings and given is not None and flag is not None and flag != given:
            shown = {True: "on", False: "off"}.get(flag, flag) if name == "flash_attn" else flag
            raise ValueError(f"{WHAT}: {_FLAG_OF[name]} {shown} contradicts -o {option}={given}: give it once")
        value = flag if name in settings else given
        if value is not None:
            merged[option] = value
    if kv_dtype not in (None, "auto"):
        alias = {"fp16": "f16", "float16": "f16", "bfloat16": "bf16"}
        cache = alias.get(str(kv_dtype).lower(), str(kv_dtype).lower())
        for name in ("type_k", "type_v"):
            if name in merged and str(merged[name]).lower() != cache:
                raise ValueError(f"{WHAT}: {_FLAG_OF[name]} {merged[name]} contradicts --kv-dtype {kv_dtype}: give "
                                 "the cache type once")
    return merged


def _workload(settings: dict, context: int, batch: int | None, options: dict, kv_unified: bool) -> tuple:
    """(n_ctx, n_seq, sequences, kv_unified, notes) of the flags at kvmem's workload, ``batch`` sequences of
    ``context`` tokens in n_ctx = context x sequences cells. Slots (n_seq): -np, else --batch, else llama-server's
    -np auto (4 slots, one unified pool). Separate streams (no -kvu) hold n_ctx / n_seq cells each
    (src/llama-context.cpp#L292-L296): the sequences are the slots, -np and --batch must agree. One unified pool
    lets each slot take all n_ctx cells: the sequences are --batch (default 1), whatever the slots. -c, where given,
    must be those cells."""
    notes = []
    n_seq = settings.get("n_seq")
    given_seq = options.get("n_seq")
    if n_seq is None:
        n_seq = batch if batch is not None else given_seq
    if n_seq is None or n_seq == -1:
        n_seq, kv_unified = AUTO_SLOTS, True
        notes.append(f"no -np: llama-server's -np auto runs {AUTO_SLOTS} slots sharing one KV pool of -c cells "
                     "(tools/server/server.cpp#L156-L160), each slot up to all of them (src/llama-context.cpp"
                     "#L292-L296)")
    if not isinstance(n_seq, int) or isinstance(n_seq, bool) or n_seq < 1:
        raise ValueError(f"{WHAT}: -np {n_seq!r}: llama.cpp: error: invalid value for n_parallel (common/arg.cpp"
                         "#L2543-L2551; a positive number, or -1 for auto)")
    if not kv_unified:
        for other, what in ((batch, "--batch"), (given_seq, "-o n_seq")):
            if other is not None and other != n_seq:
                raise ValueError(f"{WHAT}: -np {n_seq} contradicts {what} {other}: without -kvu each of the "
                                 f"{n_seq} slots is a sequence; give the sequences once")
    sequences = n_seq if not kv_unified else (batch or 1)
    n_ctx = context * sequences
    if "n_ctx" in settings and settings["n_ctx"] != n_ctx:
        c = settings["n_ctx"]
        hint = (f"--context {c // sequences}" if isinstance(c, int) and c > 0 and c % sequences == 0
                else "another -c")
        raise ValueError(f"{WHAT}: -c {c} contradicts --context {context:,} x {sequences} sequence"
                         f"{'s' * (sequences != 1)} = {n_ctx:,} cells: give {hint}, or leave -c out (kvmem writes "
                         f"-c {n_ctx})")
    return n_ctx, n_seq, sequences, kv_unified, notes


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
    cache = _agree(settings, opts, kv_dtype)
    auto = settings.get("n_seq") is None and batch is None and options.get("n_seq") is None
    n_ctx, n_seq, sequences, kv_unified, notes = _workload(settings, context, batch, options,
                                                           bool(cache.pop("kv_unified", False)))
    notes = _older_words(llama_args) + notes
    ngl = _layers(settings.get("n_gpu_layers"))
    split = _split(settings.get("tensor_split"), len(names))
    rules = tuple(settings.get("override_tensor", ()))
    _buffer_types(rules, names)
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

    common = {k: v for k, v in opts.items() if k not in _OPTIONS.values()}
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
    cap = max(model.max_position_embeddings or context, context)
    units = (largest_fitting(lambda u: runs(min(u * 256, cap), sequences), -(-cap // 256), -(-context // 256))
             if fits else 0)
    notes += [f"compute buffers on {', '.join(d['device'] for d in devices if not d['compute_exact'])} are "
              "estimates (kvmem/engines/llamacpp/layouts.py)"] if not all(d["compute_exact"] for d in devices) else []
    notes += [n for n in plan.notes if n.startswith("tensors:")]
    cache_lines = _cache_lines(model, kv_dtype, {**place_kw, **cache, "n_ctx": n_ctx, "n_seq": n_seq,
                                                 "kv_unified": kv_unified}, notes)
    pool_sequences, slot_context = slots_held(n_ctx, n_seq, kv_unified, context, model.max_position_embeddings)
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


def start_up_lines(lay, cache_lines: tuple = ()) -> list[str]:
    """The buffer lines llama.cpp prints for a layout, in its formats at 0c1e57098: "load_tensors: offloaded N/M
    layers to GPU" (src/llama-model.cpp#L1924), "%12s model buffer size = %8.2f MiB" (#L1930), the KV cache's
    "%10s KV buffer size" (src/llama-kv-cache.cpp#L291) then its ``cache_lines`` (the estimate's "size =" lines,
    log_lines), and sched_reserve's "%10s compute buffer size"
    (src/llama-context.cpp#L740, buffers over 1 B); MiB as placement.buffer_mib. The host's compute buffer is the
    pinned CUDA_Host one where a GPU holds layers, else the CPU backend's (layouts.layout's one host figure)."""
    from .placement import CPU, buffer_mib
    p = lay.placement
    out = []
    if p.gpus:
        out.append(f"load_tensors: offloaded {p.offloaded_layers}/{p.layers_total} layers to GPU")
    host, gpus = p.devices[-1], p.devices[:-1]
    for d in (host, *gpus):
        if d.model_bytes:
            out.append(f"load_tensors: {d.buffer_name:>12} model buffer size = {buffer_mib(d.model_bytes):8.2f} MiB")
    # one cache (one size line): one KV buffer a device; SWA / indexer / recurrent caches print their buffers each
    # apart, which the placement sums per device (said in own_flags' notes, not printed as one line)
    if len(cache_lines) == 1 and cache_lines[0].startswith("llama_kv_cache"):
        for d in (*gpus, host):
            if d.kv_bytes:
                out.append(f"llama_kv_cache: {d.device:>10} KV buffer size = {buffer_mib(d.kv_bytes):8.2f} MiB")
    out += cache_lines
    for d in (*gpus, host):
        nbytes = lay.compute_bytes.get(d.device, 0)
        name = ("CUDA_Host" if p.gpus and p.offloaded_layers else CPU) if d.device == CPU else d.device
        if nbytes > 1:
            out.append(f"sched_reserve: {name:>10} compute buffer size = {buffer_mib(nbytes):8.2f} MiB")
    return out
