"""``kvmem plan`` (the launch command that realises a fitting workload) and ``kvmem report``
(the whole plan as Markdown or JSON)."""

from __future__ import annotations

import json
import sys

from .common import (add_fit_arguments, emit, engine_numbers_lines, engine_refusal, fit_options,
                     read_model)
from .output import add_output_arguments, check_output, open_output


def cmd_plan(args) -> int:
    """Exit 0 with the command; 1 when there is none (the workload does not fit, or a setting has no flag)."""
    from ..launch import PlanRefused, plan
    try:
        result = plan(read_model(args.model, args.revision), gpu=args.gpu, num_gpus=args.num_gpus, tp=args.tp,
                      pp=args.pp, context=args.context, batch=args.batch, target=args.target,
                      weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, engine=args.engine,
                      gpu_memory_utilization=args.gpu_memory_utilization, **fit_options(args))
    except PlanRefused as exc:
        print(f"kvmem plan: refused: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": str(exc), "type": "PlanRefused", "command": "plan", "exit_code": 1}))
        return 1
    lines = [f"# {result.release}: {result.batch:,} x {result.context:,} tokens ({result.target})", result.command, ""]
    width = max(len(f.shell) for f in result.flags)
    lines += [f"  {f.shell:<{width}}  # {f.reason}" for f in result.flags]
    for name, text in result.files.items():
        lines += ["", f"# {name}:"] + text.rstrip("\n").split("\n")
    lines += engine_numbers_lines(result.fit.engine_numbers)
    emit(result.to_dict(), args.json, lines)
    return 0


def cmd_report(args) -> int:
    """The whole plan as Markdown or JSON (kvmem.report); exit 0 when the workload fits, 1 when it does not."""
    from ..export import report
    fmt = "json" if args.json else args.format or ("json" if (args.output or "").endswith(".json") else "md")
    if args.output:
        check_output(args.output, args.force)          # before the report: a link or an existing file is refused
    result = report(read_model(args.model, args.revision), gpu=args.gpu, num_gpus=args.num_gpus, tp=args.tp, pp=args.pp,
                    context=args.context, batch=args.batch, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                    engine=args.engine, gpu_memory_utilization=args.gpu_memory_utilization,
                    **fit_options(args))
    text = result.to_json() if fmt == "json" else result.to_markdown()
    if args.output:
        with open_output(args.output, args.force) as handle:
            handle.write(text)
        print(f"kvmem report: {fmt} report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0 if result.fit.fits and not engine_refusal(result.fit, "report") else 1


def configure_plan(planp) -> None:
    add_fit_arguments(planp)
    planp.add_argument("--target", default="workload", choices=("workload", "max_batch", "max_context"),
                       help="workload: this --batch (default 1) at --context; max_batch: the most sequences of "
                            "--context; max_context: the longest context for --batch")
    planp.set_defaults(func=cmd_plan)


def configure_report(rep) -> None:
    add_fit_arguments(rep)
    rep.add_argument("--format", default=None, choices=("md", "json"),
                     help="md (default) or json (the document kvmem.rerun_report runs again); default json "
                          "for an --output ending in .json")
    add_output_arguments(rep)
    rep.set_defaults(func=cmd_report)
