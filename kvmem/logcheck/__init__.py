"""Check a real startup log against kvmem: kvmem.check_log(text, model, ...) -> LogCheck.

The log's KV lines are found by their text (engine/logcheck modules: vllm, sglang), the settings
they state are recovered, the rest are taken from the arguments (tp, pp, kv_dtype, engine options),
and each line is compared with what kvmem computes: it matches, or the check names the difference
and its likely cause. Lines kvmem does not know are ignored, never misread; a log with nothing
kvmem can check says so. vLLM V1 ("Available KV cache memory", "GPU KV cache size"), SGLang
("KV Cache is allocated", "Mamba Cache is allocated") and llama.cpp ("llama_kv_cache[_unified]:
size = ...", iSWA pairs, "llama_memory_recurrent: size = ...", with the llama_context lines that
state n_ctx, n_seq_max, kv_unified) and TRT-LLM ("available: A GiB" with the primary pool's blocks,
"Allocated X GiB for max tokens in paged KV cache (N)") are read.

A log is an input from outside: at most MAX_LOG_CHARS characters (kvmem.sources.bounded.MAX_LOG_BYTES),
read by patterns that take one pass over a line however long it is, and a number no server prints
(past 24 digits or 2**40, or not a number) is refused naming its line.
"""

from __future__ import annotations

from ..catalog import as_model
from ..engines import ENGINES
from ..parallel import check_parallel
from ..sources.bounded import MAX_LOG_BYTES
from . import llamacpp, sglang, trtllm, vllm
from .base import LineCheck, LogCheck

__all__ = ["check_log", "LogCheck", "LineCheck", "MAX_LOG_CHARS"]
MAX_LOG_CHARS = MAX_LOG_BYTES       # a startup log: a few hundred KB; a file or a paste past this is refused
READERS = {"vllm": vllm, "sglang": sglang, "llama.cpp": llamacpp, "trtllm": trtllm}
_UNREAD: dict = {}


def _engine_of(found: dict) -> str | None:
    if found["sglang"]["kv"] or found["sglang"]["legacy"]:
        return "sglang"
    if found["llama.cpp"]["sizes"]:
        return "llama.cpp"
    if found["trtllm"]:
        return "trtllm"
    if found["vllm"]:
        return "vllm"
    return None


def check_log(text: str, model, *, engine: str | None = None, kv_dtype="auto", tp: int = 1, pp: int = 1,
              expected_kv_memory: int | None = None, **options) -> LogCheck:
    """Every KV line of ``text`` kvmem can check, for ``model`` under the settings given (module docstring).
    ``expected_kv_memory``: the plan's KV budget per device (kvmem.fit(...).kv_memory_bytes), for an
    engine whose log states its own (EngineSpec.logs_kv_budget)."""
    if not isinstance(text, str):
        raise ValueError(f"log must be text (str), got {type(text).__name__}")
    if len(text) > MAX_LOG_CHARS:
        raise ValueError(f"log is {len(text):,} characters; kvmem reads at most {MAX_LOG_CHARS:,} of a startup log "
                         "(its KV lines come in the first minutes: pass those, e.g. the first 10,000 lines)")
    tp, pp = check_parallel(tp, pp)
    model = as_model(model)
    lines = text.splitlines()
    found = {name: reader.read(lines) for name, reader in READERS.items()}
    engine = engine or _engine_of(found)
    notes = []
    if engine is None or engine not in READERS:
        known = [name for name, marker in _UNREAD.items() if marker in text]
        if known or engine in _UNREAD:
            notes.append(f"{engine or known[0]} logs are not read by check-log yet; nothing was checked")
        else:
            notes.append("no line kvmem can check: it reads vLLM's 'Available KV cache memory' / 'GPU KV cache "
                         "size', SGLang's 'KV Cache is allocated' / 'Mamba Cache is allocated', llama.cpp's "
                         "cache size lines and TRT-LLM's paged KV cache lines")
        return LogCheck(engine=engine, model=model.name, settings={}, notes=tuple(notes), ignored=len(lines))
    extra = {"expected_kv_memory": expected_kv_memory} if ENGINES[engine].logs_kv_budget else {}
    settings, checks, more = READERS[engine].check(model, found[engine], kv_dtype=kv_dtype, tp=tp, pp=pp,
                                                   **extra, **options)
    notes += more
    if not checks:
        notes.append("no line kvmem can check for this engine in the log")
    in_order = tuple(sorted(checks, key=lambda c: c.line))
    return LogCheck(engine=engine, model=model.name, settings=settings, checks=in_order, notes=tuple(notes),
                    ignored=len(lines) - len({c.line for c in checks}))
