"""``kvmem sweep``: models x GPUs x contexts x engines as CSV, JSON or Parquet."""

from __future__ import annotations

import sys

from .. import defaults, engines
from .common import engine_options
from .output import add_output_arguments, check_output, open_output


def cmd_sweep(args) -> int:
    """Every model x GPU x context x engine (kvmem.sweep) as CSV, JSON or Parquet; exit 0, refusals are rows."""
    from .. import tables
    from ..sizing import sweep
    fmt = "json" if args.json else args.format
    if fmt == "parquet" and not args.output:
        raise ValueError("--format parquet writes a binary file: give --output FILE")
    if args.output:
        check_output(args.output, args.force)          # before the sweep: a link or an existing file is refused
    every = lambda text: None if text.strip().lower() == "all" else text   # noqa: E731
    cells = sweep(every(args.models), every(args.gpus), contexts=args.contexts, engines=args.engines,
                  num_gpus=args.num_gpus, batch=args.batch, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                  gpu_memory_utilization=args.gpu_memory_utilization, **engine_options(args.option))
    if args.output:
        with open_output(args.output, args.force, binary=fmt == "parquet") as handle:
            tables.write_sweep(cells, handle, fmt)
    else:
        tables.write_sweep(cells, sys.stdout, fmt)
    if fmt == "json" and not args.output:
        print()
    if args.output:
        refused = sum(1 for c in cells if c.refused)
        print(f"kvmem sweep: {len(cells):,} cells ({refused:,} refused) written to {args.output}", file=sys.stderr)
    return 0


def configure(swp) -> None:
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
    add_output_arguments(swp)
    swp.add_argument("--json", action="store_true", help="the same as --format json")
    swp.set_defaults(func=cmd_sweep)
