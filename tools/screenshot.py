"""The README's screenshot: starts the app on 127.0.0.1 (headless, no usage stats), opens the Fit
page of one workload in Debian's chromium and saves docs/images/fit.png; stops what it started.

    .venv/bin/python tools/screenshot.py
"""

from __future__ import annotations

import pathlib
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
URL = "/fit?model=llama-3.3-70b&gpu=h100-sxm-80gb&num_gpus=2&tokens=32k&kv_dtype=fp8&weight_dtype=fp8"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
                               "--server.address", "127.0.0.1", "--server.port", str(port),
                               "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            for _ in range(60):
                try:
                    page.goto(f"http://127.0.0.1:{port}{URL}", timeout=5000)
                    break
                except Exception:
                    time.sleep(1)
            page.get_by_text("fits", exact=False).first.wait_for(timeout=90_000)
            page.wait_for_timeout(4000)          # the charts finish drawing
            out = ROOT / "docs" / "images" / "fit.png"
            page.screenshot(path=str(out))
            browser.close()
            print(f"wrote {out.relative_to(ROOT)}")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
