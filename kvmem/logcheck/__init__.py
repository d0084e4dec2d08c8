"""Check a real startup log against kvmem: kvmem.check_log(text, model, ...) -> LogCheck.

The log's lines are found by their text, by each engine's reader (EngineSpec.log_reader, a
LogReader in kvmem/engines/<engine>/logs.py). The settings the engine prints are read first (each
reader's ``printed``: vLLM's config line and
"non-default args", SGLang's server_args, llama.cpp's llama_context and cache lines, TRT-LLM's
tokens per block): the model, tp/pp, the KV dtype, max_model_len, block size, prefix caching, the
version, ... A launch command pasted above the log (kvmem.logcheck.command) gives its flags, below
what the engine prints. An argument given overrides what the log prints; what neither states is the engine's
default; LogCheck.inputs says which came from where. The model may be left out when the log names
one kvmem has a preset for (an HF id, a preset name or alias, a path whose folder or GGUF file is
named so): never the network. Each number line is then compared with what kvmem computes, by the
same library calls kvmem.fit and kvmem.plan use (kvmem.capacity, the engine's estimate and pools,
kvmem.weights per device): it matches, or the check names the difference and its likely cause.
Lines kvmem does not know are ignored, never misread; a log with nothing kvmem can check says so.
vLLM ("Model loading took", "Available KV cache memory", "GPU KV cache size", "Maximum
concurrency"), SGLang ("KV Cache is allocated", "Mamba Cache is allocated", the scheduler's
max_running_requests) and llama.cpp ("llama_kv_cache[_unified]:
size = ...", iSWA pairs, "llama_memory_recurrent: size = ...", with the llama_context lines that
state n_ctx, n_seq_max, kv_unified) and TRT-LLM ("available: A GiB" with the primary pool's blocks,
"Allocated X GiB for max tokens in paged KV cache (N)") are read.

A log is an input from outside: at most MAX_LOG_CHARS characters (kvmem.sources.bounded.MAX_LOG_BYTES),
read by patterns that take one pass over a line however long it is, and a number no server prints
(past 24 digits or 2**40, or not a number) is refused naming its line.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from ..catalog import as_model, preset
from ..engines import ENGINES
from ..parallel import check_parallel
from ..sources.bounded import MAX_LOG_BYTES, quote
from . import command
from .base import LineCheck, LogCheck

__all__ = ["check_log", "readers", "LogCheck", "LineCheck", "MAX_LOG_CHARS"]
MAX_LOG_CHARS = MAX_LOG_BYTES       # a startup log: a few hundred KB; a file or a paste past this is refused
_UNREAD: dict = {}
# settings that are not engine options but that a check reads (the weights line's format, ...)
INFO = ("weight_dtype", "quantization", "max_num_seqs", "gpu_memory_utilization", "context_length",
        "mem_fraction_static", "weight_format", "tensor_split", "mmap", "n_gpu_layers")
_QUANT_TAGS = ("f16", "bf16", "f32", "fp16", "fp8", "mxfp4")
# the name endings of quantised checkpoints on the Hub (Qwen's -FP8 / -AWQ / -GPTQ-Int4, RedHat's -FP8-dynamic,
# neuralmagic's -quantized.w8a8, NVIDIA's -NVFP4), longest first
_QUANTISED = ("-fp8-dynamic", "-gptq-int4", "-gptq-int8", "-quantized.w8a8", "-quantized.w4a16", "-fp8", "-awq",
              "-nvfp4", "-mxfp4", "-w8a8", "-w4a16", "-int4", "-int8")


def readers() -> dict:
    """Engine name -> its LogReader (kvmem.engines.base.LogReader), for every engine that has one, in
    kvmem.engines.ENGINES' order."""
    return {name: spec.log_reader for name, spec in ENGINES.items() if spec.log_reader is not None}


def _engine_of(found: dict, reading: dict) -> str | None:
    """The engine whose lines ``found`` holds: a reader of specific lines first, then a generic one."""
    ordered = sorted(reading, key=lambda name: reading[name].generic)       # stable: ENGINES' order within each
    return next((name for name in ordered if reading[name].claims(found[name])), None)


def check_log(text: str, model=None, *, engine: str | None = None, kv_dtype=None, tp: int | None = None,
              pp: int | None = None, expected_kv_memory: int | None = None, fallback: dict | None = None,
              **options) -> LogCheck:
    """Every number line of ``text`` kvmem can check (module docstring). ``model``, ``kv_dtype``, ``tp``,
    ``pp`` and ``options`` (engine options, and weight_dtype for a weights line) override what the log
    prints; None: the log's, else ``fallback``'s (the same names: what a caller such as the app has
    beside the log, used only where the log prints nothing; the model too, where the log names none
    kvmem has), else the engine's default. ``expected_kv_memory``: the plan's KV budget per device
    (kvmem.fit(...).kv_memory_bytes), for an engine whose log states its own (EngineSpec.logs_kv_budget)."""
    if not isinstance(text, str):
        raise ValueError(f"log must be text (str), got {type(text).__name__}")
    if len(text) > MAX_LOG_CHARS:
        raise ValueError(f"log is {len(text):,} characters; kvmem reads at most {MAX_LOG_CHARS:,} of a startup log "
                         "(its KV lines come in the first minutes: pass those, e.g. the first 10,000 lines)")
    lines = text.splitlines()
    reading = readers()
    found = {name: reader.read(lines) for name, reader in reading.items()}
    engine = engine or _engine_of(found, reading)
    notes = []
    if engine is None or engine not in reading:
        known = [name for name, marker in _UNREAD.items() if marker in text]
        if known or engine in _UNREAD:
            notes.append(f"{engine or known[0]} logs are not read by check-log yet; nothing was checked")
        else:
            read = [reader.lines for reader in reading.values()]
            notes.append("no line kvmem can check: it reads " + ", ".join(read[:-1]) + " and " + read[-1])
        name = model if isinstance(model, str) else getattr(model, "name", "")
        return LogCheck(engine=engine, model=name or "", settings={}, notes=tuple(notes), ignored=len(lines))
    reader = reading[engine]
    unread: list = []                     # a command line kvmem did not read: said, and no flag of it blamed
    printed = {**command.read(lines, reader, unread), **reader.printed(lines)}   # what the engine printed wins
    notes += unread
    inputs = _inputs(printed, model=model, kv_dtype=kv_dtype, tp=tp, pp=pp, options=options,
                     fallback=fallback or {})
    architecture = inputs.pop("architecture", (None,))[0]     # what the log prints of the model's shape
    model = _model(inputs, (fallback or {}).get("model"), architecture)
    inputs = {"model": inputs.pop("model"), **inputs}
    try:
        tp, pp = check_parallel(inputs["tp"][0], inputs["pp"][0])
    except ValueError as exc:
        raise ValueError(f"{exc} (tp from {inputs['tp'][1]}, pp from {inputs['pp'][1]})") from None
    used, info = {}, {}
    for name, (value, source) in inputs.items():
        if name in ("model", "tp", "pp", "kv_dtype"):
            continue
        if value is None and source.startswith("log") and ENGINES[engine].options.get(name) is not None:
            inputs[name] = (ENGINES[engine].options[name], "default")     # printed unset: the engine's default
            continue
        if source == "given" or name in ENGINES[engine].options or name in reader.check_options:
            (info if name in INFO else used)[name] = value       # an option given goes on, to be refused if unknown
        else:
            info[name] = value
    extra = {"expected_kv_memory": expected_kv_memory} if ENGINES[engine].logs_kv_budget else {}
    settings, checks, more = reader.check(model, found[engine], kv_dtype=inputs["kv_dtype"][0], tp=tp,
                                                   pp=pp, info=info, **extra, **used)
    notes += more
    if unread:
        checks = [c if c.matches else replace(c, cause="the command above the log was not read (see the note): its "
                                                   "flags are not known to kvmem; give them as options (-o NAME=VALUE)")
                  for c in checks]
    if not checks:
        notes.append("no line kvmem can check for this engine in the log")
    in_order = tuple(sorted(checks, key=lambda c: c.line))
    return LogCheck(engine=engine, model=model.name, settings=settings, checks=in_order, notes=tuple(notes),
                    ignored=len(lines) - len({c.line for c in checks}), inputs=inputs)


def _inputs(printed: dict, *, model, kv_dtype, tp, pp, options: dict, fallback: dict) -> dict:
    """name -> (value, where from): the fallback's, the log's settings over them, then the arguments over
    those, then the defaults."""
    inputs = {name: (value, "fallback") for name, value in fallback.items() if value is not None and name != "model"}
    inputs.update({name: (value, f"log line {n}") for name, (value, n) in printed.items()})
    given = {"model": model, "kv_dtype": kv_dtype, "tp": tp, "pp": pp, **options}
    inputs.update({name: (value, "given") for name, value in given.items() if value is not None})
    for name, default in (("tp", 1), ("pp", 1), ("kv_dtype", "auto")):
        if inputs.get(name, (None,))[0] is None:
            inputs[name] = (default, "default")
    return inputs


def _model(inputs: dict, fallback=None, architecture: dict | None = None):
    """The model given, else the preset the log names (its id, folder or GGUF file name; then the name the GGUF
    gives itself, ``model_name``), else ``fallback``; never the network. A preset the log's name is read as is
    checked against the ``architecture`` the log prints (llama.cpp's n_layer, n_embd, n_expert): a mismatch is
    refused naming it, and a name read only by dropping a variant tag (a date "-0324", a context "-128K") needs a
    printed architecture that agrees."""
    named = inputs.pop("model_name", None)      # llama.cpp's general.name: below a path the log or command gives
    if "model" not in inputs or inputs["model"][0] is None:
        if named is not None:
            inputs["model"] = named
        elif fallback is not None:
            inputs["model"] = (getattr(fallback, "name", fallback), "fallback; the log names no model")
            return as_model(fallback)
        else:
            raise ValueError("no model given and the log names none: give the model (--model: a preset, an HF id or "
                             "a config.json)")
    value, source = inputs["model"]
    if source == "given":
        return as_model(value)
    for name, where in dict.fromkeys([(value, source)] + ([named] if named is not None else [])):
        if (found := _preset_named(inputs, name, where, architecture)) is not None:
            return found
    if fallback is not None:
        inputs["model"] = (getattr(fallback, "name", fallback),
                           f"fallback; the log's {quote(value, 120)} ({source}) is not a kvmem preset")
        return as_model(fallback)
    raise ValueError(f"the log names the model {quote(value, 120)} ({source}), which is not a kvmem preset; "
                     "check-log does not fetch it: give the model (--model: a preset, an HF id or a config.json)")


def _preset_named(inputs: dict, value, source: str, architecture: dict | None):
    """The preset ``value`` (a name the log prints) is read as, recorded in inputs["model"], or None."""
    names = _model_names(str(value))
    for name in names + [v for v in _variants(names) if v not in names]:
        try:
            key = preset(name)["name"]
        except ValueError:
            continue
        found = as_model(key)
        dropped = name not in names
        _same_architecture(found, architecture, value, name, dropped)
        inputs["model"] = (key, f"{source}: {quote(value, 120)}" + ("" if name == value else f", read as {name}") +
                           (" (its architecture as the log prints it: " + ", ".join(
                               f"{k} {v}" for k, v in architecture.items()) + ")" if dropped and architecture else ""))
        return found
    for name in names:     # a quantised checkpoint of a preset: the same KV, other weights
        base = _unquantised(name)
        try:
            key = preset(base)["name"] if base else None
        except ValueError:
            continue
        if key:
            inputs["model"] = (key, f"{source}: {quote(value, 120)}, read as {base}, whose quantised checkpoint it is "
                                    "(the same KV; its weights from the log's quantization)")
            return as_model(key)
    return None


# name parts that name a variant of a model, not another model: a release date ("0324", "2507"), a context length
# ("128K", "1M"); dropped only where the log prints an architecture that agrees with the preset (_same_architecture)
_VARIANT = re.compile(r"(?:\d{4}|\d{1,4}[KkMm])")


def _variants(names: list[str]) -> list[str]:
    """``names`` with their variant parts dropped, from the end ("Qwen3-235B-A22B-128K" -> "Qwen3-235B-A22B",
    "DeepSeek-V3-0324" -> "DeepSeek-V3")."""
    out = []
    for name in names:
        parts = name.split("-")
        while len(parts) > 1 and _VARIANT.fullmatch(parts[-1]):
            parts.pop()
            out.append("-".join(parts))
    return list(dict.fromkeys(out))


def _same_architecture(model, architecture: dict | None, value, name: str, dropped: bool) -> None:
    """Refuse a preset the log's architecture contradicts (llama.cpp's n_layer may count the file's NextN/MTP
    blocks); a name read by dropping a variant tag needs an architecture to agree with."""
    if not architecture:
        if dropped:
            raise ValueError(f"the log names the model {quote(value, 120)}, read as {name!r} only by dropping a "
                             "variant tag, and prints no architecture (n_layer, n_embd, n_expert) to confirm it: give "
                             "the model (--model: a preset, an HF id or a config.json)")
        return
    moe = model.facts.moe
    experts = moe.experts if moe else 0
    ours = {"n_layer": (model.num_layers, model.num_layers + (model.mtp_layers or 0)),
            "n_embd": (model.hidden_size,), "n_expert": (experts,)}
    wrong = [f"{k} {v} (kvmem's {model.name}: {' or '.join(map(str, dict.fromkeys(ours[k])))})"
             for k, v in architecture.items() if k in ours and v not in ours[k]]
    if wrong:
        raise ValueError(f"the log names the model {quote(value, 120)}, read as kvmem's {model.name}, but prints "
                         f"{'; '.join(wrong)}: another model; give the model (--model: a preset, an HF id or a "
                         "config.json)")


def _unquantised(name: str) -> str | None:
    """``name`` without a quantised checkpoint's ending ("Qwen/Qwen3-235B-A22B-FP8" -> "Qwen/Qwen3-235B-A22B")."""
    lowered = name.lower()
    return next((name[:-len(end)] for end in _QUANTISED if lowered.endswith(end) and len(name) > len(end)), None)


def _quant_tag(part: str) -> bool:
    """Whether a GGUF file name's ``part`` names its quantisation ("Q4_K_M", "IQ2_XXS", "BF16")."""
    return part.lower() in _QUANT_TAGS or part[:1].lower() in "qi" and any(c.isdigit() for c in part[:3])


def _model_names(value: str) -> list[str]:
    """The names a model the log prints may go by: as printed, its folder or file name, the HF id of an HF
    cache folder, and a GGUF file's name without its quantisation tag ("Qwen3-0.6B-Q8_0.gguf" -> "Qwen3-0.6B")."""
    path = value.replace("\\", "/").rstrip("/")
    base = os.path.basename(path)
    names = [value, base]
    if " " in value.strip() and "/" not in value:      # a GGUF's general.name: "Meta Llama 3.1 8B Instruct"
        names.append("-".join(value.split()))
        # a name that ends in the type its checkpoint was converted from ("DeepSeek R1 BF16"): without it
        if len(words := value.split()) > 1 and words[-1].lower() in _QUANT_TAGS:
            names.append("-".join(words[:-1]))
    if (at := path.find("models--")) >= 0:     # an HF cache folder: .../hub/models--Org--Name/snapshots/<commit>
        names.append(path[at + len("models--"):].split("/", 1)[0].replace("--", "/", 1))
    if base.lower().endswith(".gguf"):
        stem = base[:-5]
        parts = stem.split("-")
        # a split file's "-00001-of-00004", a merged split's "-merged" (llama-gguf-split), then the quantisation
        # tags, Unsloth's "UD-" (its dynamic mixes) among them
        if len(parts) > 3 and parts[-2] == "of" and parts[-1].isdigit() and parts[-3].isdigit():
            parts = parts[:-3]
        if len(parts) > 1 and parts[-1].lower() == "merged":
            parts.pop()
        # the quantisation after a dot ("DeepSeek-R1.Q8_0-00001-of-00015.gguf", "llama-2-7b.Q4_K_M.gguf")
        if "." in parts[-1] and _quant_tag(parts[-1].rsplit(".", 1)[1]):
            parts[-1] = parts[-1].rsplit(".", 1)[0]
        while len(parts) > 1 and (_quant_tag(parts[-1]) or parts[-1] == "UD"):
            parts.pop()
        names += [stem, "-".join(parts)]
        if "_" in parts[0]:                    # "Org_Name-Q4_K_M.gguf" (bartowski's naming): Org/Name
            names.append("-".join(parts).replace("_", "/", 1))
    return list(dict.fromkeys(n for n in names if n))
