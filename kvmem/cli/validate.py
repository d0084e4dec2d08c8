"""``kvmem validate``: real transformers caches built with torch against kvmem's bytes, or
(``--engine``) kvmem against an installed engine's own code (kvmem/oracles/), or (``--reach DIR``)
what kvmem makes of every config.json under a folder, per engine mode (kvmem.reach)."""

from __future__ import annotations

import sys

from .common import emit


def cmd_validate(args) -> int:
    """Build the suite's real caches with torch and compare them with kvmem's prediction."""
    if args.reach is not None:
        return _reach(args)
    if args.engine:   # kvmem against an installed engine's own code (kvmem/oracles/)
        from ..oracles.command import run
        return run(args)
    from ..validation import ALLOCATOR_NOTE, validate

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
    emit(rows, args.json, lines)
    return 1 if failed else 0


def _reach(args) -> int:
    """kvmem.reach over --reach DIR: a table (or --json); exit 1 when the reader refuses a config or
    kvmem does not size one in some engine mode yet, 0 when every one is sized or the engine's own refusal."""
    if args.engine or args.models or args.quick:
        raise ValueError("--reach takes no --engine, --models or --quick: it runs every engine mode's rules")
    from ..reach import reach
    report = reach(args.reach, pattern=args.glob)
    if not report.entries:
        raise ValueError(f"no file named {args.glob} under {args.reach} (--glob '*.json' reads every JSON file)")
    emit(report.to_dict(), args.json, report.lines())
    return 1 if report.gaps else 0


def configure(val) -> None:
    val.set_defaults(func=cmd_validate)
    val.add_argument("--device", default="auto", help="cpu, cuda (or cuda:N), or auto (cuda when available)")
    val.add_argument("--models", nargs="+", default=None, help="only the suite entries of these models")
    val.add_argument("--quick", action="store_true", help="fewer tokens per entry")
    val.add_argument("--json", action="store_true", help="one JSON array, one item per entry")
    val.add_argument("--reach", default=None, metavar="DIR",
                     help="what kvmem makes of every config.json under DIR (an HF cache too) in every engine mode: "
                          "sized, the engine does not run it (why), or kvmem does not size it yet (exit 1)")
    val.add_argument("--glob", default="config.json", metavar="PATTERN",
                     help="with --reach: the file names read (default config.json)")
    from ..oracles.command import add_arguments
    add_arguments(val)
