"""The whole command line: one sub-command per module of this package, listed in the order
``kvmem --help`` shows them, and ``main``, which maps what a command raises to its exit status
(see the package docstring). A run imports the module of its own command only."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys

from .common import join_negative_values, safe_streams

# (command, its module in this package, the function there that adds its arguments, one line of
# help), in the order --help lists them
_COMMANDS = (
    ("models", "lists", "configure_models", "list the model presets"),
    ("estimate", "workload", "configure_estimate", "KV-cache bytes of one workload"),
    ("capacity", "workload", "configure_capacity", "what a KV memory budget holds"),
    ("fit", "fit", "configure", "does a workload fit on these GPUs, and how fast can it decode"),
    ("compare", "compare", "configure", "which engine? one workload under every engine mode side by side (fits, "
     "max batch, max context, concurrency, command); --engine vllm,sglang for some"),
    ("plan", "plan", "configure_plan",
     "the launch command (vllm serve, sglang, llama-server, trtllm-serve) that realises a fitting workload"),
    ("report", "plan", "configure_report",
     "the whole plan (inputs, results, engine lines, launch command, sources) as Markdown or JSON"),
    ("sweep", "sweep", "configure", "the overview: models x GPUs x contexts x engines (fits, max batch, max "
     "context, the engine's concurrency) as CSV, JSON or Parquet"),
    ("check-log", "checklog", "configure",
     "check an engine's startup log (vLLM, SGLang, llama.cpp, TRT-LLM) against kvmem"),
    ("gpus", "lists", "configure_gpus", "list the GPU catalog"),
    ("validate", "validate", "configure", "build real transformers caches with torch and check kvmem's bytes; "
     "--reach DIR: what every engine mode makes of each config.json under DIR"),
)


def _terminal_columns() -> int:
    """shutil.get_terminal_size()'s columns (COLUMNS, else the terminal of stdout, else 80), without
    importing shutil, which imports bz2 and lzma (~3 ms of every command)."""
    try:
        columns = int(os.environ.get("COLUMNS", 0))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, asking the terminal its width once per run: argparse makes one per
    argument it adds, and each asked (68 asks, ~8 ms of every command here)."""

    _width: int | None = None

    def __init__(self, prog, **kwargs):
        if _Formatter._width is None:
            _Formatter._width = _terminal_columns() - 2
        kwargs.setdefault("width", _Formatter._width)
        super().__init__(prog, **kwargs)


class _EpilogFormatter(_Formatter):
    """Keeps the epilog's own lines (the engine options, one a line)."""

    def _fill_text(self, text, _width, indent):
        return "".join(indent + line for line in text.splitlines(keepends=True))


# the commands that take -o NAME=VALUE: their --help lists every engine's options
_TAKE_OPTIONS = ("estimate", "capacity", "fit", "plan", "report", "sweep", "check-log")


def engine_options_help() -> str:
    """Every engine's options as it declares them (EngineSpec.option_specs), one a line."""
    from .. import engines
    lines = ["engine options (-o NAME=VALUE; the engine's default where none is given):"]
    for name in engines.list_engines():
        specs = engines.ENGINES[name].option_specs()
        lines.append(f"  {name}:" + ("" if specs else " none"))
        lines += [f"    {option.describe()}" for option in specs]
    return "\n".join(lines)


class Parser(argparse.ArgumentParser):
    """argparse, remembering its last usage error so that --json can report it as JSON too."""

    last_error: str | None = None

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        Parser.last_error = f"{self.prog}: {message}"
        super().error(message)


def build_parser(command: str | None = None, *, engine_help: bool | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command``, every sub-command is listed but only that one
    takes its arguments (a run parses one command: the others' arguments, and the modules that
    declare them, are not needed). ``engine_help`` (default: no ``command``, the whole line) adds
    every engine's options to the --help of the commands that take them; it loads every engine."""
    parser = Parser(prog="kvmem", description="Exact KV-cache memory for real models and engines.")
    sub = parser.add_subparsers(dest="command", required=True)
    def wanted(name: str) -> bool:
        return command is None or name == command
    for name, module, configure, help_line in _COMMANDS:
        command_parser = sub.add_parser(name, help=help_line)
        if wanted(name):
            getattr(importlib.import_module(f"{__package__}.{module}"), configure)(command_parser)
    if command is None if engine_help is None else engine_help:
        epilog = engine_options_help()
        for name in _TAKE_OPTIONS:
            if wanted(name):
                sub.choices[name].epilog = epilog
                sub.choices[name].formatter_class = _EpilogFormatter
    return parser


# The library's messages name its Python calls; on the command line the same hint is a command or a flag
# (kvmem.catalog's unknown model; kvmem.sizing.setup's "gpu_memory_utilization is vLLM's setting; engine
# 'sglang' takes mem_fraction_static=...")
CLI_HINTS = ((re.compile(r"see kvmem\.list_models\(\)"), "see `kvmem models`"),
             (re.compile(r"takes (\w+)=\.\.\."), r"takes -o \1=..."))


def cli_words(message: str) -> str:
    """``message`` with the library's Python hints said as the command line's (CLI_HINTS)."""
    for python, command_line in CLI_HINTS:
        message = python.sub(command_line, message)
    return message


def _error(args, exc: BaseException, code: int, kind: str = "error", named: bool = False) -> int:
    """Print the error on stderr (and as a JSON object on stdout with --json); return ``code``."""
    message = str(exc) if not isinstance(exc, KeyError) else str(exc.args[0] if exc.args else exc)
    message = cli_words(message)
    if named:
        message = f"{type(exc).__name__}: {message}"
    if code == 70:
        message += " (a bug in kvmem; KVMEM_DEBUG=1 shows the traceback)"
    print(f"kvmem {args.command}: {kind}: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps({"error": message, "type": type(exc).__name__, "command": args.command,
                          "exit_code": code}))
    return code


def main(argv=None) -> int:
    safe_streams()
    argv = join_negative_values(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser(next((arg for arg in argv if not arg.startswith("-")), None),
                          engine_help="-h" in argv or "--help" in argv)
    try:
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:  # a usage error (exit 2) or --help (exit 0)
        if exc.code and "--json" in argv:
            print(json.dumps({"error": Parser.last_error or "invalid command line", "type": "UsageError",
                              "command": argv[0] if argv else None, "exit_code": exc.code}))
        raise
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader left (``kvmem models | head``): stop quietly, and let no flush at exit complain
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (ValueError, KeyError) as exc:
        return _error(args, exc, 2)
    except (OSError, RuntimeError, ImportError, MemoryError, RecursionError) as exc:
        if os.environ.get("KVMEM_DEBUG"):
            raise
        return _error(args, exc, 2, named=True)
    except Exception as exc:  # a bug: say so in one line rather than a traceback
        if os.environ.get("KVMEM_DEBUG"):
            raise
        return _error(args, exc, 70, kind="internal error", named=True)
