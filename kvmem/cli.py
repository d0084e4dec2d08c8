"""The ``kvmem`` command line: models, estimate, capacity (and fit, gpus, validate).

    kvmem models [--json]
    kvmem estimate llama-3.1-8b --tokens 128k --batch 8 --engine vllm --kv-dtype fp8 [--json]
    kvmem estimate ./config.json --tokens 32k --engine llama.cpp --option type_k=q8_0
    kvmem capacity llama-3.1-8b --kv-memory 20GiB --engine vllm --max-model-len 32k [--json]
    kvmem validate --engine vllm --cases 500 --seed 7 [--json]   (against the installed engine)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import catalog, engines
from .configs import model_from_config
from .units import format_bytes

__all__ = ["main"]


def _model(spec: str):
    """A preset name / HF id, or a path to a config.json."""
    if spec.endswith(".json") or os.path.sep in spec and os.path.exists(spec):
        return model_from_config(spec, name=os.path.basename(os.path.dirname(os.path.abspath(spec))) or spec)
    return catalog.get_model(spec)


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
    log = result.details.get("log") or []
    return [f"{result.engine} would log:"] + [f"  {line}" for line in log] if log else []


def cmd_models(args) -> int:
    rows = []
    for name in catalog.list_models():
        data = catalog.preset(name)
        model = catalog.get_model(name)
        rows.append({"name": name, "hf_id": data.get("hf_id"), "layers": model.num_layers,
                     "kinds": model.kinds, "params_total": model.params_total, "source": data.get("source")})
    _print(rows, args.json, [f"{r['name']:<32} {r['hf_id'] or '':<48} {r['layers']:>4} layers  "
                             + ", ".join(f"{n} {k}" for k, n in r["kinds"].items()) for r in rows])
    return 0


def cmd_estimate(args) -> int:
    result = engines.estimate(_model(args.model), engine=args.engine, tokens=args.tokens, batch=args.batch,
                              kv_dtype=args.kv_dtype, tp=args.tp, pp=args.pp, **_options(args.option))
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
    lines += [f"note: {note}" for note in result.notes]
    lines += _engine_log(result)
    _print(result.to_dict(), args.json, lines)
    return 0


def cmd_capacity(args) -> int:
    result = engines.capacity(_model(args.model), engine=args.engine, kv_memory=args.kv_memory,
                              kv_dtype=args.kv_dtype, tp=args.tp, pp=args.pp,
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
    return 0


def cmd_fit(args) -> int:
    """Exit 0 when the workload fits, 1 when it does not (the reason and what would fit printed)."""
    from .sizing import FitError, fit
    try:
        result = fit(_model(args.model), gpu=args.gpu, num_gpus=args.num_gpus, tp=args.tp, pp=args.pp,
                     context=args.context, batch=args.batch, weight_dtype=args.weight_dtype,
                     kv_dtype=args.kv_dtype, engine=args.engine,
                     gpu_memory_utilization=args.gpu_memory_utilization, **_options(args.option))
        error = None
    except FitError as exc:
        result, error = exc.fit, str(exc)
    b = result.breakdown
    lines = [f"{result.model} on {result.num_gpus} x {result.gpu} · {result.engine} · tp {result.tp} pp {result.pp}"
             f" · weights {result.weight_dtype} · KV {result.kv_dtype}",
             f"fits: {'yes' if result.fits else 'no'} — {result.context:,} tokens x batch {result.batch or 1}",
             "per device: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in b.items()),
             f"max batch at {result.context:,} tokens: {result.max_batch}",
             f"max context at batch {result.batch or 1}: {result.max_context:,}",
             f"min GPUs: {result.min_gpus if result.min_gpus is not None else 'none up to tp 64'}"]
    if result.decode_tokens_per_s is not None:
        lines.append(f"decode bound: {result.decode_tokens_per_s:,.1f} tokens/s per sequence, "
                     f"{result.decode_tokens_per_s_aggregate:,.0f} in all")
    if result.kv_crossover_tokens is not None:
        lines.append(f"KV reads pass weight reads from {result.kv_crossover_tokens:,} tokens per sequence")
    if not result.fits and error is None:
        lines.append(f"short by {format_bytes(result.shortfall_bytes)} per device; would fit: "
                     + ("; ".join(result.suggestions) or "nothing tried"))
    lines += [f"note: {note}" for note in result.notes]
    data = result.to_dict()
    if error:
        data["error"] = error
        if not args.json:
            print(f"kvmem fit: {error}", file=sys.stderr)
    _print(data, args.json, lines)
    return 0 if result.fits else 1


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
    from .measure import ALLOCATOR_NOTE, validate

    def progress(index, total, entry):
        done = 24 * index // total
        label = f"{entry['model']} {entry['engine']}" if entry else "done"
        print(f"\r[{'#' * done}{'.' * (24 - done)}] {index}/{total} {label:<44}", end="" if entry else "\n",
              file=sys.stderr, flush=True)

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
    parser.add_argument("model", help="preset name, HF id, or path to a config.json")
    if tokens:
        parser.add_argument("--tokens", required=True, help='tokens per sequence: 4096, "32k", "128k", "1M"')
        parser.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
    parser.add_argument("--engine", default="ideal" if tokens else "vllm",
                        help=f"engine mode: {', '.join(engines.list_engines())}")
    parser.add_argument("--kv-dtype", default="auto", help="KV element format (auto = model dtype)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    parser.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                        help="an engine option, e.g. block_size=32 or type_k=q8_0 (repeatable)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvmem", description="Exact KV-cache memory for real models and engines.")
    sub = parser.add_subparsers(dest="command", required=True)
    models = sub.add_parser("models", help="list the model presets")
    models.add_argument("--json", action="store_true")
    models.set_defaults(func=cmd_models)
    est = sub.add_parser("estimate", help="KV-cache bytes of one workload")
    _add_workload(est, tokens=True)
    est.set_defaults(func=cmd_estimate)
    cap = sub.add_parser("capacity", help="what a KV memory budget holds")
    _add_workload(cap, tokens=False)
    cap.add_argument("--kv-memory", required=True, help='KV bytes on one device: "20GiB", "16GB"')
    cap.add_argument("--max-model-len", default=None, help="request length for the concurrency figure")
    cap.set_defaults(func=cmd_capacity)
    fitp = sub.add_parser("fit", help="does a workload fit on these GPUs, and how fast can it decode")
    fitp.add_argument("model", help="preset name, HF id, or path to a config.json")
    fitp.add_argument("--gpu", required=True, help='catalog name (see "kvmem gpus") or "custom:80GiB:3.35TB/s"')
    fitp.add_argument("--num-gpus", type=int, default=1, help="GPUs (default 1)")
    fitp.add_argument("--tp", type=int, default=None, help="tensor-parallel size (default: num_gpus / pp)")
    fitp.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    fitp.add_argument("--context", required=True, help='tokens per sequence: 8192, "32k", "128k"')
    fitp.add_argument("--batch", type=int, default=None, help="sequences (default: report the most that fit)")
    fitp.add_argument("--engine", default="vllm", help=f"engine mode: {', '.join(engines.list_engines())}")
    fitp.add_argument("--weight-dtype", default="auto", help="weight format: auto, bf16, fp8, awq, q4_k_m, ...")
    fitp.add_argument("--kv-dtype", default="auto", help="KV element format (auto = model dtype)")
    fitp.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="vLLM's fraction (default 0.9)")
    fitp.add_argument("--option", "-o", action="append", metavar="NAME=VALUE",
                      help="an engine or sizing option, e.g. max_num_seqs=256 (repeatable)")
    fitp.add_argument("--json", action="store_true", help="machine-readable output")
    fitp.set_defaults(func=cmd_fit)
    gpus = sub.add_parser("gpus", help="list the GPU catalog")
    gpus.add_argument("--json", action="store_true")
    gpus.set_defaults(func=cmd_gpus)
    val = sub.add_parser("validate", help="build real transformers caches with torch and check kvmem's bytes")
    val.add_argument("--device", default="auto", help="cpu, cuda (or cuda:N), or auto (cuda when available)")
    val.add_argument("--models", nargs="+", default=None, help="only the suite entries of these models")
    val.add_argument("--quick", action="store_true", help="fewer tokens per entry")
    val.add_argument("--json", action="store_true", help="one JSON array, one item per entry")
    from .oracles.command import add_arguments
    add_arguments(val)
    val.set_defaults(func=cmd_validate)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, KeyError) as exc:
        print(f"kvmem {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
