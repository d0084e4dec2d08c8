"""``kvmem validate --engine llama.cpp|vllm|sglang``: kvmem against the installed engine's code.

Prints each mismatch with both sides' values and the engine version it ran; exits 1 on any
mismatch, 2 when the engine is not importable (run ``make oracles``).
"""

from __future__ import annotations

import json
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("--engine", default=None, choices=("llama.cpp", "vllm", "sglang"),
                        help="check kvmem against this installed engine's own code instead "
                             "(directed cases + --cases random architectures; needs `make oracles`)")
    parser.add_argument("--cases", type=int, default=100, help="random architectures with --engine (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random architectures (default 0)")


def run(args) -> int:
    from . import validate_engine
    try:
        report = validate_engine(args.engine, cases=args.cases, seed=args.seed)
    except RuntimeError as error:
        print(f"kvmem validate: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print("\n".join(report.lines()))
    return 0 if report.passed else 1
