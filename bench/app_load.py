"""Benchmark concurrent sessions on loopback: 1, 4 and 8 browser sessions changing inputs at once.

    .venv/bin/python bench/app_load.py --seconds 20

One server (as `make run` starts it); each session is its own headless chromium in its own
thread, on the calculator, changing Batch to a new value and waiting until the chart title
shows it, for ``--seconds``. Per level it reports the median and p95 of those waits, the
changes done, and whether the server's health check answered throughout. The 1-session level
is the single-session rerun the others are compared with, in the same run. Results go to
bench/results/app_load.json. A benchmark: it reports, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.server import browser, chromium_missing_reason, streamlit_server, wait_for_app  # noqa: E402

TITLE_HAS = ("(n) => [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
             ".some(t => t.textContent.includes('(batch ' + n + ')'))")


def session(url: str, seconds: float, start_at: float, first: int, out: list, errors: list):
    try:
        with browser() as chromium:
            page = chromium.new_page()
            page.goto(url)
            wait_for_app(page, timeout_ms=120_000)
            page.wait_for_selector(".js-plotly-plot .gtitle", timeout=120_000)
            batch = page.get_by_role("spinbutton", name="Batch")
            while time.monotonic() < start_at:
                time.sleep(0.05)
            n = first
            while time.monotonic() < start_at + seconds:
                n += 1
                batch.fill(str(n))
                begin = time.perf_counter()
                batch.press("Enter")
                page.wait_for_function(TITLE_HAS, arg=n, timeout=120_000)
                out.append(time.perf_counter() - begin)
            page.close()
    except Exception as exc:  # noqa: BLE001  (a benchmark reports failures, it does not stop)
        errors.append(f"{type(exc).__name__}: {exc}"[:200])


def health(url: str, stop: threading.Event, failures: list):
    while not stop.is_set():
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as response:
                if response.status != 200:
                    failures.append(response.status)
        except OSError as exc:
            failures.append(str(exc))
        stop.wait(1.0)


def level(url: str, sessions: int, seconds: float) -> dict:
    times, errors, failures = [], [], []
    start_at = time.monotonic() + 20 + 4 * sessions  # every session's page loaded before the clock starts
    threads = [threading.Thread(target=session, args=(url, seconds, start_at, 1000 * (i + 1), times, errors))
               for i in range(sessions)]
    stop = threading.Event()
    watcher = threading.Thread(target=health, args=(url, stop, failures))
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else None
    return {"sessions": sessions, "changes": len(times), "median_ms": 1000 * statistics.median(times) if times else None,
            "p95_ms": 1000 * p95 if p95 else None, "health_failures": len(failures), "errors": errors}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20, help="seconds of input changes per level")
    parser.add_argument("--levels", default="1,4,8", help="concurrent sessions, comma-separated")
    args = parser.parse_args(argv)
    reason = chromium_missing_reason()
    if reason:
        print(f"cannot benchmark: {reason}")
        return 2
    results = []
    with streamlit_server(timeout_s=120) as url:
        for sessions in [int(x) for x in args.levels.split(",")]:
            results.append(level(url, sessions, args.seconds))
            r = results[-1]
            print(f"{sessions} session(s): {r['changes']} changes, median {r['median_ms'] or 0:.0f} ms, "
                  f"p95 {r['p95_ms'] or 0:.0f} ms, health failures {r['health_failures']}, errors {len(r['errors'])}")
    out = ROOT / "bench" / "results" / "app_load.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seconds": args.seconds, "levels": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
