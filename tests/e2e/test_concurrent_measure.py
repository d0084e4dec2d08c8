"""Two browser sessions clicking Measure at once must leave the server alive (issue 13).

Before: two sessions measuring llama-3.2-1b at 2,048 tokens killed the Streamlit process with a
segfault in libtorch_cpu.so (the torch profiler is not safe in two threads). kvmem.measure now
runs one measurement at a time per process; the second session shows that it waits.
"""

import urllib.request

import pytest

from tests.e2e.server import browser, require_browser, streamlit_server, wait_for_app

pytestmark = pytest.mark.browser
require_browser()

URL = "/validate?val_tokens=2048,2048,2048&model=llama-3.2-1b"


def test_two_sessions_measure_at_once_and_the_server_lives():
    with streamlit_server() as url, browser() as chromium:
        pages = []
        for _ in range(2):
            context = chromium.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            page.goto(url + URL)
            wait_for_app(page, timeout_ms=120_000)
            pages.append(page)
        for page in pages:
            page.get_by_role("button", name="Measure").click()
        for page in pages:
            page.wait_for_selector(".js-plotly-plot", timeout=300_000)  # both finish: one after the other
            assert page.locator('[data-testid="stException"]').count() == 0
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as response:
            assert response.status == 200
