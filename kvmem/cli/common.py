"""What every command shares: reading a model, a KV budget and ``-o NAME=VALUE`` options from the
command line, printing lines or JSON, the engine's own refusal as exit status 1, and ASCII
stand-ins for a terminal that cannot show kvmem's few non-ASCII characters."""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from decimal import Decimal

from .. import catalog, defaults, engines
from ..units import parse_bytes

_ASCII = {"·": "-", "×": "x", "—": "-", "–": "-", "≤": "<=", "≥": ">=", "…": "...", "→": "->", "≈": "~",
          "µ": "u", "²": "^2", "’": "'", "“": '"', "”": '"'}


def _ascii_standins(exc):
    """Codec error handler: ASCII stand-ins for the few non-ASCII characters kvmem prints."""
    if isinstance(exc, UnicodeEncodeError):
        text = exc.object[exc.start:exc.end]
        return "".join(_ASCII.get(ch, "?") for ch in text), exc.end
    raise exc


codecs.register_error("kvmem_ascii", _ascii_standins)


def safe_streams() -> None:
    """Let stdout/stderr fall back to ASCII stand-ins where their encoding lacks a character."""
    for stream in (sys.stdout, sys.stderr):
        try:
            "·×—".encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="kvmem_ascii")


def join_negative_values(argv: list[str]) -> list[str]:
    """``--kv-memory -1GiB`` as ``--kv-memory=-1GiB``: argparse would read -1GiB as an option
    and say only "expected one argument"; joined, the value reaches its parser, which says
    "must be positive"."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and re.match(r"^-[0-9.]", arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


MODEL_HELP = ("preset name, HF id (org/name: the HF cache, else the Hub), a local model folder, "
              "a config.json, a .gguf file, or org/name/FILE.gguf on the Hub")


def read_model(spec: str, revision: str | None = None):
    """What every command accepts as a model (kvmem.catalog.as_model)."""
    if os.path.isdir(spec) and not os.path.isfile(os.path.join(spec, "config.json")):
        raise ValueError(f"folder {spec!r} has no config.json (a model folder holds config.json and its "
                         "*.safetensors)")
    return catalog.as_model(spec, revision=revision)


def parse_kv_memory(text: str) -> int:
    """--kv-memory: a byte count with a unit; a fractional byte count is rounded down, and said."""
    if re.fullmatch(r"\s*[0-9][0-9_,]*(\.[0-9]*)?\s*", text):
        raise ValueError(f"--kv-memory {text.strip()} has no unit: write {text.strip()}GiB, {text.strip()}GB "
                         f"or {text.strip()}B (bytes)")
    try:
        return parse_bytes(text)
    except ValueError as exc:
        if "not a whole number" not in str(exc):
            raise
    exact = _exact_bytes(text)
    whole = int(exact)
    print(f"kvmem: --kv-memory {text} is {exact:,} B; rounded down to {whole:,} B", file=sys.stderr)
    return parse_bytes(whole)


def _exact_bytes(text: str) -> Decimal:
    """The byte count ``text`` names, fractional part included (parse_bytes refuses fractions)."""
    from ..units import exact_bytes
    return exact_bytes(text)


def engine_refusal(result, command: str) -> int:
    """1 (and the reason on stderr) when the engine itself would refuse ``result`` (its ``refusal``),
    else 0; 0 too where the setting that lets it start is in the environment."""
    refusal = getattr(result, "refusal", None)
    if not refusal:
        return 0
    if refusal.allow_with:
        name, _, value = refusal.allow_with.partition("=")
        if os.environ.get(name) == value:
            return 0
    print(f"kvmem {command}: the engine would refuse this: {refusal.reason}", file=sys.stderr)
    return 1


def _value(text: str):
    """An option value from the command line: JSON when it parses (numbers, true/false), else text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def engine_options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"--option takes NAME=VALUE, got {pair!r}")
        name, value = pair.split("=", 1)
        options[name.strip()] = _value(value)
    return options


def fit_options(args) -> dict:
    """The -o options of fit, plan and report, with --weights as the sizing option weights_bytes."""
    options = engine_options(args.option)
    if args.weights is not None:
        if "weights_bytes" in options:
            raise ValueError("give the weights once: --weights or -o weights_bytes=..., not both")
        options["weights_bytes"] = args.weights
    return options


def emit(data, as_json: bool, lines):
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        for line in lines:
            print(line)


def engine_log(result) -> list[str]:
    """The lines the engine itself would print for this result, where its mode renders them."""
    log = result.log_lines
    return [f"{result.engine} would log:"] + [f"  {line}" for line in log] if log else []


def engine_numbers_lines(numbers) -> list[str]:
    """What the engine itself reports for the fit (kvmem.sizing.numbers), and the lines it logs."""
    if numbers is None:
        return []
    text = f"{numbers.engine} reports: {numbers.tokens_label} {numbers.tokens:,}"
    if numbers.max_concurrency is not None:
        text += f"; concurrency {numbers.max_concurrency:.2f}x for {numbers.context:,} tokens per request"
    how = ("exact: it follows from " if numbers.exact else "estimated: it depends on ") + numbers.depends_on
    return [text, f"  ({how})"] + [f"  {line}" for line in numbers.lines]


def add_fit_arguments(parser) -> None:
    """The workload, hardware and engine arguments `kvmem fit` and `kvmem plan` share."""
    parser.add_argument("model", help=MODEL_HELP)
    parser.add_argument("--revision", default=None, help="Hub branch, tag or commit of an HF id (default main)")
    parser.add_argument("--gpu", required=True, help='catalog name (see "kvmem gpus") or "custom:80GiB:3.35TB/s"')
    parser.add_argument("--num-gpus", type=int, default=1, help="GPUs (default 1)")
    parser.add_argument("--tp", type=int, default=None, help="tensor-parallel size (default: num_gpus / pp)")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    parser.add_argument("--context", required=True, help='tokens per sequence: 8192, "32k", "128k"')
    parser.add_argument("--batch", type=int, default=None, help="sequences (default: report the most that fit)")
    parser.add_argument("--engine", default=defaults.ENGINE,
                      help=f"engine mode: {', '.join(engines.list_engines())} (default {defaults.ENGINE})")
    parser.add_argument("--weight-dtype", default="auto", help="weight format: auto, bf16, fp8, awq, q4_k_m, ...")
    parser.add_argument("--weights", default=None, metavar="SIZE",
                      help='weight bytes per device, e.g. "62GB" or "57.7GiB" (the same as -o weights_bytes=...): '
                           "for a config without a parameter count, or weights you measured; default: the "
                           "checkpoint's safetensors/GGUF headers, else its parameter count x --weight-dtype")
    parser.add_argument("--kv-dtype", default=defaults.KV_DTYPE,
                      help=f"KV element format (default {defaults.KV_DTYPE} = the model's dtype)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="vLLM's fraction (default 0.9)")
    parser.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                      help="an engine or sizing option, e.g. max_num_seqs=256 (repeatable)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
