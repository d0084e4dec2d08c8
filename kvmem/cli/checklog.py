"""``kvmem check-log``: an engine's startup log checked line by line against kvmem."""

from __future__ import annotations

import sys

from ..sources.bounded import MAX_LOG_BYTES, quote, read_text
from ..units import parse_tokens
from .common import MODEL_HELP, emit, engine_options, parse_kv_memory, read_model


def cmd_check_log(args) -> int:
    """Exit 0 when every line checked matches; 1 when one differs or nothing could be checked."""
    from ..logcheck import check_log
    # bounded (kvmem.sources.bounded.read_text): a regular file or a pipe, at most MAX_LOG_BYTES, within a minute
    text = (read_text(sys.stdin.buffer, MAX_LOG_BYTES, "standard input (the log)") if args.log == "-" else
            read_text(args.log, MAX_LOG_BYTES, f"log file {quote(args.log)}"))
    options = engine_options(args.option)
    if args.max_model_len:
        options["max_model_len"] = parse_tokens(args.max_model_len)
    if args.plan_kv_memory:
        options["expected_kv_memory"] = parse_kv_memory(args.plan_kv_memory)
    model = read_model(args.model, args.revision) if args.model else None
    result = check_log(text, model, engine=args.engine, kv_dtype=args.kv_dtype, tp=args.tp, pp=args.pp, **options)
    lines = [f"{result.model} · {result.engine or 'engine not recognised'} · "
             + ", ".join(f"{k} {v}" for k, v in result.settings.items())]
    if result.inputs:
        lines.append("settings: " + "; ".join(f"{name} {_shown(value)} ({source})"
                                             for name, (value, source) in result.inputs.items()))
    for c in result.checks:
        lines.append(f"line {c.line}: {c.quantity}: " + ("matches" if c.matches else
                     f"logged {c.logged}, kvmem {c.kvmem} — {c.cause}"))
    lines += [f"note: {note}" for note in result.notes]
    emit(result.to_dict(), args.json, lines)
    return 0 if result.matches else 1


def _shown(value) -> str:
    """A setting as the "settings:" line shows it: a model by its name (never its whole record), text quoted,
    anything else as Python writes it, each at most 120 characters."""
    if isinstance(value, str):
        return quote(value, 120)
    name = getattr(value, "name", None)          # a kvmem.model.Model given with --model
    text = quote(name, 120) if isinstance(name, str) else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


class _Readable:
    """--engine's choices: the engines with a log reader (EngineSpec.log_reader), listed only when asked
    (an --engine given, --help), so that building the parser imports no engine."""

    @staticmethod
    def _names() -> list[str]:
        from ..logcheck import readers
        return list(readers())

    def __contains__(self, name) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


def configure(logp) -> None:
    logp.add_argument("log", help=f"the log file, or - for standard input (at most {MAX_LOG_BYTES >> 20} MiB; "
                                   "the startup lines are enough)")
    logp.add_argument("--model", default=None, help=MODEL_HELP + " (default: the model the log names, when kvmem has "
                                                                 "a preset for it; never fetched)")
    logp.add_argument("--revision", default=None, help="Hub branch, tag or commit of an HF id (default main)")
    logp.add_argument("--engine", default=None, choices=_Readable(),
                      help="default: from the log's lines")
    logp.add_argument("--kv-dtype", default=None,
                      help="KV element format the server used (default: the log's, else auto)")
    logp.add_argument("--tp", type=int, default=None, help="tensor-parallel size the server used (default: the "
                                                           "log's, else 1)")
    logp.add_argument("--pp", type=int, default=None, help="pipeline-parallel size the server used (default: the "
                                                           "log's, else 1)")
    logp.add_argument("--max-model-len", default=None, help="vLLM's max_model_len (default: the log's)")
    logp.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                      help="an engine option the server used, e.g. block_size=32, or weight_dtype=fp8 for the "
                           "weights line (repeatable; over the log's)")
    logp.add_argument("--plan-kv-memory", default=None,
                      help="the plan's KV budget per device (kvmem fit's kv_memory_bytes), to compare vLLM's "
                           "'Available KV cache memory' with")
    logp.add_argument("--json", action="store_true", help="machine-readable output")
    logp.set_defaults(func=cmd_check_log)
