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
import contextlib
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


# Installed before the app's own scripts: timestamps (performance.now) of the Enter key, of each
# websocket message (and its size), of the chart title's change, and of the next frame painted
# after it (a requestAnimationFrame, then a task: the frame has been produced).
TIMELINE = """
window.__kv = [];
const NativeSocket = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new NativeSocket(...args);
  socket.addEventListener('message', e => window.__kv.push(['message', performance.now(), e.data.byteLength || e.data.size || 0]));
  return socket;
};
window.WebSocket.prototype = NativeSocket.prototype;
Object.assign(window.WebSocket, NativeSocket);
document.addEventListener('keydown', e => { if (e.key === 'Enter') window.__kv.push(['enter', performance.now(), 0]); },
                          true);
new MutationObserver(() => {
  const titles = [...document.querySelectorAll('.js-plotly-plot .gtitle')].map(t => t.textContent).join('|');
  if (titles === window.__kvTitles) return;
  window.__kvTitles = titles;
  window.__kv.push(['title', performance.now(), 0]);
  requestAnimationFrame(() => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => window.__kv.push(['paint', performance.now(), 0]);
    channel.port2.postMessage(0);
  });
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def _timeline(events) -> dict:
    """One change's breakdown, in ms from the Enter key: first and last websocket message, the
    title's change and the frame painted after it; messages and bytes received."""
    enter = next(t for kind, t, _ in events if kind == "enter")
    messages = [(t - enter, size) for kind, t, size in events if kind == "message" and t >= enter]
    first = {kind: t - enter for kind, t, _ in reversed(events) if kind in ("title", "paint") and t >= enter}
    return {"first_message_ms": messages[0][0], "last_message_ms": messages[-1][0], "messages": len(messages),
            "bytes": sum(size for _, size in messages), "title_ms": first["title"], "paint_ms": first["paint"]}


def reruns(chromium, count: int, apps: dict) -> dict:
    """``count`` input changes on each app, alternating between them (both servers up at once), so
    that the machine's load drifts over both alike. Per app: the harness's seconds (press Enter ->
    the predicate sees the new title) and each change's in-page timeline."""
    with contextlib.ExitStack() as stack:
        pages = {}
        for name, app in apps.items():
            url = stack.enter_context(streamlit_server(app=app))
            page = chromium.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(TIMELINE)
            page.goto(url)
            wait_for_app(page)
            page.wait_for_selector(".js-plotly-plot .gtitle", timeout=120_000)
            pages[name] = page
        results = {name: {"seconds": [], "timelines": []} for name in apps}
        for i in range(count + 2):  # two warm-up changes
            n = 2 + i  # a new value every time: nothing a cache could have kept
            order = list(pages.items()) if i % 2 == 0 else list(pages.items())[::-1]
            for name, page in order:
                page.bring_to_front()
                batch = page.get_by_role("spinbutton", name="Batch")
                batch.fill(str(n))
                page.evaluate("window.__kv = []")
                start = time.perf_counter()
                batch.press("Enter")
                page.wait_for_function(TITLE_HAS.replace("{n}", str(n)), timeout=60_000)
                elapsed = time.perf_counter() - start
                page.wait_for_timeout(300)  # the paint mark lands a frame later
                if i >= 2:
                    results[name]["seconds"].append(elapsed)
                    results[name]["timelines"].append(_timeline(page.evaluate("window.__kv")))
        return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="cold starts (0: reruns only)")
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
        changes = reruns(chromium, args.reruns, apps)
    result = {}
    for name in apps:
        timelines = changes[name]["timelines"]
        result[name] = {"cold_start_s": colds[name],
                        "cold_start_median_s": statistics.median(colds[name]) if colds[name] else None,
                        "rerun_s": changes[name]["seconds"],
                        "rerun_median_ms": 1000 * statistics.median(changes[name]["seconds"]),
                        "timeline_median": {field: statistics.median(t[field] for t in timelines)
                                            for field in timelines[0]},
                        "timelines": timelines}
    result["targets"] = {"rerun_vs_floor": 1.5, "cold_start_vs_floor": 1.5}
    paint = {name: result[name]["timeline_median"]["paint_ms"] for name in apps}
    result["ratios"] = {"rerun_vs_floor": result["kvmem"]["rerun_median_ms"] / result["floor"]["rerun_median_ms"],
                        "paint_vs_floor": paint["kvmem"] / paint["floor"],
                        "cold_start_vs_floor": result["kvmem"]["cold_start_median_s"]
                        / result["floor"]["cold_start_median_s"] if args.runs else None}
    out = ROOT / "bench" / "results" / "app_latency.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    ratios = result["ratios"]
    for name in apps:
        cold = result[name]["cold_start_median_s"]
        print(f"{name:>6}: " + (f"cold start to first chart median {cold:.2f} s ({args.runs} runs); " if cold else "")
              + f"rerun after an input change median {result[name]['rerun_median_ms']:.0f} ms ({args.reruns} changes)")
    for name in apps:
        med = result[name]["timeline_median"]
        print(f"{name:>6}: in the page, from Enter: first message {med['first_message_ms']:.0f} ms, last "
              f"{med['last_message_ms']:.0f} ms ({med['messages']:.0f} messages, {med['bytes']:,.0f} B), "
              f"chart title {med['title_ms']:.0f} ms, painted {med['paint_ms']:.0f} ms")
    print(f"kvmem / floor: rerun {ratios['rerun_vs_floor']:.2f}x (painted {ratios['paint_vs_floor']:.2f}x)"
          + (f", cold start {ratios['cold_start_vs_floor']:.2f}x" if ratios["cold_start_vs_floor"] else "")
          + " (targets: 1.5x each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
