"""How long a ``kvmem`` command takes, as a ratio to a bare ``python -c pass`` in the same run.

    .venv/bin/python bench/cli_startup.py [--runs 15]

Each run starts a fresh interpreter (the venv's python) for the floor and for each command,
interleaved, and the medians are compared. The commands run as the ``kvmem`` console script
pip writes (what a user types); ``python -m kvmem`` adds runpy. Bytecode is written and read as a user's install
does (``PYTHONDONTWRITEBYTECODE`` is unset; the .pyc files go to a temporary
``PYTHONPYCACHEPREFIX``, after one warm-up run of each command), so the figure is what a user's
second and later commands cost. Target (issue 23 item 22): ``estimate`` and ``capacity`` within
2x the floor. Results go to bench/results/cli_startup.json. This is a benchmark, not a test: it
reports, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
KVMEM = str(ROOT / ".venv" / "bin" / "kvmem")   # the console script pip writes: what a user types
COMMANDS = {
    "floor: python -c pass": ["-c", "pass"],
    "kvmem estimate": [KVMEM, "estimate", "llama-3.1-8b", "--tokens", "8k"],
    "kvmem capacity": [KVMEM, "capacity", "llama-3.1-8b", "--kv-memory", "20GiB"],
    "kvmem --help": [KVMEM, "--help"],
    "python -m kvmem estimate": ["-m", "kvmem", "estimate", "llama-3.1-8b", "--tokens", "8k"],
    # what any command of a stdlib-only CLI whose records are frozen dataclasses imports before
    # its own first line: the floor under the target
    "stdlib: argparse json fractions": ["-c", "import argparse, json, fractions"],
    "stdlib: ... + dataclasses": ["-c", "import argparse, json, fractions, dataclasses"],
}


def seconds(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([PYTHON, *argv], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as cache:
        env["PYTHONPYCACHEPREFIX"] = cache
        for argv in COMMANDS.values():           # warm-up: writes the bytecode
            seconds(argv, env)
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(args.runs):
            for name, argv in COMMANDS.items():
                times[name].append(seconds(argv, env))
    floor = statistics.median(times["floor: python -c pass"])
    rows = {name: {"median_ms": round(statistics.median(t) * 1000, 1), "ratio_to_floor":
                   round(statistics.median(t) / floor, 2)} for name, t in times.items()}
    for name, row in rows.items():
        print(f"{name:28} {row['median_ms']:7.1f} ms  {row['ratio_to_floor']:5.2f}x the floor")
    out = ROOT / "bench" / "results" / "cli_startup.json"
    out.write_text(json.dumps({"runs": args.runs, "python": PYTHON, "results": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
