"""llama.cpp's cache lines, checked (src/llama-kv-cache.cpp, src/llama-kv-cache-iswa.cpp,
src/llama-memory-recurrent.cpp; log_lines.py beside it renders the same lines): the reader kvmem.check_log
asks (READER, EngineSpec.log_reader). Over 300 lines by design: one reader for every era of the cache lines
(size lines, KV self lines, buffers per device) and the launch command pasted above them.

The build line ("build: 5331 (33eff402) ...", "build_info: b8946-...": kvmem.engines.llamacpp.builds) dates
the build by master's history; without one the line format dates it (llama_kv_cache_unified with "N seqs": about
May to mid-July 2025; with "s/t seqs": to Aug 21, 2025; llama_kv_cache: later), and kvmem renders that build's
rules (option ``build`` overrides). Settings come from the log: "llama_context: n_ctx = N",
"n_seq_max = S", "kv_unified = true", "n_ubatch = U" and "flash_attn" where it prints them;
otherwise from the first size line "llama_kv_cache: size = X MiB ( C cells, L layers, s/t
seqs), K (tk): ..., V (tv): ..." (t streams of C cells: n_ctx = C x t; one stream holding s
sequences: unified). The cache types come from the size line. kvmem's estimate under those
settings must print the same size lines (exact: the bytes follow from the settings alone). A
difference in cells means another -c / -np / --kv-unified / -ub (or another build's padding);
in bytes, another cache type or other layers (the GGUF's architecture, an MLA split cache) than
the model given.
"""

from __future__ import annotations

import re
from datetime import date as _D

from ...logcheck.base import LineCheck, logged_number, strip_prefix
from ...logcheck.command import Appends
from ...logcheck.printed import after, field, value_of
from .. import engine_estimate
from ..serving import LogReader
from .arch_builds import first_build
from .builds import build_date, build_line, uncounted
from .file_types import FILE_TYPE_NAMES
from .layouts import MAX_LAYERS
from .log_lines import log_lines
from .offload import layout
from .overrides import CPU, EXPS_REGEX, check_pattern
from .placement import GGML_TYPES, buffer_mib
from .tensors import FORMATS, synthesised_tensors

# Each pattern starts with a literal and repeats only a character class the next literal ends: one
# pass over a line however long (TYPES is matched right after the size line's "seqs)", never ".*").
# llama-server's context checkpoint (tools/server/server-context.cpp#L2349-L2352, size in MiB of 2**20 B):
# kvmem.engines.llamacpp.checkpoints
CHECKPOINT = re.compile(r"created context checkpoint (\d+) of (\d+) \([^)]{0,200}size = ([0-9.]+) MiB\)")
# builds 5429-5440 (PR #13194's SWA caches, 2025-05-20, to PR #13660) print no seqs: "( 16384 cells,  61 layers), K
# (f16): ..." (src/llama-kv-cache.cpp#L132 at e298d2fbd)
SIZE = re.compile(r"(llama_kv_cache(?:_unified)?|llama_memory_recurrent): size = +[0-9.]+ MiB \( *(\d+) cells, +(\d+) "
                  r"layers(?:, +(\d+)(?:/ *(\d+))? seqs|\))")
TYPES = re.compile(r"(?:seqs|layers)\), +K \((\w+)\): +[0-9.]+ MiB, +V \((\w+)\):")
# llama_context (from mid-2025), llama_init_from_model (early 2025), llama_new_context_with_model (2024)
CONTEXT = {"n_ctx": re.compile(r"(?:llama_context|llama_init_from_model|llama_new_context_with_model): n_ctx += (\d+)"),
           "n_seq": re.compile(r"(?:llama_context|llama_init_from_model|llama_new_context_with_model): n_seq_max += "
                               r"(\d+)"),
           "n_ubatch": re.compile(r"(?:llama_context|llama_init_from_model|llama_new_context_with_model): n_ubatch += "
                                  r"(\d+)")}
UNIFIED = re.compile(r"kv_unified += (true|false|1|0)")
# Before the size line (2024 to May 20, 2025): "<prefix>: KV self size  = X MiB, K (f16): A MiB, V (f16): B MiB";
# llama_kv_cache_unified from build 5262 (PR #12799, 2025-05-02, src/llama-kv-cache.cpp#L129 at 3bf785f3e) to
# build 5440 (PR #13660's size line from build 5441, 2025-05-21). A recurrent cache's "KV self size" (R/S, or
# llama_kv_cache_recurrent's K/V of b5262-b5558) is not read here.
KV_SELF = re.compile(r"(llama_new_context_with_model|llama_init_from_model|llama_context|llama_kv_cache_unified): KV "
                     r"self size += +[0-9.]+ MiB, +K \((\w+)\): +[0-9.]+ MiB, +V \((\w+)\): +[0-9.]+ MiB")
# a build of the era each KV self prefix dates (kvmem.engines.llamacpp.log_lines _KV_SELF_PREFIX; approximate within
# it: a build line in the log dates it exactly, kvmem.engines.llamacpp.builds)
_KV_SELF_BUILD = {"llama_new_context_with_model": "2024-12-01", "llama_init_from_model": "2025-02-01",
                  "llama_context": "2025-04-01", "llama_kv_cache_unified": "2025-05-10"}
FLASH = re.compile(r"(?:llama_context|llama_init_from_model|llama_new_context_with_model): flash_attn += (\w+)")
# Buffers per device (found by str.find: the device is the word before the marker, the MiB after it)
BUFFERS = ((" model buffer size = ", "model"), (" KV buffer size = ", "KV"), (" RS buffer size = ", "KV"),
           (" compute buffer size = ", "compute"), (" buffer size = ", "model"))   # the last: llm_load_tensors (2024)
# The CPU backend's extra weight buffer types (llama.cpp@3f545becc ggml/src/ggml-cpu/amx/amx.cpp#L122 "AMX",
# ggml/src/ggml-cpu/repack.cpp#L4746 "CPU_REPACK"): the host weights such a type takes are loaded into a buffer of
# its own, while the mmap'd "CPU_Mapped" buffer spans the file range [first, last] of the default buffer type's
# tensors (src/llama-model.cpp#L1612-L1632 is_default_buft; src/llama-model-loader.cpp#L1381-L1394
# get_mapping_range), which holds the repacked tensors' bytes too when they lie between
EXTRA_HOSTS = {"AMX", "CPU_REPACK"}
# a GPU backend's pinned host buffer type, "<backend>_Host" (llama.cpp@3f545becc ggml/src/ggml-cuda/ggml-cuda.cu#L1263
# with GGML_CUDA_NAME "CUDA" / "ROCm" / "MUSA", ggml/include/ggml-cuda.h#L11-L17; ggml-sycl.cpp#L1467 "SYCL";
# ggml-vulkan.cpp#L16173 "Vulkan"; ggml-cann.cpp#L1653 "CANN_Host")
HOSTS = {"CPU", "CPU_Mapped", "Metal_Mapped", *(f"{name}_Host" for name in ("CUDA", "ROCm", "MUSA", "SYCL", "Vulkan",
                                                                             "CANN")), *EXTRA_HOSTS}
OFFLOADED = "offloaded "                          # "load_tensors: offloaded 33/49 layers to GPU"
FREE = "using device "                            # "using device CUDA0 (NVIDIA ...) - 23982 MiB free"
FILE_TYPE = ("file type   = ", "model ftype      = ")     # print_info / llm_load_print_meta
# llama_ftype_name (llama.cpp@0c1e57098 src/llama-model-loader.cpp#L33-L76; kvmem.engines.llamacpp.file_types
# FILE_TYPE_NAMES) -> the formats kvmem.engines.llamacpp.tensors lays out: every name but "NVFP4" (no default type at
# the pinned build: llama-quantize writes no such file) and "unknown, may not work"
# the same at 2025-05 builds (src/llama-model-loader.cpp at 053b1539c); 2023's called Q2_K "mostly Q2_K"
# (llama.cpp#L1784 at f5ef5cfb1); "Q4_1, some F16" (2023-2024) is a mix kvmem does not lay out
WEIGHT_FORMATS = {**{name: fmt for fmt, name in FILE_TYPE_NAMES.items() if fmt in FORMATS}, "Q2_K": "q2_k"}
# a type guessed from the tensors (general.file_type absent): "(guessed) " before the name at the pinned build
# (#L29, #L74), " (guessed)" after it before (src/llama-model-loader.cpp#L26 at 053b1539c); 2023's names began
# "mostly " ("mostly Q4_K - Medium", llama.cpp#L1789 at f5ef5cfb1)
_GUESSED = ("(guessed) ", " (guessed)", "mostly ")
# early 2025: "llama_kv_cache_init: kv_size = 4096, offload = 1, type_k = 'q4_0', type_v = 'f16', n_layer = 61";
# builds 5262-5440: "llama_kv_cache_unified: kv_size = 16384, type_k = 'f16', type_v = 'f16', n_layer = 61,
# can_shift = 0, padding = 256" (src/llama-kv-cache.cpp#L38 at 3bf785f3e)
# (b5192's llama_kv_cache_unified::init prints it as "init: kv_size = ...", src/llama-kv-cache.cpp#L32 at 77d5e9a76)
CACHE_INIT = ("init: kv_size = ", "llama_kv_cache_unified: kv_size = ")
LOADING_MODEL = "load_model: loading model '"
MODEL_FILE = " tensors from "                     # "llama_model_loader: loaded meta data with ... tensors from PATH"
GENERAL_NAME = ("print_info: general.name", "llm_load_print_meta: general.name")   # "... = Deepseek-V3-0324"
# the architecture the log prints (print_info / llm_load_print_meta: "n_layer = 61", "n_embd = 7168",
# "n_expert = 256"; a per-layer array "[...]" is not read): kvmem.logcheck checks the preset a GGUF name is read as
ARCH_PREFIXES = ("print_info: ", "llm_load_print_meta: ")
ARCH_FACTS = ("n_layer", "n_embd", "n_expert")
# mtmd's compute buffer lines (llama.cpp@0c1e57098 tools/mtmd/clip.cpp#L3815 reserve_compute_meta; alloc_compute_meta
# in earlier builds)
CLIP_COMPUTE = ("reserve_compute_meta:", "alloc_compute_meta:")


def _buffer(line: str, n: int):
    """(kind, device, MiB text, MiB) of a buffer line, or None."""
    for marker, kind in BUFFERS:
        at = line.find(marker)
        if at < 0 or (kind == "model" and marker == " buffer size = " and "load_tensors:" not in line):
            continue
        before = line[max(0, at - 60):at].split()
        mib = after(line[at:at + len(marker) + 40], marker, " MiB", 30)
        if not before or mib is None or not mib.replace(".", "", 1).isdigit():
            return None
        return kind, before[-1], mib, logged_number(mib, n, line, float)
    return None


def read(lines: list[str]) -> dict:
    found: dict       # lists, dicts, tuples and None by key: one plain dict, as the callers read it
    seen: set[str]
    found, seen = {"sizes": [], "context": {}, "at": {}, "buffers": [], "free": {}, "offloaded": None,
                   "kv_self": [], "arch": {}}, set()
    clip: list[int] = []        # the lines of the projector's buffers (mtmd): not the text model's
    for n, line in enumerate(lines, 1):
        if "checkpoint" not in found and "context checkpoint" in line and (m := CHECKPOINT.search(line)):
            found["checkpoint"] = (n, strip_prefix(line, "created context"), logged_number(m.group(2), n, line),
                                   logged_number(m.group(3), n, line, float), m.group(3))
        if m := SIZE.search(line):
            text = strip_prefix(line, m.group(1))
            if text not in seen:
                seen.add(text)
                for group in (2, 3, 4, 5):                # cells, layers, seqs, streams: numbers a server prints
                    if m.group(group) is not None:
                        logged_number(m.group(group), n, line)
                found["sizes"].append((n, text, m))
        if "KV self size" in line and (m := KV_SELF.search(line)) and not found["kv_self"]:
            found["kv_self"].append((n, strip_prefix(line, m.group(1)), m))
        context, at = found["context"], found["at"]
        for name, pattern in CONTEXT.items():
            if name not in context and (m := pattern.search(line)):
                context[name], at[name] = logged_number(m.group(1), n, line), n
        if "kv_unified" not in context and (m := UNIFIED.search(line)):
            context["kv_unified"], at["kv_unified"] = m.group(1) in ("true", "1"), n
        if "flash_attn" not in context and (m := FLASH.search(line)) and m.group(1) != "auto":
            # "auto" is resolved later (and said: "Flash Attention was auto, set to enabled"): left to the build
            context["flash_attn"], at["flash_attn"] = m.group(1) in ("enabled", "1", "true", "on"), n
        if "kv_size = " in line and (start := max(line.find(marker) for marker in CACHE_INIT)) >= 0:
            cells = field(line, "kv_size", start)
            if "n_ctx" not in context and cells is not None and cells.isdigit():
                context["n_ctx"], at["n_ctx"] = logged_number(cells, n, line), n
            if (layers := field(line, "n_layer", start)) is not None and layers.isdigit():
                found["arch"].setdefault("n_layer", (logged_number(layers, n, line), n))
            for name in ("type_k", "type_v"):
                raw = field(line, name, start)
                if name not in context and raw is not None and isinstance(value := value_of(raw, n, line), str):
                    context[name], at[name] = value, n
        if "buffer size = " in line and any(prefix in line for prefix in CLIP_COMPUTE):
            clip.append(n)
        elif "buffer size = " in line and (buffer := _buffer(line, n)) is not None:
            found["buffers"].append((n, strip_prefix(line, buffer[1]), *buffer))
        if found["offloaded"] is None and (start := line.find(OFFLOADED)) >= 0 and " layers to GPU" in line:
            parts = line[start + len(OFFLOADED):start + len(OFFLOADED) + 30].split(" ", 1)[0].split("/")
            if len(parts) == 2 and all(p.isdigit() for p in parts):
                found["offloaded"] = (n, logged_number(parts[0], n, line), logged_number(parts[1], n, line))
        if (start := line.find(FREE)) >= 0 and " MiB free" in line:
            device = line[start + len(FREE):start + len(FREE) + 60].split(" ", 1)[0]
            free = line[:line.find(" MiB free")].rsplit("- ", 1)[-1].strip()
            if device and free.isdigit() and device not in found["free"]:
                found["free"][device] = logged_number(free, n, line)
        for marker in FILE_TYPE:
            if "file_type" not in found and (start := line.find(marker)) >= 0:
                name = line[start + len(marker):start + len(marker) + 60].strip()
                for extra in _GUESSED:
                    name = name.replace(extra, "")
                found["file_type"] = (n, name)
                if name in WEIGHT_FORMATS:
                    context["weight_format"], at["weight_format"] = WEIGHT_FORMATS[name], n
        if line.startswith(ARCH_PREFIXES) and " = " in line:
            key, _, raw = line.split(": ", 1)[1].partition(" = ")
            if key.strip() in ARCH_FACTS and raw.strip().isdigit():
                found["arch"].setdefault(key.strip(), (logged_number(raw.strip(), n, line), n))
            elif key.strip() == "general.name" and raw.strip():
                found.setdefault("general_name", (raw.strip()[:200], n))
        if "model" not in context and (start := line.find(MODEL_FILE)) >= 0 and "loaded meta data" in line:
            path = line[start + len(MODEL_FILE):start + len(MODEL_FILE) + 400].split(" (version")[0].strip()
            if path:
                context["model"], at["model"] = path, n
        # llama-server's "srv    load_model: loading model '/models/x-UD-Q4_K_XL.gguf'" (llama.cpp@3f545becc
        # tools/server/server-context.cpp#L992): the file the loader's line names next, read where that is not pasted
        if "model" not in context and (start := line.find(LOADING_MODEL)) >= 0 and line.rstrip().endswith("'"):
            if path := line[start + len(LOADING_MODEL):].rstrip()[:-1][:400].strip():
                context["model"], at["model"] = path, n
    found["clip"] = clip
    found["unread_command"] = next(((n, run.strip(), why) for n, line in enumerate(lines[:200], 1)
                                    for run, why in UNREAD_RUNS.items() if run in line and " -" in line), None)
    if "general_name" in found:     # the GGUF's own name: kvmem.logcheck reads it where no path names a preset
        found["context"]["model_name"], found["at"]["model_name"] = found["general_name"]
    if found["offloaded"] is not None:      # "offloaded N/M layers": M - 1 layers in the file (NextN/MTP counted)
        found["arch"].setdefault("n_layer", (found["offloaded"][2] - 1, found["offloaded"][0]))
    found["build_notes"] = []
    if (built := build_line(lines)) is not None:      # "build: 5331 (33eff402) with ...": kvmem.engines.llamacpp.builds
        n, number, commit, line = built
        logged_number(str(number), n, line)
        if (why := uncounted(number, commit)) is not None:      # a shallow clone's "build: 1 (b548c7c)"
            found["build_notes"] = [f"line {n}: {why}: the build is dated by the log's line formats, else kvmem's "
                                    "newest rules (-o build=YYYY-MM-DD pins it)"]
        else:
            date, found["build_notes"] = build_date(number, commit)
            found["context"]["build"], found["at"]["build"] = date or "current", n
    return found


def printed(lines: list[str]) -> dict:
    """The settings the log states: kvmem name -> (value, line number). From the llama_context lines where
    it prints them, else from the first KV size line (its cells, sequences and types)."""
    found = read(lines)
    arch = {"architecture": ({k: v for k, (v, _) in found["arch"].items()}, min(n for _, n in found["arch"].values()))
            } if found["arch"] else {}      # kvmem.logcheck._model checks the preset a name is read as against it
    if not found["sizes"] and not found["kv_self"]:
        return {**arch, **{name: (value, found["at"][name]) for name, value in found["context"].items()}}
    first = (found["sizes"] or found["kv_self"])[0][0]
    return {**arch, **{name: (value, found["at"].get(name, first)) for name, value in _settings(found).items()}}


# A build of the era whose line format the log shows (kvmem.engines.llamacpp.log_lines): the format dates the build
_ERA = (("llama_kv_cache_unified", False, "2025-06-01"),   # "N seqs": May - mid-July 2025
        ("llama_kv_cache_unified", True, "2025-08-01"))    # "s/t seqs": mid-July - Aug 21, 2025 (PR 15467)


def _settings(found: dict) -> dict:
    ctx = dict(found["context"])
    if not found["sizes"]:                    # the KV self line: its types, and its prefix dates the build
        if found["kv_self"]:
            m = found["kv_self"][0][2]
            ctx.update(type_k=m.group(2), type_v=m.group(3))
            ctx.setdefault("build", _KV_SELF_BUILD[m.group(1)])     # the build line's date, where printed, wins
        return ctx
    name, first_line = found["sizes"][0][2].group(1), found["sizes"][0][2]
    for era_name, streams_shown, build in _ERA:
        if name == era_name and (first_line.group(5) is not None) == streams_shown:
            # the build line's date, where printed, wins; no seqs: builds 5429-5440 (2025-05-20/21)
            ctx.setdefault("build", build if first_line.group(4) is not None else "2025-05-20")
    first = next((m for _, _, m in found["sizes"] if m.group(1) != "llama_memory_recurrent"), None)
    if first is not None:
        cells, streams = int(first.group(2)), int(first.group(5) or 1)
        seqs = int(first.group(4) or ctx.get("n_seq", 1))         # no seqs printed: llama_context's n_seq_max
        ctx.setdefault("kv_unified", streams == 1 and seqs > 1)
        ctx.setdefault("n_seq", seqs)
        ctx.setdefault("n_ctx", cells * streams)
        types = TYPES.search(found["sizes"][0][1])
        if types:
            ctx.setdefault("type_k", types.group(1))
            ctx.setdefault("type_v", types.group(2))
    return ctx


def _format_dated(model, settings: dict) -> list:
    """A build dated by the log's line formats alone (_ERA, _KV_SELF_BUILD: a day inside the era the format was
    printed in, approximate) that predates the log's architecture is taken at the architecture's first day
    (arch_builds.first_build), said; never refused on an approximate date."""
    first = first_build(model)
    if first is None or _D.fromisoformat(settings["build"]) >= first[0]:
        return []
    note = (f"no build line: the log's line formats date its build about {settings['build']} (approximate); it ran "
            f"{model.name}, which builds before {first[0]} cannot load (PR #{first[1]}): taken as {first[0]}")
    settings["build"] = first[0].isoformat()
    return [note]


def _same(a: str, b: str) -> bool:
    """Equal but for the widths of llama.cpp's padded fields."""
    return "".join(a.split()) == "".join(b.split())


def check(model, found: dict, *, kv_dtype, tp: int, pp: int, info: dict | None = None,
          **options) -> tuple[dict, list[LineCheck], list[str]]:
    del tp                                         # llama.cpp splits layers (pp), never tensors
    checks: list[LineCheck] = []
    notes: list[str] = []
    options.pop("max_model_len", None)
    placed = _overrides(options.pop("override_tensor", None), options.pop("cpu_moe", False),
                        options.pop("n_cpu_moe", 0))
    tensor_types = _tensor_type_rules(options.pop("tensor_type", None))
    settings = _settings(found)
    path = str(settings.pop("model", ""))
    settings.pop("model_name", None)
    ud_mix = "UD-" in path.replace("\\", "/").rsplit("/", 1)[-1]     # Unsloth's dynamic mixes: UD-Q2_K_XL, ...
    if options.get("build", settings.get("build")) == settings.get("build"):   # not overridden by -o build=
        notes += found.get("build_notes", [])
    elif isinstance(given := options.get("build"), (str, int)) and str(given).lstrip("b").isdigit():
        # -o build=5331 / b5331: a build number, dated as a log's build line is (kvmem.engines.llamacpp.builds)
        date, said = build_date(int(str(given).lstrip("b")))
        options["build"] = date or "current"
        notes += [f"build {given} given: {note}" for note in said]
    if "build" not in found["context"] and options.get("build", settings.get("build")) == settings.get("build") \
            and "build" in settings:     # dated by the line formats alone (logcheck passes it back as an option)
        notes += _format_dated(model, settings)
        options["build"] = settings["build"]
    if found["kv_self"] and not found["sizes"]:
        _check_kv_self(model, found["kv_self"][0], {**settings, **options}, kv_dtype, pp, checks, notes)
    if found["sizes"]:
        if "n_ctx" in settings:
            _check_sizes(model, found, settings, kv_dtype, pp, options, checks, notes)
        else:
            notes.append("the log states no n_ctx and no KV size line with cells: nothing to compare the recurrent "
                         "line with")
    if found.get("unread_command"):
        n, run, why = found["unread_command"]
        notes.append(f"line {n}: the {run} command is not read: {why}; its -ngl, -ts, -ot, -ctk/-ctv are not taken "
                     "from it, only the log's own lines (give them with -o where the log does not print them)")
    if isinstance(clip := found.get("clip"), list) and clip:
        notes.append(f"line {clip[0]}: the multimodal projector's compute buffers (mtmd) are not checked "
                     "here (kvmem.llamacpp_offload's mmproj counts them) and not mixed into the text model's")
    if found["buffers"]:
        _check_buffers(model, found, {**settings, **options}, info or {}, checks, notes, placed, ud_mix,
                       tensor_types)
    if found.get("checkpoint"):
        _check_checkpoint(model, found["checkpoint"], checks, notes)
    return settings, checks, notes


def _check_checkpoint(model, logged, checks: list, notes: list) -> None:
    """A context checkpoint's MiB against kvmem.engines.llamacpp.checkpoints (a hybrid's recurrent state: exact)."""
    from .checkpoints import checkpoint_bytes, checkpoint_log_size_mib
    n, text, count, mib, shown = logged
    nbytes, what = checkpoint_bytes(model)
    if "recurrent" not in what:
        notes.append(f"a context checkpoint of {shown} MiB ({count} at most a slot) is logged; kvmem checks a "
                     "recurrent hybrid's (a sliding window's depends on the cells the slot holds)")
        return
    ours = checkpoint_log_size_mib(nbytes)
    ok = ours == shown
    checks.append(LineCheck(n, text, "context checkpoint", f"{shown} MiB", f"{ours} MiB ({nbytes:,} B, {what})", ok,
                            "" if ok else "a checkpoint of another size: a draft model's state rides with it "
                            "(-md / MTP), or the recurrent state differs (model, n_rs_seq)"))


def _check_sizes(model, found: dict, settings: dict, kv_dtype, pp: int, options: dict, checks: list,
                 notes: list) -> None:
    """The cache size lines against kvmem's estimate under the log's settings (module docstring)."""
    given = {k: settings[k] for k in ("n_ctx", "n_seq", "n_ubatch", "type_k", "type_v", "kv_unified", "flash_attn",
                                      "build") if k in settings}
    settings.pop("model", None)
    est = engine_estimate(model, engine="llama.cpp", tokens=1, batch=1, kv_dtype=kv_dtype, pp=pp,
                          **{**given, **options})
    ours = [line for line in est.log_lines if SIZE.search(line)]
    for kind in ("kv", "recurrent"):           # pair the log's lines with kvmem's of the same cache, in order
        logged = [(n, t, m) for n, t, m in found["sizes"] if (m.group(1) == "llama_memory_recurrent") == (kind != "kv")]
        mine = [line for line in ours if line.startswith("llama_memory_recurrent") == (kind != "kv")]
        for (n, text, m), expected in _paired(logged, mine):
            if text.endswith(("seqs)", "layers)")):   # a line printed without its K/V part: compare what it has
                expected = expected[:expected.index("s)") + len("s)")]
            ok = _same(expected, text)
            cause = "" if ok else (
                "other cells: another -c, -np, --kv-unified or -ub than the log states, or another build's padding"
                if SIZE.search(expected).group(2) != m.group(2) else  # type: ignore[union-attr]  # ours: SIZE lines
                "other bytes: another cache type (-ctk/-ctv, or --type-k/--type-v given here), or other layers "
                "(the GGUF's architecture, an MLA split cache) than the model given")
            checks.append(LineCheck(n, text, m.group(1), text, expected, ok, cause))
        if len(logged) != len(mine) and logged:
            notes.append(f"the log has {len(logged)} {kind} cache size line(s), kvmem {len(mine)} for these settings")


def _paired(logged: list, mine: list) -> list:
    """Each logged size line with kvmem's line of the same cache: the first unused one with as many layers (a DSA
    model's main cache, 78 layers, and its indexer cache, 21 layers, each printed after its own "creating ... KV
    cache" line: an excerpt may hold only one), else the next unused one in order."""
    left, pairs = list(mine), []
    for row in logged:
        if not left:
            break
        layers = row[2].group(3)
        expected = next((line for line in left if SIZE.search(line).group(3) == layers),  # type: ignore[union-attr]
                        left[0])  # mine: lines SIZE matched
        left.remove(expected)
        pairs.append((row, expected))
    return pairs


def _split(value) -> list | None:
    """-ts as given: a list of numbers, or its text "10,6" (a command line's)."""
    if value is None or isinstance(value, (list, tuple)):
        return None if value is None else list(value)
    parts = str(value).split(",")
    if not all(p.strip().replace(".", "", 1).isdigit() for p in parts):
        raise ValueError(f"tensor_split must be numbers separated by commas (llama.cpp's -ts), got {value!r}")
    return [float(p) for p in parts]


def _check_kv_self(model, row, settings: dict, kv_dtype, pp: int, checks: list, notes: list) -> None:
    """The KV self line against kvmem's estimate under the log's settings, rendered in that line's format."""
    n, text, m = row
    if "n_ctx" not in settings:
        notes.append(f"line {n}: the KV self size line is not checked: the log states no n_ctx")
        return
    given = {k: settings[k] for k in ("n_ctx", "n_seq", "n_ubatch", "type_k", "type_v", "flash_attn", "build")
             if k in settings}
    est = engine_estimate(model, engine="llama.cpp", tokens=1, batch=1, kv_dtype=kv_dtype, pp=pp, **given)
    (expected,) = log_lines(est, style="kv_self", prefix=m.group(1))
    expected = strip_prefix(expected, m.group(1))
    ok = _same(expected, text)
    checks.append(LineCheck(n, text, "KV self size", text, expected, ok, "" if ok else (
        "other bytes: another -c, cache type (-ctk/-ctv) or other layers than the log states")))


def _check_buffers(model, found: dict, settings: dict, info: dict, checks: list, notes: list,
                   placed: dict | None = None, ud_mix: bool = False, tensor_types=()) -> None:
    """Model, KV (+ recurrent state) and compute buffers per device against kvmem.engines.llamacpp.offload.layout,
    the call kvmem's offload plan makes, under the placement the log states (module docstring) and the tensor
    overrides ``placed`` (_overrides: -ot, --cpu-moe, --n-cpu-moe); ``tensor_types``: the --tensor-type rules the
    file was quantised with (-o tensor_type=...), over the file type's own mix."""
    buffers = found["buffers"]
    gpus = [d for d in found["free"] if any(b[3] == d for b in buffers)] or \
        sorted({b[3] for b in buffers if b[3] not in HOSTS})
    fmt = info.get("weight_format")
    kinds = {b[2] for b in buffers}
    offloaded = found["offloaded"]
    # Without the file's format the compute buffers are still checked where no weight's type enters them: every
    # weight on the backend that runs its ops, so the scheduler copies none (a host weight's matmul at >= 32 tokens
    # is offloaded with a copy of the weight sized by its type: ggml_backend_sched, llama.cpp@3f545becc
    # ggml/src/ggml-cuda/ggml-cuda.cu#L5321-L5340 offload_op; never token_embd's GET_ROWS, batch size 0, whose result
    # is f32 whatever the type), and the graph's own tensors are activations (a MUL_MAT's result f32; the CPU backend
    # converts a quantised matmul's input in its work buffer, not the graph's). So: no GPU (the CPU backend alone),
    # or every layer on the GPUs ("offloaded N/N layers"), no tensor override stated, and host model buffers no
    # larger than token_embd could be (n_vocab x n_embd x 4 B: the host holds nothing else; -ot / --n-cpu-moe given
    # where the log does not show it, an environment's LLAMA_ARG_*, would put layer weights there). kvmem's graphs
    # agree: a preset's compute bytes are the same for q4_0, q8_0 and f16 there (test_llamacpp_log_reads_2026_12_07),
    # and so does llama.cpp's CPU build: one model as F16, Q4_0, Q8_0 and Q4_0 with an F16 token_embd prints one
    # compute buffer, which check-log checks untyped (tests/oracles/test_llamacpp_untyped_compute_oracle.py)
    host_model = [b[5] for b in buffers if b[2] == "model" and b[3] in HOSTS and b[3] not in EXTRA_HOSTS]
    compute_untyped = fmt is None and "compute" in kinds and not placed and (not gpus or (
        offloaded is not None and offloaded[1] >= offloaded[2] and bool(host_model)
        and sum(host_model) <= (model.facts.vocab_size or 0) * model.hidden_size * 4 / 2**20))
    if kinds & {"model", "compute"} and fmt is None:
        # the weights' types size the model buffers and the compute graph's weight ops (dequantised copies,
        # matmul inputs): without the file's format neither is checked (compute: but where no type enters it,
        # compute_untyped), and said
        what = " and ".join(k for k in ("model", "compute") if k in kinds and not (k == "compute" and compute_untyped))
        if (typed := found.get("file_type")) is None:
            why = "the log prints no file type (print_info: file type = ...)"
        else:
            why = (f"line {typed[0]}: file type {typed[1]!r} is not a format kvmem lays out (its tensors' types "
                   "are not known: the vendored build's src/llama-quant.cpp has no default type for NVFP4)"
                   if typed[1] == "NVFP4" else f"line {typed[0]}: file type {typed[1]!r} is not one of llama.cpp's "
                   "file types kvmem lays out (src/llama-model-loader.cpp llama_ftype_name)")
        notes.append(f"{what} buffers are not checked: {why}; kvmem lays out {', '.join(FORMATS)}: give "
                     "weight_format")
    if len(gpus) > 1 and info.get("tensor_split") is None and len(found["free"]) < len(gpus):
        notes.append("buffers are not checked: several devices and no split (llama.cpp splits by each device's free "
                     "memory, 'using device ... MiB free', which the log does not print): give tensor_split")
        return
    if "n_ctx" not in settings and kinds & {"KV", "compute"}:
        notes.append("KV and compute buffers are not checked: the log states no n_ctx")
        kinds -= {"KV", "compute"}
    host_kv = any(b[2] == "KV" and b[3] in HOSTS for b in buffers)
    gpu_kv = any(b[2] == "KV" and b[3] not in HOSTS for b in buffers)
    if offloaded is None and host_kv and gpu_kv and "n_gpu_layers" not in info:
        notes.append("buffers are not checked: KV on the host and on the GPUs (some layers on the host) but no "
                     "'offloaded N/M layers to GPU' line to say how many")
        return
    n_gpu_layers = offloaded[1] if offloaded else info.get("n_gpu_layers", MAX_LAYERS if gpus else 0)
    hosts = {b[3] for b in buffers if b[3] in HOSTS}
    split = _split(info.get("tensor_split")) or ([found["free"][g] for g in gpus] if len(gpus) > 1 else None)
    # "CPU compute buffer" beside a GPU's pinned host one ("CUDA_Host"): an ACCEL backend of the plain CPU buffer type,
    # a GGML_BLAS build (llama_context puts ACCEL backends before the CPU, whose buffer is the pinned one with a GPU:
    # llama.cpp@1d36b3670 src/llama-context.cpp#L131-L207; ggml-blas.cpp#L374-L378): ggml_sched.sched_sizes' blas
    computes = {b[3] for b in buffers if b[2] == "compute"}
    blas = bool(gpus) and "CPU" in computes and any(d in HOSTS and d != "CPU" for d in computes)
    untyped = False         # the weights are not laid out: KV buffers are still checked (their split needs no types)
    try:
        # compute_untyped: any format gives these compute bytes; f16's layout is used, its model bytes never checked
        tensors = synthesised_tensors(model, fmt or "f16", build=settings.get("build"), tensor_types=tensor_types) \
            if fmt is not None or compute_untyped else ()
    except ValueError as exc:       # an architecture kvmem does not lay out from a config (llama4's chunked layers)
        notes.append(f"model and compute buffers are not checked: {exc}")
        tensors, untyped = (), True
    try:
        lay = layout(model, tensors, **(args := dict(gpus=tuple(gpus), n_gpu_layers=n_gpu_layers, tensor_split=split,
                     n_ctx=settings.get("n_ctx", 256), n_ubatch=settings.get("n_ubatch", 512),
                     type_k=settings.get("type_k", "f16"), type_v=settings.get("type_v", "f16"),
                     flash_attn=settings.get("flash_attn"), mmap=info.get("mmap", "CUDA_Host" not in hosts or
                                                                           "CPU_Mapped" in hosts),
                     # -nkvo: the command's, else every KV buffer on the host though a GPU holds layers (-ngl 0: the
                     # host's layers hold it; -nkvo there pins the attention to the host: layouts._scheduled)
                     kv_offload=info.get("kv_offload", not (host_kv and not gpu_kv and gpus and n_gpu_layers)),
                     n_seq=settings.get("n_seq", 1), build=settings.get("build"), blas=blas,
                     # -kvu (the command's, or the log's "kv_unified = true"): one KV stream for every sequence, so
                     # the graph's KQ mask spans all n_ctx cells in one stream (kvmem.engines.llamacpp.compute:
                     # build_attn_inp_kq_mask n_stream = kv_unified ? 1 : n_seqs)
                     kv_unified=bool(settings.get("kv_unified", False)), **(placed or {}))))
    except ValueError as exc:
        notes.append(f"buffers are not checked: {exc}")
        return
    if untyped:
        kinds -= {"model", "compute"}
    elif fmt is None:
        kinds -= {"model"} if compute_untyped else {"model", "compute"}
        if compute_untyped:
            notes.append("compute buffers are checked without the file type: every weight is on the device that "
                         "runs its ops (" + ("no GPU" if not gpus else "every layer offloaded, no tensor override, "
                                                 "the host's model buffer no larger than token_embd")
                         + "), so no weight's type enters them")
    elif ud_mix and "model" in kinds:
        # Unsloth chooses each tensor's type per model and publishes no rule (kvmem.engines.llamacpp.file_types
        # UD_MIXES): kvmem's layout of the printed file type is an approximation of the file's bytes
        notes.append(f"model buffers are not checked: an Unsloth UD-* file, whose tensor types are Unsloth's own; "
                     f"kvmem lays out llama-quantize's {fmt} mix (UD_PUBLISHED: published UD files weigh more)")
        kinds -= {"model"}
    if offloaded is not None and offloaded[2] != lay.placement.layers_total:
        # "offloaded N/M layers to GPU": M = n_layer_all + 1, the file's NextN/MTP blocks counted
        # (llama.cpp@0c1e57098 src/llama-model.cpp#L1911-L1925); they take a share of the split
        p = lay.placement
        notes.append(f"line {offloaded[0]}: 'offloaded {offloaded[1]}/{offloaded[2]} layers to GPU' counts "
                     f"{offloaded[2] - 1} layers in the file, kvmem {p.n_layer_all} ({p.n_layer} and {p.n_nextn} "
                     "NextN/MTP): another number of MTP blocks (a --no-mtp file?) moves the -ts split")
    logged: dict = {}
    for n, text, kind, device, _, mib in buffers:
        if kind == "model" and device in EXTRA_HOSTS and kind in kinds:
            notes.append(f"line {n}: the {device} model buffer ({mib:.2f} MiB) is not checked: a CPU extra buffer "
                         "type, a repacked copy of the host weights it takes beside the mapped file; kvmem lays out "
                         "the host weights without it (the mapped range is checked)")
            continue
        if kind in kinds:
            logged.setdefault((kind, "CPU" if device in HOSTS else device), []).append((n, text, mib, device))
    host_compute = logged.get(("compute", "CPU"), [])
    blas_rows = [row for row in host_compute if row[3] == "CPU"] if blas and lay.compute_exact.get(CPU) else []
    if blas_rows:       # the BLAS buffer checked on its own (Layout.blas_compute_bytes), the pinned one below
        logged[("compute", "CPU")] = [row for row in host_compute if row[3] != "CPU"]
    elif len({row[3] for row in host_compute}) > 1 and gpus:
        # "CPU compute buffer" beside "CUDA_Host compute buffer": the CPU backend's own buffer (the ops it runs: of
        # host layers, of weights -ot left on the host) and the GPU backend's pinned host buffer (graph inputs and
        # their copies). kvmem's layout has one host figure (kvmem.engines.llamacpp.layouts.layout): the pinned
        # buffer's where a GPU holds layers or the scheduled run is computed, else the CPU backend's graph. That line
        # is checked against it; the other is said, never summed into it
        pinned = lay.placement.offloaded_layers > 0 or bool(lay.compute_exact.get(CPU))
        kept = [row for row in host_compute if (row[3] != "CPU") == pinned]
        for row in host_compute:
            if row not in kept:
                notes.append(f"line {row[0]}: the {row[3]} compute buffer ({row[2]:.2f} MiB) is not checked: kvmem's "
                             "layout (kvmem.engines.llamacpp.layouts) has one host compute figure, "
                             + ("the pinned host buffer's: the CPU backend's own beside GPUs is not modelled" if pinned
                                else "the CPU backend's: the pinned host buffer beside it is not modelled"))
        logged[("compute", "CPU")] = kept
    # a hybrid's recurrent state is its own "RS buffer" line (llama.cpp@0c1e57098 src/llama-memory-recurrent.cpp#L124,
    # beside the KV cache's, src/llama-kv-cache.cpp#L291): a log without those lines (an excerpt) is checked
    # against the KV cache alone, and said
    no_rs = lay.state_bytes and "KV" in kinds and not any(" RS buffer size = " in b[1] for b in buffers)
    if no_rs:
        notes.append("the log has no 'RS buffer size' lines (an excerpt?): its KV buffer lines are checked against "
                     "the KV cache alone, without the recurrent state llama.cpp prints on those lines")
    # a backend that decides its own op support (_OWN_OP_SUPPORT), by its devices' name
    own_ops = next((b for _, d in logged for b in _OWN_OP_SUPPORT if d.startswith(b)), "")
    imatrix: list = []      # the file laid out as quantised with an importance matrix, at a model buffer off without
    for (kind, device), rows in logged.items():
        try:
            held = lay.placement.device(device)
        except KeyError:
            notes.append(f"line {rows[0][0]}: {device} holds nothing in kvmem's placement for these settings")
            continue
        ours = {"model": held.model_bytes, "KV": held.kv_bytes - (lay.state_bytes.get(device, 0) if no_rs else 0),
                "compute": lay.printed_compute_bytes(device) - (lay.blas_compute_bytes if device == CPU else 0)}[kind]
        total = sum(row[2] for row in rows)
        ok = abs(total - buffer_mib(ours)) <= 0.005 * len(rows) + 1e-9    # each line rounded to 0.01 MiB
        n, text, _, printed_as = rows[0]
        shown = f"{total:.2f} MiB" + (f" in {len(rows)} lines" if len(rows) > 1 else "")
        if kind == "model" and not ok and fmt is not None and tensors:
            # llama-quantize --imatrix changes a few tensors' types (quant_mix: has_imatrix, e.g. IQ4_XS's first
            # n_layer / 8 ffn_down IQ4_XS, not Q5_K: llama.cpp@0c1e57098 src/llama-quant.cpp#L654), and the log need not
            # say that the file had one (its quantize.imatrix.* keys): the buffer is checked against that layout too
            imatrix = imatrix or [layout(model, synthesised_tensors(model, fmt, imatrix=True, build=settings.get(
                "build"), tensor_types=tensor_types), **args)]
            other = imatrix[0].placement.device(device).model_bytes
            if abs(total - buffer_mib(other)) <= 0.005 * len(rows) + 1e-9:
                notes.append(f"line {n}: {printed_as} model buffer: {shown} is kvmem's layout of the file quantised "
                             f"with an importance matrix (llama-quantize --imatrix); without one "
                             f"{buffer_mib(ours):.2f} MiB")
                ours, ok = other, True
        if kind in ("model", "compute") and not ok and own_ops and (device == CPU or device.startswith(own_ops)):
            notes.append(f"line {n}: {printed_as} {kind} buffer logged {shown}, kvmem {buffer_mib(ours):.2f} MiB: not "
                         "checked, as kvmem places weights and splits the graph by the CUDA and CPU backends' "
                         f"supports_op / offload_op, and the {own_ops} backend decides its own (CANN refuses "
                         "MUL_MAT_ID on MXFP4, so the experts stay on the host: ggml-cann.cpp#L2457-L2471 at "
                         "3f545becc)")
            continue
        if kind == "compute" and not ok and not lay.compute_exact.get(device):
            # -nkvo beside GPUs is scheduled (layouts._scheduled) for attention caches, not where the host would hold
            # a recurrent state or the lightning indexer's cache too
            nkvo = "; -nkvo beside GPUs is scheduled for attention caches only, not beside a recurrent state or " \
                "the lightning indexer's cache" if not args["kv_offload"] and gpus else ""
            notes.append(f"line {n}: {printed_as} compute buffer logged {shown}, kvmem estimates "
                         f"{buffer_mib(ours):.2f} MiB (an estimate for this layout, kvmem.engines.llamacpp.layouts: "
                         f"not checked{nkvo})")
            continue
        cause = "" if ok else {
            "model": "other weights on this device: another file type or -ngl / -ts / -ot than the log states, or "
                     "another build's layer split",
            "KV": "other KV on this device: another -c, -np, cache type or layer split than the log states",
            "compute": "another -ub, -c, flash attention or build than the log states"}[kind]
        checks.append(LineCheck(n, text, f"{printed_as} {kind} buffer", shown, f"{buffer_mib(ours):.2f} MiB", ok,
                                cause))
    for n, text, mib, _ in blas_rows:
        blas_mib = buffer_mib(lay.blas_compute_bytes)
        ok = abs(mib - blas_mib) <= 0.005 + 1e-9
        checks.append(LineCheck(n, text, "CPU (BLAS) compute buffer", f"{mib:.2f} MiB", f"{blas_mib:.2f} MiB", ok,
                                "" if ok else "another -ub, -c, flash attention or build than the log states"))


def claims(found: dict) -> bool:
    return bool(found["sizes"] or found["buffers"])


# backends (by their devices' names) whose supports_op / offload_op kvmem does not transcribe: where a model or
# compute line differs, it is said, not counted as a mismatch (CANN takes no MUL_MAT_ID over MXFP4 weights:
# llama.cpp@3f545becc ggml/src/ggml-cann/ggml-cann.cpp#L2457-L2471; OpenCL, OpenVINO and Hexagon (HTP) have op
# tables of their own too)
_OWN_OP_SUPPORT = ("CANN", "GPUOpenCL", "OPENVINO", "HTP")


# Tensor overrides as llama.cpp parses them: each -ot, --cpu-moe, --n-cpu-moe, --n-cpu-ffn appends (pattern,
# buffer type) rules to one list in the command's order (llama.cpp@0c1e57098 common/arg.cpp#L2753-L2786), and
# create_tensor takes the first that matches (kvmem.engines.llamacpp.overrides)


def _ot_rules(value) -> list:
    """-ot PATTERN=BUFT,...: split at every comma, each at its first '=' (llama.cpp@0c1e57098
    common/arg.cpp#L252-L284 parse_tensor_buffer_overrides; no '=' is its "invalid value"). A list of pairs (the
    Python API) as given."""
    rules = []
    for item in value if isinstance(value, (list, tuple)) else str(value).split(","):
        if isinstance(item, str):
            pattern, eq, buft = item.partition("=")
        else:                                 # a pair (pattern, buffer type)
            pair = isinstance(item, (list, tuple)) and len(item) == 2
            pattern, eq, buft = (str(item[0]), "=", str(item[1])) if pair else ("", "", "")
        if not eq:
            raise ValueError(f"override_tensor {item!r} is not PATTERN=BUFFER_TYPE (llama.cpp: 'invalid value')")
        check_pattern(pattern)                # a pattern whose backtracking can blow up: refused, naming it
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"override_tensor pattern {pattern!r} is not a regular expression ({exc})") from None
        rules.append((pattern, buft))
    return rules


# the ggml types llama-quantize can write a tensor in: ggml_quantize_chunk's cases (llama.cpp@0c1e57098
# ggml/src/ggml.c#L8092-L8134); Q8_1, Q8_K, I8-I64 and F64 reach its "default: assert(false)" (#L8135-L8136)
QUANTIZE_WRITES = frozenset({"Q1_0", "Q2_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "MXFP4", "NVFP4", "Q2_K", "Q3_K",
                             "Q4_K", "Q5_K", "Q6_K", "TQ1_0", "TQ2_0", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ3_S",
                             "IQ2_S", "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS", "F16", "BF16", "F32"})

# kvmem's own bound on -o tensor_type's rules, not llama-quantize's (it has none): each rule is searched in every
# tensor name (quant_mix.quant_types), 20,000 rules on llama-3.1-8b's 292 tensors take 4 s
MAX_TENSOR_TYPE_RULES = 4096


def _tensor_type_rules(value) -> tuple:
    """-o tensor_type=PATTERN=TYPE,...: llama-quantize's --tensor-type rules the file was made with, in order (each
    split at its first '=', its pattern lower-cased and searched in the tensor names: llama.cpp@0c1e57098
    tools/quantize/quantize.cpp#L317-L347 parse_tensor_type; the first that matches types a quantised tensor,
    src/llama-quant.cpp, quant_mix.quant_types). A published file that is not llama-quantize's plain mix (its header
    lists each tensor's type) is laid out with them. Split at every comma, as -ot is; a list of pairs as given."""
    if value is None:
        return ()
    count = len(value) if isinstance(value, (list, tuple)) else str(value).count(",") + 1
    if count > MAX_TENSOR_TYPE_RULES:
        raise ValueError(f"tensor_type gives {count:,} rules; kvmem takes at most {MAX_TENSOR_TYPE_RULES:,} (each is "
                         "searched in every tensor name; llama-quantize sets no limit): join them into fewer patterns")
    rules = []
    for item in value if isinstance(value, (list, tuple)) else str(value).split(","):
        pair = isinstance(item, (list, tuple)) and len(item) == 2
        pattern, eq, ggml = (str(item[0]), "=", str(item[1])) if pair else str(item).partition("=")
        if not eq or not pattern or not ggml:
            raise ValueError(f"tensor_type {str(item)[:100]!r} is not PATTERN=TYPE (llama-quantize: 'malformed "
                             "tensor type')")
        check_pattern(pattern.lower(), "tensor_type")
        try:
            re.compile(pattern.lower())
        except re.error as exc:
            raise ValueError(f"tensor_type pattern {pattern[:100]!r} is not a regular expression ({exc})") from None
        name = ggml.strip().upper()
        if name not in GGML_TYPES:     # parse_ggml_type: a ggml type's name, any case
            raise ValueError(f"tensor_type {str(item)[:100]!r} names {ggml.strip()[:40]!r}, not a ggml type "
                             f"(llama-quantize writes {', '.join(sorted(QUANTIZE_WRITES))})")
        if name not in QUANTIZE_WRITES:
            raise ValueError(f"tensor_type {str(item)[:100]!r}: llama-quantize cannot write {name} "
                             "(ggml_quantize_chunk has no case for it and stops at its 'default: assert(false)', "
                             "llama.cpp@0c1e57098 ggml/src/ggml.c#L8092-L8136), so no file holds it; it writes "
                             f"{', '.join(sorted(QUANTIZE_WRITES))}")
        rules.append((pattern.lower(), ggml.strip().lower()))
    return tuple(rules)


def _first_layers(n, ffn_regex: str) -> list:
    """--n-cpu-moe / --n-cpu-ffn N: blk\\.i + the FFN pattern to CPU for i < N (llama.cpp@0c1e57098
    common/common.h#L1198-L1217 llm_add_n_cpu_ffn_overrides), as one alternation: it matches the names one of them
    matches."""
    if not str(n).isdigit():
        raise ValueError(f"takes a whole number of layers, got {n!r} (llama.cpp: 'invalid value')")
    count = min(int(n), MAX_LAYERS)           # rules past the last layer match no tensor
    return [(rf"blk\.(?:{'|'.join(map(str, range(count)))}){ffn_regex}", CPU)] if count else []


_DENSE_FFN_REGEX = r"\.ffn_(up|down|gate)\."  # llama.cpp@0c1e57098 common/common.h#L1200 (--n-cpu-ffn)
_OVERRIDES = {"-ot": Appends("override_tensor", _ot_rules), "--override-tensor": Appends("override_tensor", _ot_rules),
              "-cmoe": Appends("override_tensor", lambda _: [(EXPS_REGEX, CPU)], takes_value=False),
              "--cpu-moe": Appends("override_tensor", lambda _: [(EXPS_REGEX, CPU)], takes_value=False),
              "-ncmoe": Appends("override_tensor", lambda n: _first_layers(n, EXPS_REGEX)),
              "--n-cpu-moe": Appends("override_tensor", lambda n: _first_layers(n, EXPS_REGEX)),
              "-ncffn": Appends("override_tensor", lambda n: _first_layers(n, _DENSE_FFN_REGEX)),
              "--n-cpu-ffn": Appends("override_tensor", lambda n: _first_layers(n, _DENSE_FFN_REGEX))}


def _overrides(override_tensor, cpu_moe, n_cpu_moe) -> dict:
    """The placement's tensor overrides: the command's (or -o override_tensor's) rules in order, then -o cpu_moe's
    and -o n_cpu_moe's (the order kvmem's own commands write them: overrides.compile_rules)."""
    rules = _ot_rules(override_tensor) if override_tensor is not None else []
    if cpu_moe not in (False, None, 0, "false", "False"):
        if cpu_moe not in (True, 1, "true", "True"):
            raise ValueError(f"cpu_moe must be true or false (llama.cpp's --cpu-moe), got {cpu_moe!r}")
        rules.append((EXPS_REGEX, CPU))
    rules += _first_layers(n_cpu_moe or 0, EXPS_REGEX)
    return {"override_tensor": tuple(rules)} if rules else {}


# The launch command above a log (kvmem.logcheck.command): llama.cpp's arguments (common/arg.cpp). The tools that
# parse them with common_params_parse and give -c / -np / -b their meaning (llama.cpp@3f545becc tools/cli/cli.cpp#L40,
# tools/completion/completion.cpp#L94, tools/mtmd/mtmd-cli.cpp#L386; llama-sweep-bench, a bench of ik_llama.cpp
# ported to mainline branches, likewise); a path before the name ("./build/bin/llama-sweep-bench") is read as it
_TOOLS = ("llama-server", "llama-cli", "llama-completion", "llama-mtmd-cli", "llama-sweep-bench")
RUNS = tuple(f"{tool}{exe} " for tool in _TOOLS for exe in ("", ".exe"))
# Commands whose flags are not llama-server's: not read, and said (the log's own lines give the settings)
UNREAD_RUNS = {
    "llama-bench ": "llama-bench parses its own flags (tools/llama-bench/llama-bench.cpp cmd_params: comma lists, "
                    "-p/-n tests, its own defaults)",
    "llama-perplexity ": "llama-perplexity sets n_ctx = -c x (-b / -c) sequences and its own -c default of 512 "
                         "(tools/perplexity/perplexity.cpp#L2016-L2035)",
    "llama-imatrix ": "llama-imatrix sets n_ctx and n_seq from -c and -b (tools/imatrix/imatrix.cpp#L1084-L1117)",
    "llama-batched-bench ": "llama-batched-bench sizes n_seq_max from -npl (tools/batched-bench/batched-bench.cpp#L58)",
    "llama_cpp.server": "llama-cpp-python's server takes its own flags (--n_ctx, --n_gpu_layers, --type_k as a ggml "
                        "type number)",
}
COMMAND_FLAGS = {"-m": "model", "--model": "model", "-c": "n_ctx", "--ctx-size": "n_ctx", "-np": "n_seq",
                 "--parallel": "n_seq", "-ctk": "type_k", "--cache-type-k": "type_k", "-ctv": "type_v",
                 "--cache-type-v": "type_v", "-ub": "n_ubatch", "--ubatch-size": "n_ubatch", "-b": "n_batch",
                 "--batch-size": "n_batch", "-ngl": "n_gpu_layers", "--n-gpu-layers": "n_gpu_layers",
                 "--gpu-layers": "n_gpu_layers", "-ts": "tensor_split", "--tensor-split": "tensor_split",
                 **_OVERRIDES}
COMMAND_SWITCHES = {"-kvu": ("kv_unified", True), "--kv-unified": ("kv_unified", True), "--no-mmap": ("mmap", False),
                    "-fa": ("flash_attn", True), "--flash-attn": ("flash_attn", True),
                    "-lm": ("mmap", None), "--load-mode": ("mmap", None),
                    # -kvo / -nkvo, a bool pair (llama.cpp@0c1e57098 common/arg.cpp#L2413-L2420)
                    "-nkvo": ("kv_offload", False), "--no-kv-offload": ("kv_offload", False),
                    "-kvo": ("kv_offload", True), "--kv-offload": ("kv_offload", True)}
SWITCH_VALUES = {"flash_attn": {"on": True, "off": False, "auto": None},   # -fa on|off|auto (auto: left to the build)
                 # -lm MODE (llama.cpp@0c1e57098 common/arg.cpp#L2690-L2708): mmap for auto, mmap and mmap+mlock
                 # (src/llama-model-loader.cpp#L559), not for none, mlock or dio
                 "mmap": {"auto": True, "mmap": True, "mmap+mlock": True, "none": False, "mlock": False,
                          "dio": False}}
READER = LogReader(read, claims, printed, check, "llama.cpp's cache size lines", runs=RUNS,
                   check_options=("override_tensor", "cpu_moe", "n_cpu_moe", "tensor_type"),
                   command_flags=COMMAND_FLAGS, command_switches=COMMAND_SWITCHES, switch_values=SWITCH_VALUES)
