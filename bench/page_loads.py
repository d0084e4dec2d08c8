"""Benchmark every page's load in a real browser: a new session until the page stops changing.

    .venv/bin/python bench/page_loads.py [--visits 3]

For each page of the app, and for the floor page (bench/floor_app.py: one input, one chart),
a new browser session opens the page and the time is taken from navigation start to the
page's last DOM change, once the page has been still for a second with no script running
and no spinner or placeholder (a skeleton, while an element's code loads) on screen: the moment
its content is complete. The first visit to each page
on a fresh server pays for what the server caches (st.cache_data, e.g. the Learn page's torch
runs); the later visits are new sessions on a warm server. Target (issue 14): every page's
content complete within 2x the floor's first chart, measured in the same run. Results go to
bench/results/page_loads.json. This is a benchmark, not a test: it reports, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.server import browser, chromium_missing_reason, streamlit_server  # noqa: E402

PAGES = {"calculator": "", "compare": "compare", "fit": "fit", "overview": "overview", "strategies": "strategies",
         "validate": "validate", "learn": "learn"}
FLOOR = ROOT / "bench" / "floor_app.py"
# The time (ms from navigation start) of the page's last DOM change.
LAST_CHANGE = """
window.__lastChange = 0;
new MutationObserver(() => { window.__lastChange = performance.now(); })
  .observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""
STILL = """() => !document.querySelector('[data-testid="stStatusWidget"]')
  && !document.querySelector('[data-testid="stSpinner"]')
  && !document.querySelector('[data-testid="stSkeleton"], [data-testid="stSkeletonElement"]')
  && document.querySelector('[data-testid="stMain"]')
  && performance.now() - window.__lastChange > 1000"""


def load_ms(chromium, url: str) -> float:
    """One new session on ``url``: ms from navigation start to the last change of the page."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.add_init_script(LAST_CHANGE)
    page.goto(url)
    page.wait_for_selector('[data-testid="stMain"]', timeout=120_000)
    page.wait_for_function(STILL, timeout=180_000, polling=100)
    elapsed = page.evaluate("window.__lastChange")
    context.close()
    return elapsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", type=int, default=3, help="new sessions per page (the first on a fresh server)")
    args = parser.parse_args(argv)
    reason = chromium_missing_reason()
    if reason:
        print(f"cannot benchmark: {reason}")
        return 2
    result = {"pages": {}}
    with browser() as chromium:
        with streamlit_server(app=FLOOR) as floor_url:
            floor = [load_ms(chromium, floor_url) for _ in range(args.visits)]
        with streamlit_server() as url:
            visits = {name: [load_ms(chromium, f"{url}/{path}")] for name, path in PAGES.items()}
            for _ in range(args.visits - 1):
                for name, path in PAGES.items():
                    visits[name].append(load_ms(chromium, f"{url}/{path}"))
    floor_first_chart = statistics.median(floor)
    result["floor_ms"] = floor
    result["target_ms"] = 2 * floor_first_chart
    for name, times in visits.items():
        warm = statistics.median(times[1:]) if len(times) > 1 else None
        result["pages"][name] = {"first_visit_ms": times[0], "warm_visits_ms": times[1:], "warm_median_ms": warm}
    out = ROOT / "bench" / "results" / "page_loads.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"floor: first chart, new session, median {floor_first_chart:.0f} ms; target 2x = {2 * floor_first_chart:.0f} ms")
    for name, row in result["pages"].items():
        warm = row["warm_median_ms"]
        print(f"{name:>10}: first visit on a fresh server {row['first_visit_ms']:,.0f} ms"
              + (f"; new session, warm server, median {warm:,.0f} ms ({warm / floor_first_chart:.2f}x)" if warm else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
