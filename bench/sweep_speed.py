"""How long the overview takes: every preset x every catalog GPU, per engine, against kvmem.fit per cell.

    .venv/bin/python bench/sweep_speed.py [--rounds 3] [--engines vllm,sglang,llama.cpp,trtllm,hf-dynamic]
        [--sample 120]

For each engine, in one fresh interpreter per round: the whole matrix (``kvmem.sweep`` of every
preset x every catalog GPU at 8k tokens, caches cold: a new process), then ``kvmem.fit`` on
``--sample`` of the same cells (a fixed random sample), each cell's time per cell. The medians
over the rounds and their ratio are printed and written to bench/results/sweep_speed.json.
This is a benchmark, not a test: it reports, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
TIMER = """
import random, sys, time, kvmem
engine, sample = sys.argv[1], int(sys.argv[2])
start = time.perf_counter()
cells = kvmem.sweep(contexts=["8k"], engines=[engine])
matrix = time.perf_counter() - start
random.seed(0)
picked = random.sample(cells, min(sample, len(cells)))
start = time.perf_counter()
for cell in picked:
    try:
        kvmem.fit(cell.model, gpu=cell.gpu, context=cell.context, engine=engine)
    except ValueError:          # FitError, or the refusal the cell shows
        pass
fits = time.perf_counter() - start
print(len(cells), sum(1 for c in cells if c.refused), matrix, fits / len(picked))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", default="vllm,sglang,llama.cpp,trtllm,hf-dynamic")
    parser.add_argument("--sample", type=int, default=120)
    args = parser.parse_args()
    results = {}
    for engine in args.engines.split(","):
        runs = []
        for _ in range(args.rounds):
            out = subprocess.run([PYTHON, "-c", TIMER, engine, str(args.sample)], cwd=ROOT, capture_output=True,
                                 text=True, check=True).stdout.split()
            runs.append((int(out[0]), int(out[1]), float(out[2]), float(out[3])))
        cells, refused = runs[0][0], runs[0][1]
        matrix_s = statistics.median(r[2] for r in runs)
        fit_ms = statistics.median(r[3] for r in runs) * 1000
        cell_ms = matrix_s * 1000 / cells
        results[engine] = {"cells": cells, "refused": refused, "matrix_s": round(matrix_s, 2),
                           "per_cell_ms": round(cell_ms, 3), "fit_per_cell_ms": round(fit_ms, 2),
                           "fit_over_sweep": round(fit_ms / cell_ms, 1)}
        print(f"{engine:<11} {cells} cells ({refused} refused): whole matrix {matrix_s:.2f} s, {cell_ms:.2f} ms per "
              f"cell; kvmem.fit {fit_ms:.2f} ms per cell ({fit_ms / cell_ms:.1f}x)")
    out = ROOT / "bench" / "results" / "sweep_speed.json"
    out.write_text(json.dumps({"rounds": args.rounds, "context": 8192, "sample": args.sample, "engines": results},
                              indent=2) + "\n")


if __name__ == "__main__":
    main()
