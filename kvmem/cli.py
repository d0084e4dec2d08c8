"""The ``kvmem`` command line: models, estimate, capacity (and fit, plan, report, sweep, check-log, gpus, validate).

    kvmem models [--json]
    kvmem estimate llama-3.1-8b --tokens 128k --batch 8 --engine vllm --kv-dtype fp8 [--json]
    kvmem estimate ./config.json --tokens 32k --engine llama.cpp --option type_k=q8_0
    kvmem estimate Qwen/Qwen3-4B --tokens 32k            # an HF id: the HF cache, else the Hub
    kvmem estimate ./Meta-Llama-3-8B.Q4_K_M.gguf --tokens 8k --engine llama.cpp
    kvmem capacity llama-3.1-8b --kv-memory 20GiB --engine vllm --max-model-len 32k [--json]
    kvmem validate --engine vllm --cases 500 --seed 7 [--json]   (against the installed engine)

Exit status: 0 done; 1 the workload does not fit, does not match (validate), or the engine
itself would refuse it (set the engine's override, e.g. VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, where
it has one); 2 a bad input (the message names it); 70 an internal error (KVMEM_DEBUG=1 shows
the traceback); 130 interrupted (Ctrl-C); 141 the reader of stdout went away (``| head``).
With --json an error is a JSON object on stdout too. Output that the terminal's encoding
cannot show (PYTHONIOENCODING=ascii) is written with ASCII stand-ins (x for ×, - for ·).
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import re
import sys
from decimal import Decimal

from . import catalog, defaults, engines
from .units import format_bytes, parse_bytes, parse_tokens

__all__ = ["main"]

_ASCII = {"·": "-", "×": "x", "—": "-", "–": "-", "≤": "<=", "≥": ">=", "…": "...", "→": "->", "≈": "~",
          "µ": "u", "²": "^2", "’": "'", "“": '"', "”": '"'}


def _ascii_standins(exc):
    """Codec error handler: ASCII stand-ins for the few non-ASCII characters kvmem prints."""
    if isinstance(exc, UnicodeEncodeError):
        text = exc.object[exc.start:exc.end]
        return "".join(_ASCII.get(ch, "?") for ch in text), exc.end
    raise exc


codecs.register_error("kvmem_ascii", _ascii_standins)


def _safe_streams() -> None:
    """Let stdout/stderr fall back to ASCII stand-ins where their encoding lacks a character."""
    for stream in (sys.stdout, sys.stderr):
        try:
            "·×—".encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="kvmem_ascii")


def _join_negative_values(argv: list[str]) -> list[str]:
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


def _model(spec: str, revision: str | None = None):
    """What every command accepts as a model (kvmem.catalog.as_model)."""
    if os.path.isdir(spec) and not os.path.isfile(os.path.join(spec, "config.json")):
        raise ValueError(f"folder {spec!r} has no config.json (a model folder holds config.json and its "
                         "*.safetensors)")
    return catalog.as_model(spec, revision=revision)


def _kv_memory(text: str) -> int:
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
    from .units import exact_bytes
    return exact_bytes(text)


def _engine_refusal(result, command: str) -> int:
    """1 (and the reason on stderr) when the engine itself would refuse ``result``, else 0."""
    reason = getattr(result, "engine_refuses", None)
    if not reason:
        return 0
    allow = getattr(result, "engine_allows_with", None)
    if allow:
        name, _, value = allow.partition("=")
        if os.environ.get(name) == value:
            return 0
    print(f"kvmem {command}: the engine would refuse this: {reason}", file=sys.stderr)
    return 1


def _value(text: str):
    """An option value from the command line: JSON when it parses (numbers, true/false), else text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"--option takes NAME=VALUE, got {pair!r}")
        name, value = pair.split("=", 1)
        options[name.strip()] = _value(value)
    return options


def _print(data, as_json: bool, lines):
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        for line in lines:
            print(line)


def _engine_log(result) -> list[str]:
    """The lines the engine itself would print for this result, where its mode renders them."""
    log = result.log_lines
    return [f"{result.engine} would log:"] + [f"  {line}" for line in log] if log else []


def _short_source(source: str | None) -> str:
    """The first clause of a preset's source (where its config.json was read); --json has it all."""
    text = (source or "unknown").split(", ")[0].split("; ")[0]
    return text if len(text) <= 110 else text[:107] + "..."


def cmd_models(args) -> int:
    rows = []
    for name in catalog.list_models():
        data = catalog.preset(name)
        model = catalog.get_model(name)
        rows.append({"name": name, "hf_id": data.get("hf_id"), "layers": model.num_layers,
                     "kinds": model.kinds, "params_total": model.params_total, "source": data.get("source")})
    lines = []
    for r in rows:
        lines.append(f"{r['name']:<32} {r['hf_id'] or '':<48} {r['layers']:>4} layers  "
                     + ", ".join(f"{n} {k}" for k, n in r["kinds"].items()))
        lines.append(f"{'':<4}source: {_short_source(r['source'])}")
    _print(rows, args.json, lines)
    return 0


def cmd_estimate(args) -> int:
    model = _model(args.model, args.revision)
    result = engines.estimate(model, engine=args.engine, tokens=args.tokens,
                              batch=args.batch, kv_dtype=args.kv_dtype, tp=args.tp, pp=args.pp,
                              **_options(args.option))
    lines = [f"{result.model} · {result.engine} · {result.tokens:,} tokens × batch {result.batch} · "
             f"KV {result.kv_dtype} · tp {result.tp} pp {result.pp}",
             f"KV cache per device: {result.kv_bytes:,} B = {format_bytes(result.kv_bytes)} "
             f"({format_bytes(result.kv_bytes, binary=False)})",
             f"  K {format_bytes(result.k_bytes)}, V {format_bytes(result.v_bytes)}"]
    if result.state_bytes:
        lines.append(f"Recurrent state: {format_bytes(result.state_bytes)}")
    if result.peak_bytes != result.kv_bytes:
        lines.append(f"Transient peak: {format_bytes(result.peak_bytes)}")
    lines.append(f"All devices: {format_bytes(result.kv_bytes_all_devices)}")
    lines.append(f"model: {model.describe()}")
    lines += [f"config: {line}" for line in (model.reading.lines() if model.reading else ())]
    lines += [f"note: {note}" for note in result.notes]
    lines += _engine_log(result)
    _print(result.to_dict(), args.json, lines)
    return _engine_refusal(result, "estimate")


def cmd_capacity(args) -> int:
    result = engines.capacity(_model(args.model, args.revision), engine=args.engine,
                              kv_memory=_kv_memory(args.kv_memory), kv_dtype=args.kv_dtype, tp=args.tp, pp=args.pp,
                              max_model_len=args.max_model_len, **_options(args.option))
    lines = [f"{result.model} · {result.engine} · KV memory {format_bytes(result.kv_memory)}",
             f"blocks: {result.blocks:,} (block size {result.block_size})",
             f"tokens: {result.tokens:,}"]
    if result.max_concurrency is not None:
        lines.append(f"maximum concurrency: {result.max_concurrency:.2f}x")
    if result.max_model_len is not None:
        lines.append(f"longest single request: {result.max_model_len:,} tokens")
    lines += [f"note: {note}" for note in result.notes]
    lines += _engine_log(result)
    _print(result.to_dict(), args.json, lines)
    return _engine_refusal(result, "capacity")


def _weights_line(result) -> str:
    """Which weight bytes fit used: a checkpoint's headers (exact), the formula (fallback), or given."""
    per_device = format_bytes(result.breakdown.get("weights", 0))
    if result.weight_dtype in ("safetensors", "gguf"):
        return f"weights from: the {result.weight_dtype} headers, exact ({per_device} per device)"
    if result.weight_dtype == "given":
        return f"weights from: weights_bytes as given ({per_device} per device)"
    return (f"weights from: the formula, {result.weight_dtype} x the config's parameter count ({per_device} per "
            "device; no safetensors or GGUF headers used)")


def _breakdown_text(result) -> str:
    """The per-device parts; the engine's reserve and the KV it lacks named as such (kvmem.sizing.part_names)."""
    from .sizing import part_names
    names = {**{k: k for k in result.breakdown}, "free": part_names(result.engine)["free"],
             "shortfall": part_names(result.engine)["shortfall"]}
    return ", ".join(f"{names[k]} {format_bytes(v)}" for k, v in result.breakdown.items()
                     if k != "shortfall" or v)


def _engine_numbers_lines(numbers) -> list[str]:
    """What the engine itself reports for the fit (kvmem.sizing.numbers), and the lines it logs."""
    if numbers is None:
        return []
    text = f"{numbers.engine} reports: {numbers.tokens_label} {numbers.tokens:,}"
    if numbers.max_concurrency is not None:
        text += f"; concurrency {numbers.max_concurrency:.2f}x for {numbers.context:,} tokens per request"
    how = ("exact: it follows from " if numbers.exact else "estimated: it depends on ") + numbers.depends_on
    return [text, f"  ({how})"] + [f"  {line}" for line in numbers.lines]


def _offload_lines(model, args) -> tuple[list[str], dict]:
    """llama.cpp: the placement that keeps the most on the GPUs, --fit on's, both commands."""
    from .engines.llamacpp.offload import llamacpp_offload
    opts = _options(args.option)
    keep = {k: opts[k] for k in ("type_k", "type_v", "flash_attn", "n_ubatch") if k in opts}
    try:
        p = llamacpp_offload(model, gpus=args.gpu, context=args.context, weight_dtype=args.weight_dtype,
                             host_memory=args.host_memory, kv_dtype=args.kv_dtype, **keep)
    except ValueError as exc:
        return [f"llama.cpp offload: not placed: {exc}"], {"error": str(exc)}
    lines = [f"llama.cpp offload on {' + '.join(p.gpus)} at {p.context:,} tokens:"]
    for label, lay, tps, cmd in (("kvmem", p.best, p.decode_best, p.command_best),
                                 ("--fit on", p.fit, p.decode_fit, p.command_fit)):
        if lay is None:
            lines.append(f"  {label}: nothing fits")
            continue
        mib = ", ".join(f"{d} {lay.total_bytes[d] / 2**20:,.0f} MiB" for d in lay.total_bytes)
        speed = f"{tps:,.1f} tokens/s" if tps else "needs --host-memory (and GPU bandwidth)"
        lines += [f"  {label}: {lay.placement.offloaded_layers}/{lay.placement.n_layer + 1} layers on the GPUs, "
                  f"n_ctx {lay.n_ctx:,}; {mib}; decode bound {speed}", f"    {cmd}"]
        if label != "kvmem":
            lines.append(f"    (it chooses {' '.join(lay.flags())})")
    lines.append(f"  how --fit on chose: {p.fit_note}")
    lines += [f"  note: {note}" for note in p.notes]
    return lines, p.to_dict()


def cmd_fit(args) -> int:
    """Exit 0 when the workload fits, 1 when it does not (the reason and what would fit printed)."""
    from .sizing import FitError, fit
    model = _model(args.model, args.revision)
    if args.engine == "llama.cpp" and "," in args.gpu:     # mixed cards: llama.cpp's layer split only
        lines, data = _offload_lines(model, args)
        _print({"llamacpp_offload": data}, args.json, lines)
        return 0 if data.get("best") else 1
    try:
        result = fit(model, gpu=args.gpu, num_gpus=args.num_gpus, tp=args.tp, pp=args.pp,
                     context=args.context, batch=args.batch, weight_dtype=args.weight_dtype,
                     kv_dtype=args.kv_dtype, engine=args.engine,
                     gpu_memory_utilization=args.gpu_memory_utilization, **_options(args.option))
        error = None
    except FitError as exc:
        result, error = exc.fit, str(exc)
    workload = (f"{result.context:,} tokens x batch {result.batch}" if result.batch is not None else
                f"{result.context:,} tokens, up to {result.max_batch:,} sequences (no --batch given)")
    replica = " per replica" if result.replicas > 1 else ""
    lines = [f"{result.model} on {result.num_gpus} x {result.gpu} · {result.engine} · tp {result.tp} pp {result.pp}"
             f" · weights {result.weight_dtype} · KV {result.kv_dtype}",
             f"fits: {'yes' if result.fits else 'no'} — {workload}",
             f"per device, for {result.breakdown_batch:,} x {result.breakdown_context:,} tokens{replica}: "
             + _breakdown_text(result),
             f"max batch at {result.context:,} tokens: {result.max_batch}",
             f"max context at batch {result.batch or 1}: {result.max_context:,}",
             f"min GPUs: {result.min_gpus if result.min_gpus is not None else 'none up to tp 64'}"]
    if result.decode_tokens_per_s is not None:
        lines.append(f"decode bound: {result.decode_tokens_per_s:,.1f} tokens/s per sequence, "
                     f"{result.decode_tokens_per_s_aggregate:,.0f} in all")
    if result.kv_crossover_tokens is not None:
        lines.append(f"KV reads pass weight reads from {result.kv_crossover_tokens:,} tokens per sequence")
    lines += _engine_numbers_lines(result.engine_numbers)
    if not result.fits and error is None:
        lines.append(f"short by {format_bytes(result.shortfall_bytes)} per device; would fit: "
                     + ("; ".join(result.suggestions) or "nothing tried"))
    lines += [f"note: {note}" for note in result.notes]
    data = result.to_dict()
    data["weights_source"] = (result.weight_dtype if result.weight_dtype in ("safetensors", "gguf", "given")
                              else "formula")
    lines.insert(3, _weights_line(result))
    if args.engine == "llama.cpp":
        more, data["llamacpp_offload"] = _offload_lines(model, args)
        lines += more
    if error:
        data["error"] = error
        if not args.json:
            print(f"kvmem fit: {error}", file=sys.stderr)
    _print(data, args.json, lines)
    refused = _engine_refusal(result, "fit")
    return 0 if result.fits and not refused else 1


def cmd_plan(args) -> int:
    """Exit 0 with the command; 1 when there is none (the workload does not fit, or a setting has no flag)."""
    from .launch import PlanRefused, plan
    try:
        result = plan(_model(args.model, args.revision), gpu=args.gpu, num_gpus=args.num_gpus, tp=args.tp,
                      pp=args.pp, context=args.context, batch=args.batch, target=args.target,
                      weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, engine=args.engine,
                      gpu_memory_utilization=args.gpu_memory_utilization, **_options(args.option))
    except PlanRefused as exc:
        print(f"kvmem plan: refused: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": str(exc), "type": "PlanRefused", "command": "plan", "exit_code": 1}))
        return 1
    lines = [f"# {result.release}: {result.batch:,} x {result.context:,} tokens ({result.target})", result.command, ""]
    width = max(len(" ".join(f.argv)) for f in result.flags)
    lines += [f"  {' '.join(f.argv):<{width}}  # {f.reason}" for f in result.flags]
    for name, text in result.files.items():
        lines += ["", f"# {name}:"] + text.rstrip("\n").split("\n")
    lines += _engine_numbers_lines(result.fit.engine_numbers)
    _print(result.to_dict(), args.json, lines)
    return 0


def cmd_report(args) -> int:
    """The whole plan as Markdown or JSON (kvmem.report); exit 0 when the workload fits, 1 when it does not."""
    from .export import report
    fmt = "json" if args.json else args.format or ("json" if (args.output or "").endswith(".json") else "md")
    result = report(_model(args.model, args.revision), gpu=args.gpu, num_gpus=args.num_gpus, tp=args.tp, pp=args.pp,
                    context=args.context, batch=args.batch, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                    engine=args.engine, gpu_memory_utilization=args.gpu_memory_utilization, **_options(args.option))
    text = result.to_json() if fmt == "json" else result.to_markdown()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
        print(f"kvmem report: {fmt} report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0 if result.fit.fits and not _engine_refusal(result.fit, "report") else 1


def cmd_sweep(args) -> int:
    """Every model x GPU x context x engine (kvmem.sweep) as CSV, JSON or Parquet; exit 0, refusals are rows."""
    from . import tables
    from .sizing import sweep
    fmt = "json" if args.json else args.format
    if fmt == "parquet" and not args.output:
        raise ValueError("--format parquet writes a binary file: give --output FILE")
    every = lambda text: None if text.strip().lower() == "all" else text   # noqa: E731
    cells = sweep(every(args.models), every(args.gpus), contexts=args.contexts, engines=args.engines,
                  num_gpus=args.num_gpus, batch=args.batch, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                  gpu_memory_utilization=args.gpu_memory_utilization, **_options(args.option))
    tables.write_sweep(cells, args.output or sys.stdout, fmt)
    if fmt == "json" and not args.output:
        print()
    if args.output:
        refused = sum(1 for c in cells if c.refused)
        print(f"kvmem sweep: {len(cells):,} cells ({refused:,} refused) written to {args.output}", file=sys.stderr)
    return 0


def cmd_check_log(args) -> int:
    """Exit 0 when every KV line checked matches; 1 when one differs or nothing could be checked."""
    from .logcheck import check_log
    text = sys.stdin.read() if args.log == "-" else open(args.log, encoding="utf-8", errors="replace").read()
    options = _options(args.option)
    if args.max_model_len:
        options["max_model_len"] = parse_tokens(args.max_model_len)
    if args.plan_kv_memory:
        options["expected_kv_memory"] = _kv_memory(args.plan_kv_memory)
    result = check_log(text, _model(args.model, args.revision), engine=args.engine, kv_dtype=args.kv_dtype,
                       tp=args.tp, pp=args.pp, **options)
    lines = [f"{result.model} · {result.engine or 'engine not recognised'} · "
             + ", ".join(f"{k} {v}" for k, v in result.settings.items())]
    for c in result.checks:
        lines.append(f"line {c.line}: {c.quantity}: " + ("matches" if c.matches else
                     f"logged {c.logged}, kvmem {c.kvmem} — {c.cause}"))
    lines += [f"note: {note}" for note in result.notes]
    _print(result.to_dict(), args.json, lines)
    return 0 if result.matches else 1


def cmd_gpus(args) -> int:
    from .gpus import get_gpu, list_gpus
    rows = [get_gpu(name).to_dict() for name in list_gpus()]
    _print(rows, args.json, [
        f"{r['name']:<22} {r['label'].split(' (')[0][:36]:<36} {format_bytes(r['memory_bytes']):>11} "
        f"(usable {format_bytes(r['usable_memory_bytes'])})  "
        + (f"{r['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s" if r['bandwidth_bytes_per_s'] else "")
        for r in rows])
    return 0


def cmd_validate(args) -> int:
    """Build the suite's real caches with torch and compare them with kvmem's prediction."""
    if args.engine:   # kvmem against an installed engine's own code (kvmem/oracles/)
        from .oracles.command import run
        return run(args)
    from .validation import ALLOCATOR_NOTE, validate

    tty = sys.stderr.isatty()

    def progress(index, total, entry):
        done = 24 * index // total
        label = f"{entry['model']} {entry['engine']}" if entry else "done"
        if tty:  # a bar redrawn in place; elsewhere (a log, a pipe) one plain line per entry
            print(f"\r[{'#' * done}{'.' * (24 - done)}] {index}/{total} {label:<44}", end="" if entry else "\n",
                  file=sys.stderr, flush=True)
        else:
            print(f"[{index}/{total}] {label}", file=sys.stderr, flush=True)

    rows = validate(device=args.device, models=args.models, quick=args.quick, progress=progress)
    cuda = any(str(r["device"]).startswith("cuda") for r in rows)
    head = (f"{'model':<22} {'engine':<12} {'tokens':>6} {'batch':>5} {'predicted':>13} {'measured':>13} "
            f"{'difference':>10} {'peak pred.':>13} {'peak meas.':>13}" + (f" {'reserved':>13}" if cuda else "")
            + "  ok")
    lines = [head]
    for r in rows:
        start = f"{r['model']:<22} {r['engine']:<12} {r['tokens']:>6} {r['batch']:>5}"
        if r.get("skipped"):
            lines.append(f"{start}  skipped: {r['skipped']}")
            continue
        reserved = f" {r['reserved_bytes']:>13,}" if cuda else ""
        lines.append(f"{start} {r['predicted_bytes']:>13,} {r['tensor_bytes']:>13,} {r['difference_bytes']:>10,} "
                     f"{r['predicted_peak_bytes']:>13,} {r['peak_bytes']:>13,}{reserved}  "
                     + ("yes" if r["matches"] else "NO"))
    failed = [r for r in rows if r["matches"] is False]
    ran = [r for r in rows if not r.get("skipped")]
    lines.append(f"{len(ran) - len(failed)} of {len(ran)} match on {rows[0]['device'] if rows else args.device}"
                 + (f", {len(rows) - len(ran)} skipped" if len(rows) > len(ran) else "")
                 + ". measured = unique storages the cache holds; peak = allocator high-water mark above the start.")
    lines.append(ALLOCATOR_NOTE)
    _print(rows, args.json, lines)
    return 1 if failed else 0


def _add_workload(parser, *, tokens: bool):
    parser.add_argument("model", help=MODEL_HELP)
    parser.add_argument("--revision", default=None, help="Hub branch, tag or commit of an HF id (default main)")
    if tokens:
        parser.add_argument("--tokens", required=True, help='tokens per sequence: 4096, "32k", "128k", "1M"')
        parser.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
    parser.add_argument("--engine", default=defaults.ENGINE,
                        help=f"engine mode: {', '.join(engines.list_engines())} "
                             f"(default {defaults.ENGINE}, as in the app)")
    parser.add_argument("--kv-dtype", default=defaults.KV_DTYPE,
                        help=f"KV element format (default {defaults.KV_DTYPE} = the model's dtype, as in the app)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    parser.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                        help="an engine option, e.g. block_size=32 or type_k=q8_0 (repeatable)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, asking the terminal its width once per run: argparse makes one per
    argument it adds, and each asked (68 asks, ~8 ms of every command here)."""

    _width: int | None = None

    def __init__(self, prog, **kwargs):
        if _Formatter._width is None:
            import shutil
            _Formatter._width = shutil.get_terminal_size().columns - 2
        kwargs.setdefault("width", _Formatter._width)
        super().__init__(prog, **kwargs)


class _Parser(argparse.ArgumentParser):
    """argparse, remembering its last usage error so that --json can report it as JSON too."""

    last_error: str | None = None

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        _Parser.last_error = f"{self.prog}: {message}"
        super().error(message)


def _add_fit_arguments(parser) -> None:
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
    parser.add_argument("--kv-dtype", default=defaults.KV_DTYPE,
                      help=f"KV element format (default {defaults.KV_DTYPE} = the model's dtype)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="vLLM's fraction (default 0.9)")
    parser.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                      help="an engine or sizing option, e.g. max_num_seqs=256 (repeatable)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command``, every sub-command is listed but only that one
    takes its arguments (a run parses one command: the others' arguments, and the modules that
    declare them, are not needed)."""
    parser = _Parser(prog="kvmem", description="Exact KV-cache memory for real models and engines.")
    sub = parser.add_subparsers(dest="command", required=True)
    def wanted(name: str) -> bool:
        return command is None or name == command
    models = sub.add_parser("models", help="list the model presets")
    models.add_argument("--json", action="store_true")
    models.set_defaults(func=cmd_models)
    est = sub.add_parser("estimate", help="KV-cache bytes of one workload")
    if wanted("estimate"):
        _add_workload(est, tokens=True)
    est.set_defaults(func=cmd_estimate)
    cap = sub.add_parser("capacity", help="what a KV memory budget holds")
    if wanted("capacity"):
        _add_workload(cap, tokens=False)
        cap.add_argument("--kv-memory", required=True,
                         help='KV bytes on one device, with a unit: "20GiB", "16GB" (fractional bytes rounded down)')
        cap.add_argument("--max-model-len", default=None, help="request length for the concurrency figure")
    cap.set_defaults(func=cmd_capacity)
    fitp = sub.add_parser("fit", help="does a workload fit on these GPUs, and how fast can it decode")
    if wanted("fit"):
        _add_fit_arguments(fitp)
        fitp.add_argument("--host-memory", default=None,
                          help="llama.cpp offload: host RAM bandwidth for the decode bound, a preset "
                               "(ddr5-5600-2ch, epyc-9004-12ch-ddr5-4800, ...) or '89.6GB/s'; --gpu A,B gives "
                               "mixed cards")
    fitp.set_defaults(func=cmd_fit)
    planp = sub.add_parser("plan", help="the launch command (vllm serve, sglang, llama-server, trtllm-serve) that "
                           "realises a fitting workload")
    if wanted("plan"):
        _add_fit_arguments(planp)
        planp.add_argument("--target", default="workload", choices=("workload", "max_batch", "max_context"),
                           help="workload: this --batch (default 1) at --context; max_batch: the most sequences of "
                                "--context; max_context: the longest context for --batch")
    planp.set_defaults(func=cmd_plan)
    rep = sub.add_parser("report", help="the whole plan (inputs, results, engine lines, launch command, sources) as "
                         "Markdown or JSON")
    if wanted("report"):
        _add_fit_arguments(rep)
        rep.add_argument("--format", default=None, choices=("md", "json"),
                         help="md (default) or json (the document kvmem.rerun_report runs again); default json "
                              "for an --output ending in .json")
        rep.add_argument("--output", default=None, help="write to this file (default: standard output)")
    rep.set_defaults(func=cmd_report)
    swp = sub.add_parser("sweep", help="the overview: models x GPUs x contexts x engines (fits, max batch, max "
                         "context, the engine's concurrency) as CSV, JSON or Parquet")
    if wanted("sweep"):
        swp.add_argument("--models", default="all", help="presets, comma-separated (or any model kvmem fit takes); "
                                                         "all = every preset (default)")
        swp.add_argument("--gpus", default="all",
                         help="catalog GPUs, comma-separated; all = the whole catalog (default)")
        swp.add_argument("--contexts", default="8k", help='tokens per sequence, comma-separated: "8k,32k" (default 8k)')
        swp.add_argument("--engines", default=defaults.ENGINE,
                         help=f"engine modes, comma-separated (default {defaults.ENGINE}); "
                              f"of {', '.join(engines.list_engines())}")
        swp.add_argument("--num-gpus", type=int, default=1, help="GPUs per cell, tp = num_gpus (default 1)")
        swp.add_argument("--batch", type=int, default=None, help="sequences a cell must hold to fit (default 1)")
        swp.add_argument("--weight-dtype", default="auto", help="weight format: auto, bf16, fp8, awq, q4_k_m, ...")
        swp.add_argument("--kv-dtype", default=defaults.KV_DTYPE,
                         help=f"KV element format (default {defaults.KV_DTYPE} = each model's dtype)")
        swp.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="vLLM's fraction (default 0.9)")
        swp.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                         help="an engine or sizing option, given to each engine that takes it (repeatable)")
        swp.add_argument("--format", default="csv", choices=("csv", "json", "parquet"),
                         help="csv (default), json (one array) or parquet (needs --output)")
        swp.add_argument("--output", default=None, help="write to this file (default: standard output)")
        swp.add_argument("--json", action="store_true", help="the same as --format json")
    swp.set_defaults(func=cmd_sweep)
    logp = sub.add_parser("check-log", help="check an engine's startup log (vLLM, SGLang, llama.cpp, TRT-LLM) "
                          "against kvmem")
    if wanted("check-log"):
        logp.add_argument("log", help="the log file, or - for standard input")
        logp.add_argument("--model", required=True, help=MODEL_HELP)
        logp.add_argument("--revision", default=None, help="Hub branch, tag or commit of an HF id (default main)")
        logp.add_argument("--engine", default=None, choices=("vllm", "sglang", "llama.cpp", "trtllm"),
                          help="default: from the log's lines")
        logp.add_argument("--kv-dtype", default="auto", help="KV element format the server used (default auto)")
        logp.add_argument("--tp", type=int, default=1, help="tensor-parallel size the server used")
        logp.add_argument("--pp", type=int, default=1, help="pipeline-parallel size the server used")
        logp.add_argument("--max-model-len", default=None, help="vLLM's max_model_len when the log does not state it")
        logp.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                          help="an engine option the server used, e.g. block_size=32 (repeatable)")
        logp.add_argument("--plan-kv-memory", default=None,
                          help="the plan's KV budget per device (kvmem fit's kv_memory_bytes), to compare vLLM's "
                               "'Available KV cache memory' with")
        logp.add_argument("--json", action="store_true", help="machine-readable output")
    logp.set_defaults(func=cmd_check_log)
    gpus = sub.add_parser("gpus", help="list the GPU catalog")
    gpus.add_argument("--json", action="store_true")
    gpus.set_defaults(func=cmd_gpus)
    val = sub.add_parser("validate", help="build real transformers caches with torch and check kvmem's bytes")
    val.set_defaults(func=cmd_validate)
    if wanted("validate"):
        val.add_argument("--device", default="auto", help="cpu, cuda (or cuda:N), or auto (cuda when available)")
        val.add_argument("--models", nargs="+", default=None, help="only the suite entries of these models")
        val.add_argument("--quick", action="store_true", help="fewer tokens per entry")
        val.add_argument("--json", action="store_true", help="one JSON array, one item per entry")
        from .oracles.command import add_arguments
        add_arguments(val)
    return parser


def _error(args, exc: BaseException, code: int, kind: str = "error", named: bool = False) -> int:
    """Print the error on stderr (and as a JSON object on stdout with --json); return ``code``."""
    message = str(exc) if not isinstance(exc, KeyError) else str(exc.args[0] if exc.args else exc)
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
    _safe_streams()
    argv = _join_negative_values(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser(next((arg for arg in argv if not arg.startswith("-")), None))
    try:
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:  # a usage error (exit 2) or --help (exit 0)
        if exc.code and "--json" in argv:
            print(json.dumps({"error": _Parser.last_error or "invalid command line", "type": "UsageError",
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


if __name__ == "__main__":
    sys.exit(main())
