"""The full sweep of kvmem.oracles.field_effects: every (transformers decoder type, refused field) pair
sweep_pairs lists, each changed, built and run with transformers; one line per pair, then the counts.

    .venv/bin/python tools/field_effects.py [MODEL_TYPE ...] > out.txt

Its measured output is in docs/research/new_families_c.md."""

import sys
import time
import warnings
from collections import Counter

from kvmem.oracles.field_effects import run_pairs, sweep_pairs

if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    pairs = sweep_pairs(sys.argv[1:] or None)
    results = run_pairs(pairs, progress=lambda _i, _n, r: print(r.line(), flush=True))
    counts = Counter(r.outcome for r in results)
    print(f"# {len(results)} pairs in {time.perf_counter() - started:.0f} s: "
          + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())))
