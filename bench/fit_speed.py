"""How long one ``kvmem.fit`` takes, against the code of a baseline commit in the same run.

    .venv/bin/python bench/fit_speed.py [--baseline COMMIT] [--rounds 5] [--fits 40]

The workload is the README's vLLM 70B fit (llama-3.3-70b on 2 x h100-sxm-80gb, 32k tokens x 16
sequences, fp8 KV and weights). The baseline's ``kvmem/`` is exported with ``git archive`` into
a temporary folder; each round runs the baseline and the working tree in fresh interpreters, one
after the other, each timing ``--fits`` fits after one warm-up (the model is read once), and
the medians over the rounds are compared. Target (issue 23 item 23): <= 5 ms per fit. Results
go to bench/results/fit_speed.json. This is a benchmark, not a test: it reports, it does not assert.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
BASELINE = "782fb63"   # the tree before fit's caching (issue 23 item 23)
TIMER = """
import sys, time, kvmem
m = kvmem.get_model("llama-3.3-70b")
kw = dict(gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=16, kv_dtype="fp8", weight_dtype="fp8", engine="vllm")
def one():
    try:
        return kvmem.fit(m, **kw)
    except kvmem.FitError as exc:
        return exc.fit
first = one()
times = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    one()
    times.append(time.perf_counter() - start)
times.sort()
print(times[len(times) // 2] * 1000, first.fits, first.max_batch, first.max_context)
"""


def per_fit_ms(tree: str, fits: int) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run([PYTHON, "-c", TIMER, str(fits)], cwd=tree, env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), " ".join(out[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fits", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as old:
        archive = subprocess.run(["git", "archive", args.baseline, "kvmem"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        tarfile.open(fileobj=io.BytesIO(archive)).extractall(old, filter="data")
        times = {"baseline": [], "now": []}
        answers = {}
        for _ in range(args.rounds):
            for name, tree in (("baseline", old), ("now", str(ROOT))):
                ms, answer = per_fit_ms(tree, args.fits)
                times[name].append(ms)
                answers[name] = answer
    base, now = statistics.median(times["baseline"]), statistics.median(times["now"])
    same = answers["baseline"] == answers["now"]
    print(f"baseline {args.baseline}: {base:.2f} ms per fit; now: {now:.2f} ms per fit; "
          f"{base / now:.1f}x faster; same answer (fits, max_batch, max_context): {same} ({answers['now']})")
    out = ROOT / "bench" / "results" / "fit_speed.json"
    out.write_text(json.dumps({"baseline": args.baseline, "rounds": args.rounds, "fits_per_round": args.fits,
                               "baseline_ms": round(base, 2), "now_ms": round(now, 2),
                               "speedup": round(base / now, 2), "same_answer": same,
                               "answer": answers["now"], "target_ms": 5}, indent=2) + "\n")


if __name__ == "__main__":
    main()
