"""Benchmark the app in a real browser: cold start to first chart, and rerun latency.

    make bench          (or: .venv/bin/python bench/app_latency.py --runs 3 --reruns 15)

Cold start: from `streamlit run` to the calculator's first plotly chart on screen, in a fresh
server each run. Rerun: after changing the batch input, until the chart title shows the new
batch — the latency a user feels. The same two numbers are measured, interleaved, for a floor:
a one-widget, one-chart Streamlit page (bench/floor_app.py), so a reader can tell what the
machine and Streamlit cost from what kvmem's pages add. Medians are printed and written to
bench/results/app_latency.json. Targets (issue 14), against the floor in the same run: rerun
median <= 1.5x the floor's, new session to first chart <= 1.5x the floor's.
This is a benchmark, not a test: it reports, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.server import browser, chromium_missing_reason, streamlit_server, wait_for_app  # noqa: E402

TITLE_HAS = ("() => [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
             ".some(t => t.textContent.includes('(batch {n})'))")


FLOOR = ROOT / "bench" / "floor_app.py"


def cold_start(chromium, app) -> float:
    start = time.perf_counter()
    with streamlit_server(app=app) as url:
        page = chromium.new_page()
        page.goto(url)
        page.wait_for_selector(".js-plotly-plot .gtitle", timeout=120_000)
        elapsed = time.perf_counter() - start
        page.close()
    return elapsed


def reruns(chromium, count: int, app) -> list[float]:
    times = []
    with streamlit_server(app=app) as url:
        page = chromium.new_page()
        page.goto(url)
        wait_for_app(page)
        page.wait_for_selector(".js-plotly-plot .gtitle", timeout=120_000)
        batch = page.get_by_role("spinbutton", name="Batch")
        for i in range(count + 2):  # two warm-up changes
            n = 2 + i  # a new value every time: nothing a cache could have kept
            batch.fill(str(n))
            start = time.perf_counter()
            batch.press("Enter")
            page.wait_for_function(TITLE_HAS.replace("{n}", str(n)), timeout=60_000)
            if i >= 2:
                times.append(time.perf_counter() - start)
        page.close()
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="cold starts")
    parser.add_argument("--reruns", type=int, default=15, help="input changes")
    args = parser.parse_args(argv)
    reason = chromium_missing_reason()
    if reason:
        print(f"cannot benchmark: {reason}")
        return 2
    apps = {"kvmem": ROOT / "app.py", "floor": FLOOR}
    colds = {name: [] for name in apps}
    with browser() as chromium:
        for _ in range(args.runs):
            for name, app in apps.items():
                colds[name].append(cold_start(chromium, app))
        rerun_times = {name: reruns(chromium, args.reruns, app) for name, app in apps.items()}
    result = {}
    for name in apps:
        result[name] = {"cold_start_s": colds[name], "cold_start_median_s": statistics.median(colds[name]),
                        "rerun_s": rerun_times[name], "rerun_median_ms": 1000 * statistics.median(rerun_times[name])}
    result["targets"] = {"rerun_vs_floor": 1.5, "cold_start_vs_floor": 1.5}
    result["ratios"] = {"rerun_vs_floor": result["kvmem"]["rerun_median_ms"] / result["floor"]["rerun_median_ms"],
                        "cold_start_vs_floor": result["kvmem"]["cold_start_median_s"]
                        / result["floor"]["cold_start_median_s"]}
    out = ROOT / "bench" / "results" / "app_latency.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for name in apps:
        print(f"{name:>6}: cold start to first chart median {result[name]['cold_start_median_s']:.2f} s "
              f"({args.runs} runs); rerun after an input change median {result[name]['rerun_median_ms']:.0f} ms "
              f"({args.reruns} changes)")
    print(f"kvmem / floor: rerun {result['ratios']['rerun_vs_floor']:.2f}x, cold start "
          f"{result['ratios']['cold_start_vs_floor']:.2f}x (targets: 1.5x each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
