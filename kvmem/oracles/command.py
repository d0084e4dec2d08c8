"""``kvmem validate --engine llama.cpp|vllm|sglang|transformers``: kvmem against the installed engine's code.

Prints each mismatch with both sides' values and the engine version it ran; exits 1 on any
mismatch, 2 when the engine is not importable (run ``make oracles``). With ``--engine
transformers`` (``--types a,b`` to choose model types): one line per type that did not match,
with its class (wrong, refused, cannot-build); exit 1 when any is "wrong".
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("--engine", default=None, choices=("llama.cpp", "vllm", "sglang", "transformers"),
                        help="check kvmem against this installed engine's own code instead "
                             "(directed cases + --cases random architectures; needs `make oracles`; "
                             "transformers: every decoder model type, built and run)")
    parser.add_argument("--cases", type=int, default=None,
                        help="random architectures with --engine (default 100; transformers: 0)")
    parser.add_argument("--types", type=_types, default=None, metavar="A,B",
                        help="with --engine transformers: only these model types (comma-separated)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random architectures (default 0)")


def _types(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"--types needs comma-separated model types, got {text!r}")
    return names


def _progress(done: int, total: int, result) -> None:
    print(f"[{done}/{total}] {result.case or result.model_type} {result.outcome}", file=sys.stderr, flush=True)


def run(args) -> int:
    from . import validate_engine
    transformers = args.engine == "transformers"
    if getattr(args, "types", None) and not transformers:
        print("kvmem validate: error: --types is for --engine transformers", file=sys.stderr)
        return 2
    cases = args.cases if args.cases is not None else (0 if transformers else 100)
    extra = {"types": args.types, "progress": _progress} if transformers else {}
    try:
        report = validate_engine(args.engine, cases=cases, seed=args.seed, **extra)
    except (RuntimeError, ValueError) as error:
        print(f"kvmem validate: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print("\n".join(report.lines()))
    return 0 if report.passed else 1
