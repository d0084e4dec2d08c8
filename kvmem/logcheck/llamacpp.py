"""llama.cpp's cache lines, checked (src/llama-kv-cache.cpp, src/llama-kv-cache-iswa.cpp,
src/llama-memory-recurrent.cpp; kvmem.engines.llamacpp renders the same lines).

The line format dates the build (llama_kv_cache_unified with "N seqs": about May to mid-July
2025; with "s/t seqs": to Aug 21, 2025; llama_kv_cache: later), and kvmem renders that build's
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

from ..engines import engine_estimate
from .base import LineCheck, logged_number, strip_prefix
from .printed import field, value_of

# Each pattern starts with a literal and repeats only a character class the next literal ends: one
# pass over a line however long (TYPES is matched right after the size line's "seqs)", never ".*").
SIZE = re.compile(r"(llama_kv_cache(?:_unified)?|llama_memory_recurrent): size = +[0-9.]+ MiB \( *(\d+) cells, +(\d+) "
                  r"layers, +(\d+)(?:/ *(\d+))? seqs")
TYPES = re.compile(r"seqs\), +K \((\w+)\): +[0-9.]+ MiB, +V \((\w+)\):")
# llama_context (from mid-2025), llama_init_from_model (early 2025), llama_new_context_with_model (2024)
CONTEXT = {"n_ctx": re.compile(r"(?:llama_context|llama_init_from_model|llama_new_context_with_model): n_ctx += (\d+)"),
           "n_seq": re.compile(r"(?:llama_context|llama_init_from_model|llama_new_context_with_model): n_seq_max += "
                               r"(\d+)"),
           "n_ubatch": re.compile(r"(?:llama_context|llama_init_from_model|llama_new_context_with_model): n_ubatch += "
                                  r"(\d+)")}
UNIFIED = re.compile(r"kv_unified += (true|false|1|0)")
FLASH = re.compile(r"(?:llama_context|llama_init_from_model|llama_new_context_with_model): flash_attn += (\w+)")
CACHE_INIT = "llama_kv_cache_init: kv_size = "   # early 2025: "..., type_k = 'q4_0', type_v = 'f16', n_layer = 61"
MODEL_FILE = " tensors from "                     # "llama_model_loader: loaded meta data with ... tensors from PATH"


def read(lines: list[str]) -> dict:
    found, seen = {"sizes": [], "context": {}, "at": {}}, set()
    for n, line in enumerate(lines, 1):
        if m := SIZE.search(line):
            text = strip_prefix(line, m.group(1))
            if text not in seen:
                seen.add(text)
                for group in (2, 3, 4, 5):                # cells, layers, seqs, streams: numbers a server prints
                    if m.group(group) is not None:
                        logged_number(m.group(group), n, line)
                found["sizes"].append((n, text, m))
        context, at = found["context"], found["at"]
        for name, pattern in CONTEXT.items():
            if name not in context and (m := pattern.search(line)):
                context[name], at[name] = logged_number(m.group(1), n, line), n
        if "kv_unified" not in context and (m := UNIFIED.search(line)):
            context["kv_unified"], at["kv_unified"] = m.group(1) in ("true", "1"), n
        if "flash_attn" not in context and (m := FLASH.search(line)) and m.group(1) != "auto":
            # "auto" is resolved later (and said: "Flash Attention was auto, set to enabled"): left to the build
            context["flash_attn"], at["flash_attn"] = m.group(1) in ("enabled", "1", "true", "on"), n
        if (start := line.find(CACHE_INIT)) >= 0:
            for name in ("type_k", "type_v"):
                raw = field(line, name, start)
                if name not in context and raw is not None and isinstance(value := value_of(raw, n, line), str):
                    context[name], at[name] = value, n
        if "model" not in context and (start := line.find(MODEL_FILE)) >= 0 and "loaded meta data" in line:
            path = line[start + len(MODEL_FILE):start + len(MODEL_FILE) + 400].split(" (version")[0].strip()
            if path:
                context["model"], at["model"] = path, n
    return found


def printed(lines: list[str]) -> dict:
    """The settings the log states: kvmem name -> (value, line number). From the llama_context lines where
    it prints them, else from the first KV size line (its cells, sequences and types)."""
    found = read(lines)
    if not found["sizes"]:
        return {name: (value, found["at"][name]) for name, value in found["context"].items()}
    first = found["sizes"][0][0]
    return {name: (value, found["at"].get(name, first)) for name, value in _settings(found).items()}


# A build of the era whose line format the log shows (kvmem.engines.llamacpp.logs): the format dates the build
_ERA = (("llama_kv_cache_unified", False, "2025-06-01"),   # "N seqs": May - mid-July 2025
        ("llama_kv_cache_unified", True, "2025-08-01"))    # "s/t seqs": mid-July - Aug 21, 2025 (PR 15467)


def _settings(found: dict) -> dict:
    ctx = dict(found["context"])
    name, first_line = found["sizes"][0][2].group(1), found["sizes"][0][2]
    for era_name, streams_shown, build in _ERA:
        if name == era_name and (first_line.group(5) is not None) == streams_shown:
            ctx["build"] = build
    first = next((m for _, _, m in found["sizes"] if m.group(1) != "llama_memory_recurrent"), None)
    if first is not None:
        cells, seqs, streams = int(first.group(2)), int(first.group(4)), int(first.group(5) or 1)
        ctx.setdefault("kv_unified", streams == 1 and seqs > 1)
        ctx.setdefault("n_seq", seqs)
        ctx.setdefault("n_ctx", cells * streams)
        types = TYPES.search(found["sizes"][0][1])
        if types:
            ctx.setdefault("type_k", types.group(1))
            ctx.setdefault("type_v", types.group(2))
    return ctx


def _same(a: str, b: str) -> bool:
    """Equal but for the widths of llama.cpp's padded fields."""
    return "".join(a.split()) == "".join(b.split())


def check(model, found: dict, *, kv_dtype, tp: int, pp: int, info: dict | None = None,
          **options) -> tuple[dict, list[LineCheck], list[str]]:
    del tp, info                                   # llama.cpp splits layers (pp), never tensors
    checks, notes = [], []
    options.pop("max_model_len", None)
    if not found["sizes"]:
        return {}, checks, notes
    settings = _settings(found)
    if "n_ctx" not in settings:
        notes.append("the log states no n_ctx and no KV size line with cells: nothing to compare the recurrent "
                     "line with")
        return settings, checks, notes
    given = {k: settings[k] for k in ("n_ctx", "n_seq", "n_ubatch", "type_k", "type_v", "kv_unified", "flash_attn",
                                      "build") if k in settings}
    settings.pop("model", None)
    est = engine_estimate(model, engine="llama.cpp", tokens=1, batch=1, kv_dtype=kv_dtype, pp=pp,
                          **{**given, **options})
    ours = [line for line in est.log_lines if SIZE.search(line)]
    for kind in ("kv", "recurrent"):           # pair the log's lines with kvmem's of the same cache, in order
        logged = [(n, t, m) for n, t, m in found["sizes"] if (m.group(1) == "llama_memory_recurrent") == (kind != "kv")]
        mine = [line for line in ours if line.startswith("llama_memory_recurrent") == (kind != "kv")]
        for (n, text, m), expected in zip(logged, mine, strict=False):
            if text.endswith("seqs)"):         # a line printed without its K/V part: compare what it has
                expected = expected[:expected.index("seqs)") + len("seqs)")]
            ok = _same(expected, text)
            cause = "" if ok else (
                "other cells: another -c, -np, --kv-unified or -ub than the log states, or another build's padding"
                if SIZE.search(expected).group(2) != m.group(2) else
                "other bytes: another cache type (-ctk/-ctv, or --type-k/--type-v given here), or other layers "
                "(the GGUF's architecture, an MLA split cache) than the model given")
            checks.append(LineCheck(n, text, m.group(1), text, expected, ok, cause))
        if len(logged) != len(mine) and logged:
            notes.append(f"the log has {len(logged)} {kind} cache size line(s), kvmem {len(mine)} for these settings")
    return settings, checks, notes
