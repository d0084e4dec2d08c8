"""Benchmark the app in a real browser: cold start to first chart, and rerun latency.

    make bench          (or: .venv/bin/python bench/app_latency.py --runs 3 --reruns 15)

Cold start: from `streamlit run` to the calculator's first plotly chart on screen, in a fresh
server and browser each run. Rerun: after changing the batch input, until the chart title shows
the new batch — the latency a user feels. Medians are printed and written to
bench/results/app_latency.json. Targets: rerun median < 150 ms, cold start median < 4 s.
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


def cold_start(chromium) -> float:
    start = time.perf_counter()
    with streamlit_server() as url:
        page = chromium.new_page()
        page.goto(url)
        page.wait_for_selector(".js-plotly-plot .gtitle", timeout=120_000)
        elapsed = time.perf_counter() - start
        page.close()
    return elapsed


def reruns(chromium, count: int) -> list[float]:
    times = []
    with streamlit_server() as url:
        page = chromium.new_page()
        page.goto(url)
        wait_for_app(page)
        page.wait_for_selector(".js-plotly-plot .gtitle", timeout=120_000)
        batch = page.get_by_role("spinbutton", name="Batch")
        for i in range(count + 2):  # two warm-up changes
            n = 2 + i % 7
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
    with browser() as chromium:
        colds = [cold_start(chromium) for _ in range(args.runs)]
        rerun_times = reruns(chromium, args.reruns)
    result = {"cold_start_s": colds, "cold_start_median_s": statistics.median(colds),
              "rerun_s": rerun_times, "rerun_median_ms": 1000 * statistics.median(rerun_times),
              "targets": {"rerun_median_ms": 150, "cold_start_median_s": 4}}
    out = ROOT / "bench" / "results" / "app_latency.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"cold start to first chart: median {result['cold_start_median_s']:.2f} s over {args.runs} runs "
          f"(target < 4 s)")
    print(f"rerun after an input change: median {result['rerun_median_ms']:.0f} ms over {len(rerun_times)} "
          f"changes (target < 150 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
