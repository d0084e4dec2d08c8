"""The user's llama-server flags read and checked for own_flags (kvmem fit --llama-args): check-log's reader
(logs.READER) with the switches a placement needs, -ngl, -ts and -ot's buffer types as llama.cpp reads them,
the cache options agreed with -o, and the workload (-c, -np) at kvmem's --context and --batch (own_flags' module
doc has the rules and their sources).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace

__all__ = ["AUTO_SLOTS", "CACHE_OPTIONS", "LLAMA_MAX_DEVICES", "MAX_ARGS_CHARS", "WHAT", "agree_cache",
           "check_buffer_types", "older_words", "read_layers", "read_llama_args", "read_split", "workload"]

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
_VALUES: dict[str, dict] = {"fit": _TRUTHY, "flash_attn": {**_TRUTHY, "auto": None, "-1": None}}
# words the pinned build reads otherwise than the builds check-log reads them for: said, read as those builds did
_OLDER = {"--no-mmap": "llama.cpp@0c1e57098 common/arg.cpp#L2690-L2708 has no --no-mmap (-lm none replaced it): "
                       "that build refuses it ('error: invalid argument'); read as -lm none, as the builds that had it"}
# a flag's kvmem name -> the llama_offload option it sets (and the -o option it must agree with)
CACHE_OPTIONS = {"type_k": "type_k", "type_v": "type_v", "n_ubatch": "n_ubatch", "n_batch": "n_batch",
            "flash_attn": "flash_attn", "kv_unified": "kv_unified", "mmap": "mmap", "kv_offload": "kv_offload"}
_FLAG_OF = {"type_k": "-ctk", "type_v": "-ctv", "n_ubatch": "-ub", "n_batch": "-b", "flash_attn": "-fa",
            "kv_unified": "-kvu", "mmap": "-lm / --no-mmap", "kv_offload": "-nkvo", "n_ctx": "-c", "n_seq": "-np"}


def _reader():
    from .logs import READER
    return replace(READER, command_switches={**READER.command_switches, **_SWITCHES},
                   switch_values={**READER.switch_values, **_VALUES})


def older_words(text: str) -> list[str]:
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


def read_layers(raw) -> int:
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


def read_split(raw, n_gpus: int) -> tuple:
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


def check_buffer_types(rules, names: tuple) -> None:
    """-ot's buffer types: a device's present (common/arg.cpp#L251-L282: CPU, CUDA0..), else llama.cpp's error."""
    known = ("CPU", *names)
    for pattern, buft in rules:
        if buft not in known:
            raise ValueError(f'{WHAT}: llama.cpp: error while handling argument "-ot": unknown buffer type '
                             f"({buft!r} in {pattern}={buft}; with {len(names)} GPU{'s' * (len(names) != 1)} the "
                             f"buffer types are {', '.join(known)})")


def agree_cache(settings: dict, options: dict, kv_dtype) -> dict:
    """The cache's options from the flags and from ``options`` (-o), a contradiction refused naming both."""
    merged = {}
    for name, option in CACHE_OPTIONS.items():
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


def workload(settings: dict, context: int, batch: int | None, options: dict, kv_unified: bool) -> tuple:
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
