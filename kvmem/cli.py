"""The ``kvmem`` command line: models, estimate, capacity (and fit, gpus, validate).

    kvmem models [--json]
    kvmem estimate llama-3.1-8b --tokens 128k --batch 8 --engine vllm --kv-dtype fp8 [--json]
    kvmem estimate ./config.json --tokens 32k --engine llama.cpp --option type_k=q8_0
    kvmem capacity llama-3.1-8b --kv-memory 20GiB --engine vllm --max-model-len 32k [--json]
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
    _print(result.to_dict(), args.json, lines)
    return 0


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
