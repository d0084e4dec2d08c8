"""``kvmem plan`` (the launch command that realises a fitting workload) and ``kvmem report``
(the whole plan as Markdown or JSON)."""

from __future__ import annotations

import json
import shlex
import sys

from .common import add_fit_arguments, emit, engine_numbers_lines, engine_refusal, fit_options, read_model
from .output import add_output_arguments, check_output, open_output


def cmd_plan(args) -> int:
    """Exit 0 with the command; 1 when there is none (the workload does not fit, or a setting has no flag)."""
    from ..launch import PlanRefused, plan
    if args.disaggregate:
        return _disaggregated(args)
    if args.llama_args is not None:
        return _own_flags(args)
    if "," in args.gpu:
        return _mixed_cards(args)
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


def _mixed_cards(args) -> int:
    """--gpu A,B: llama.cpp's command for kvmem's placement over the cards listed (kvmem.cli.fit
    mixed_cards_answer) at the --target workload; other engines run one kind of card (kvmem.plan)."""
    from ..engines import engine_spec
    from .fit import mixed_cards_answer
    if "offload" not in engine_spec(args.engine).panels:
        raise ValueError(f"--gpu {args.gpu}: mixed cards are laid out by llama.cpp's offload placement only; "
                         f"engine {args.engine} runs one kind of card: give one --gpu and --num-gpus")
    model = read_model(args.model, args.revision)
    got = mixed_cards_answer(model, args)
    context, batch = got["context"], got["batch"] or 1
    if args.target == "max_batch":
        batch = got["max_batch"]
    elif args.target == "max_context":
        context = got["max_context"]
    why = ("no placement runs" if not got["fits"] and args.target == "workload" else
           f"not one sequence of {context:,} tokens has a placement" if batch == 0 else
           f"no context of 256 tokens or more has a placement at batch {batch}" if context == 0 else None)
    if why:
        message = f"{model.name} on {' + '.join(got['gpus'])} ({got['engine']}): {why}"
        print(f"kvmem plan: refused: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": message, "type": "PlanRefused", "command": "plan", "exit_code": 1}))
        return 1
    p = got["placed"](context, batch)
    lines = [f"# {got['engine']} on {' + '.join(got['gpus'])}: {batch:,} x {context:,} tokens ({args.target})",
             p.command_best, ""] + [f"note: {note}" for note in p.notes]
    emit({"model": model.name, "gpu": got["gpus"], "engine": got["engine"], "context": context, "batch": batch,
          "target": args.target, "command": p.command_best, "llamacpp_offload": p.to_dict()}, args.json, lines)
    return 0


def _own_flags(args) -> int:
    """--llama-args: the command of the user's own flags, sized (kvmem.cli.fit own_flags_answer, the record kvmem
    fit prints); exit 1 when they do not fit. The flags fix the placement: --target max_batch / max_context is
    answered with the number, as -np / -c to give."""
    from ..engines.llamacpp.server_slots import target_answer
    from .fit import own_flags_answer
    model = read_model(args.model, args.revision)
    got = own_flags_answer(model, args)
    if args.target != "workload" or not got.fits:
        message = (f"{model.name}: your flags do not fit {got.batch} x {got.context:,} tokens on "
                   f"{' + '.join(got.gpus)} (kvmem fit --llama-args shows each device)" if not got.fits else
                   f"--target {args.target} with --llama-args: your flags' placement holds "
                   + target_answer(got, args.target))
        print(f"kvmem plan: refused: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": message, "type": "PlanRefused", "command": "plan", "exit_code": 1,
                              "own_flags": got.to_dict()}))
        return 1
    lines = [f"# {got.engine} on {' + '.join(got.gpus)}: your flags, {got.batch:,} x {got.context:,} tokens",
             got.command, ""] + got.lines()
    emit({"model": model.name, "gpu": list(got.gpus), "engine": got.engine, "context": got.context,
          "batch": got.batch, "target": args.target, "command": got.command, "own_flags": got.to_dict()},
         args.json, lines)
    return 0


def _disaggregated(args) -> int:
    """--disaggregate: a prefill pool and a decode pool (kvmem.disagg), one command per role."""
    from ..disagg import disaggregate
    from ..units import parse_tokens
    if args.output_tokens is None or args.request_rate is None:
        raise ValueError("--disaggregate needs --output-tokens (of --context) and --request-rate (requests a second)")
    context, output = parse_tokens(args.context), parse_tokens(args.output_tokens)
    if output >= context:
        raise ValueError(f"--output-tokens ({output:,}) must be below --context ({context:,}): the prompt is the rest")
    if args.tp is not None or args.pp != 1 or args.batch is not None or args.target != "workload":
        raise ValueError("--disaggregate sizes each role itself: give --prefill-gpus / --decode-gpus, not --tp, "
                         "--pp, --batch or --target")
    result = disaggregate(read_model(args.model, args.revision), gpu=args.gpu, engine=args.engine,
                          prompt_tokens=context - output, output_tokens=output, request_rate=args.request_rate,
                          prefill_gpus=args.prefill_gpus, decode_gpus=args.decode_gpus,
                          prefill_tokens_per_s=args.prefill_tokens_per_s, weight_dtype=args.weight_dtype,
                          kv_dtype=args.kv_dtype, **fit_options(args))
    gib = 1 << 30
    lines = [f"# {result.model} on {result.gpu} ({result.engine}), disaggregated: {result.request_rate} requests/s "
             f"of {result.prompt_tokens:,} + {result.output_tokens:,} tokens: {result.gpus} GPUs"]
    for role in (result.prefill, result.decode):
        lines += ["", f"## {role.role}: {role.instances} x {role.gpus_per_instance} GPUs ({role.gpus}); "
                      f"{role.sequences_needed:,} sequences at once, {role.sequences_per_instance:,} an instance",
                  f"per GPU: weights {role.weights_bytes / gib:.2f} GiB, KV pool {role.kv_pool_bytes / gib:.2f} GiB"
                  + (f" ({role.kv_tokens_per_gpu:,} tokens)" if role.kv_tokens_per_gpu else "")
                  + f", activations {role.activations_bytes / gib:.2f} GiB",
                  shlex.join(role.command) if role.command else "(no command)"]
        lines += [f"note: {note}" for note in role.notes]
    lines += [f"note: {note}" for note in result.notes]
    emit(result.to_dict(), args.json, lines)
    return 0


def cmd_report(args) -> int:
    """The whole plan as Markdown or JSON (kvmem.report); exit 0 when the workload fits, 1 when it does not."""
    from ..export import report
    from .compare import one_kind_of_card
    one_kind_of_card(args, "report", "its document is kvmem.fit of one card kind, which kvmem.rerun_report runs again")
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
    dis = planp.add_argument_group("disaggregated prefill/decode (kvmem.disagg)")
    dis.add_argument("--disaggregate", action="store_true",
                     help="a prefill pool and a decode pool, one command per role; --context is prompt + output")
    dis.add_argument("--output-tokens", default=None, help="output tokens of each request (the prompt: the rest)")
    dis.add_argument("--request-rate", default=None, help="requests a second")
    dis.add_argument("--prefill-gpus", type=int, default=None, help="GPUs a prefill instance (default: the fewest)")
    dis.add_argument("--decode-gpus", type=int, default=None, help="GPUs a decode instance (default: the fewest)")
    dis.add_argument("--prefill-tokens-per-s", type=float, default=None,
                     help="measured prompt tokens a second of one prefill instance (default: from FLOPs, MFU 0.4)")
    from .fit import add_llama_args
    add_llama_args(planp)
    planp.set_defaults(func=cmd_plan)


def configure_report(rep) -> None:
    add_fit_arguments(rep)
    rep.add_argument("--format", default=None, choices=("md", "json"),
                     help="md (default) or json (the document kvmem.rerun_report runs again); default json "
                          "for an --output ending in .json")
    add_output_arguments(rep)
    rep.set_defaults(func=cmd_report)
