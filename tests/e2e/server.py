"""Start and stop the Streamlit app and a headless Debian chromium, for end-to-end tests and bench/.

The server is started on 127.0.0.1 with a free port and stopped by its PID; chromium is driven
by the Python playwright package with the system binary (never `playwright install`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium_missing_reason() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not os.path.exists(CHROMIUM):
        return "Debian chromium is not installed (apt-get install -y chromium); .ci/run installs it in CI"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (pip install -r requirements.txt)"
    return None


def require_browser() -> None:
    """Call at the top of a browser test module: the tests must run in CI, so there a missing
    browser fails them; elsewhere they are skipped, saying why."""
    import pytest

    reason = chromium_missing_reason()
    if reason and os.environ.get("CI"):
        pytest.fail(f"browser tests must run in CI: {reason}", pytrace=False)
    if reason:
        pytest.skip(reason, allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(timeout_s: float = 60.0, app: Path = ROOT / "app.py"):
    """Yield the base URL of a fresh `streamlit run app.py` (or another ``app``); stop it (by PID) afterwards."""
    port = _free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", "127.0.0.1",
           "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    env = {**os.environ, "KVMEM_PRELOAD": "1"}  # as users run it (ui/preload.py); the suite turns it off
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not become healthy on {url} (exit code {proc.poll()})")
            time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def browser():
    """Yield a playwright Browser on the system chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield instance
        finally:
            instance.close()


def wait_for_app(page, timeout_ms: int = 60_000):
    """Wait until the script has finished running and a chart or metric is on the page."""
    page.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)
