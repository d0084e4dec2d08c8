"""``kvmem estimate`` (KV bytes of one workload) and ``kvmem capacity`` (what a KV budget holds)."""

from __future__ import annotations

from .. import defaults, engines
from ..units import format_bytes
from .common import MODEL_HELP, emit, engine_log, engine_options, engine_refusal, parse_kv_memory, read_model


def cmd_estimate(args) -> int:
    model = read_model(args.model, args.revision)
    result = engines.engine_estimate(model, engine=args.engine, tokens=args.tokens,
                                     batch=args.batch, kv_dtype=args.kv_dtype, tp=args.tp, pp=args.pp,
                                     **engine_options(args.option))
    lines = [f"{result.model} · {result.engine} · {result.tokens:,} tokens × batch {result.batch} · "
             f"KV {result.kv_dtype} · tp {result.tp} pp {result.pp}",
             f"KV cache per device: {result.kv_bytes:,} B = {format_bytes(result.kv_bytes)} "
             f"({format_bytes(result.kv_bytes, binary=False)})",
             f"  K {format_bytes(result.k_bytes)}, V {format_bytes(result.v_bytes)}"]
    if result.state_bytes:
        lines.append(f"Recurrent state per device: {format_bytes(result.state_bytes)}")
        lines.append(f"Total per device: {result.total_bytes:,} B = {format_bytes(result.total_bytes)} "
                     "(KV + recurrent state)")
    if result.peak_bytes != result.kv_bytes:
        lines.append(f"Transient peak: {format_bytes(result.peak_bytes)}")
    devices = result.tp * result.pp
    if result.state_bytes_all_devices:
        lines.append(f"All {devices} device{'s' if devices != 1 else ''}: "
                     f"{format_bytes(result.total_bytes_all_devices)} (KV {format_bytes(result.kv_bytes_all_devices)}"
                     f" + recurrent state {format_bytes(result.state_bytes_all_devices)})")
    else:
        lines.append(f"All {devices} device{'s' if devices != 1 else ''}: {format_bytes(result.kv_bytes_all_devices)}")
    lines.append(f"model: {model.describe()}")
    lines += [f"config: {line}" for line in (model.reading.lines() if model.reading else ())]
    lines += [f"note: {note}" for note in result.notes]
    lines += engine_log(result)
    emit(result.to_dict(), args.json, lines)
    return engine_refusal(result, "estimate")


def cmd_capacity(args) -> int:
    result = engines.capacity(read_model(args.model, args.revision), engine=args.engine,
                              kv_memory=parse_kv_memory(args.kv_memory), kv_dtype=args.kv_dtype, tp=args.tp, pp=args.pp,
                              max_model_len=args.max_model_len, **engine_options(args.option))
    lines = [f"{result.model} · {result.engine} · KV memory {format_bytes(result.kv_memory)}",
             f"blocks: {result.blocks:,} (block size {result.block_size})",
             f"tokens: {result.tokens:,}"]
    if result.max_concurrency is not None:
        lines.append(f"maximum concurrency: {result.max_concurrency:.2f}x")
    if result.longest_request_tokens is not None:
        lines.append(f"longest single request: {result.longest_request_tokens:,} tokens")
    lines += [f"note: {note}" for note in result.notes]
    lines += engine_log(result)
    emit(result.to_dict(), args.json, lines)
    return engine_refusal(result, "capacity")


def add_workload(parser, *, tokens: bool):
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


def configure_estimate(est) -> None:
    add_workload(est, tokens=True)
    est.set_defaults(func=cmd_estimate)


def configure_capacity(cap) -> None:
    add_workload(cap, tokens=False)
    cap.add_argument("--kv-memory", required=True,
                     help='KV bytes on one device, with a unit: "20GiB", "16GB" (fractional bytes rounded down)')
    cap.add_argument("--max-model-len", default=None, help="request length for the concurrency figure")
    cap.set_defaults(func=cmd_capacity)
