"""``kvmem compare`` (and ``kvmem fit --engine all``): one workload under every engine mode side by
side ("which engine?"): fits, max batch, max context, the engine's concurrency, the command."""

from __future__ import annotations

from .common import add_fit_arguments, emit, fit_options, read_model


def engines_asked(text: str) -> list[str] | None:
    """--engine's value for a comparison: "all" (None: every engine mode that sizes hardware) or a list."""
    from ..engines import engine_spec
    if text.strip().lower() == "all":
        return None
    return [engine_spec(name.strip()).name for name in text.split(",") if name.strip()]


def one_kind_of_card(args, command: str, why: str) -> None:
    """--gpu A,B (mixed cards) refused by a command that sizes one kind of card, naming those that lay them out."""
    if "," in args.gpu:
        raise ValueError(f"--gpu {args.gpu} lists mixed cards; kvmem {command} takes one kind of card (--gpu NAME "
                         f"--num-gpus N): {why}. Mixed cards are laid out by llama.cpp's offload placement in kvmem "
                         f"fit and kvmem plan: kvmem fit {args.model} --gpu {args.gpu} --engine llama.cpp")


def cmd_compare(args) -> int:
    """Exit 0 when the workload fits under at least one engine, 1 when under none."""
    from ..engine_choice import engine_rows
    one_kind_of_card(args, "compare (fit --engine all)",
                     "it sizes every engine mode on the same cards, and only llama.cpp runs mixed ones")
    rows = engine_rows(read_model(args.model, args.revision), engines=engines_asked(args.engine), gpu=args.gpu,
                       num_gpus=args.num_gpus, tp=args.tp, pp=args.pp, context=args.context, batch=args.batch,
                       weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                       gpu_memory_utilization=args.gpu_memory_utilization, **fit_options(args))
    wanted = f"batch {args.batch:,}" if args.batch else "the most sequences that fit"
    lines = [f"{args.model} on {args.num_gpus} x {args.gpu} at {args.context} tokens, {wanted}:", ""]
    table = [("engine", "fits", "max batch", "max context", "concurrency", "command / why none")]
    for r in rows:
        fits = "refused" if r.fits is None else "yes" if r.fits else "no"
        why = r.command or r.refused or r.no_command or ""
        table.append((r.engine, fits, _n(r.max_batch), _n(r.max_context),
                      "—" if r.max_concurrency is None else f"{r.max_concurrency:.2f}x", why))
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row[:5], widths, strict=True)) + "  " + row[5]
              for row in table]
    given = sorted({name for r in rows for name in r.options})
    if given:
        lines += ["", "options given ran on the engines that declare them: "
                  + "; ".join(f"{r.engine}: {', '.join(r.options) or 'none'}" for r in rows)]
    emit({"rows": [r.to_dict() for r in rows]}, args.json, lines)
    return 0 if any(r.fits for r in rows) else 1


def _n(value) -> str:
    return "—" if value is None else f"{value:,}"


def configure(parser) -> None:
    add_fit_arguments(parser)
    engine = parser._option_string_actions["--engine"]
    engine.default, engine.help = "all", 'the engine modes compared: "all" (default) or a list such as vllm,sglang'
    parser.set_defaults(func=cmd_compare)
