"""Real browser: every input, engine options included, lives in the URL, survives page switches,
and the browser's Back/Forward restore it (issue 14 item 2)."""

import pytest

import kvmem
from tests.e2e.server import browser, require_browser, streamlit_server, wait_for_app

pytestmark = pytest.mark.browser
require_browser()


@pytest.fixture(scope="module")
def app_url():
    with streamlit_server() as url:
        yield url


@pytest.fixture
def page(app_url):
    with browser() as instance:
        context = instance.new_context(viewport={"width": 1400, "height": 1000})
        yield context.new_page()
        context.close()


def metric(page, index: int = 0) -> str:
    return page.locator('[data-testid="stMetricValue"]').nth(index).text_content(timeout=60_000).strip()


def wait_metric(page, index: int, text: str):
    page.wait_for_function("([i, t]) => { const m = document.querySelectorAll('[data-testid=\"stMetricValue\"]')[i];"
                           " return m && m.textContent.trim() === t; }", arg=[index, text], timeout=60_000)


def choose(page, label: str, option: str, attempts: int = 4):
    """Pick `option` in the selectbox labelled `label`. A rerun that lands while the list is open
    redraws it under the pointer (CI saw "element was detached from the DOM"), so wait for the
    app to go idle, and if the click still misses, close the list and open it again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label)
    for attempt in range(attempts):
        wait_for_app(page)
        box.click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
            page.keyboard.press("Escape")
    wait_for_app(page)


def test_options_in_the_url_survive_a_page_switch_and_back_forward(page, app_url):
    page.goto(f"{app_url}/?model=gemma-3-27b&engine=llama.cpp&tokens=32k")
    wait_for_app(page)
    wait_metric(page, 0, "3.11 GiB")  # f16 K and V
    page.wait_for_selector(".js-plotly-plot", timeout=60_000)
    page.get_by_text("llama.cpp options").click()
    page.locator('[data-testid="stSelectbox"]').filter(has_text="type k").wait_for(timeout=30_000)
    choose(page, "type k", "q8_0")
    page.wait_for_url("**opt_llama_cpp_type_k=q8_0**", timeout=30_000)
    choose(page, "type v", "q8_0")
    page.wait_for_url("**opt_llama_cpp_type_v=q8_0**", timeout=30_000)
    wait_metric(page, 0, "1.65 GiB")

    page.get_by_role("link", name="Fit hardware").click()
    page.wait_for_url("**/fit?**", timeout=30_000)
    wait_for_app(page)
    assert "opt_llama_cpp_type_k=q8_0" in page.url and "model=gemma-3-27b" in page.url
    fit = kvmem.fit("gemma-3-27b", gpu="h100-sxm-80gb", engine="llama.cpp", context="32k", batch=1,
                    type_k="q8_0", type_v="q8_0")
    wait_metric(page, 1, f"{fit.max_context:,}")  # the options reached Fit's library call

    page.go_back()
    page.wait_for_url(lambda url: "/fit" not in url, timeout=30_000)
    wait_for_app(page)
    wait_metric(page, 0, "1.65 GiB")
    assert "opt_llama_cpp_type_v=q8_0" in page.url
    page.go_forward()
    page.wait_for_url("**/fit?**", timeout=30_000)
    wait_for_app(page)
    wait_metric(page, 1, f"{fit.max_context:,}")


def test_an_input_survives_a_page_switch_and_back(page, app_url):
    # Calculator (batch 4) -> Compare -> Back: the calculator still has batch 4. A widget change
    # replaces the URL (Streamlit's replaceState); a page switch is a history entry.
    page.goto(f"{app_url}/")
    wait_for_app(page)
    wait_metric(page, 0, "1.00 GiB")
    page.wait_for_selector(".js-plotly-plot", timeout=60_000)
    box = page.get_by_role("spinbutton", name="Batch")
    box.fill("4")
    box.press("Enter")
    page.wait_for_url("**batch=4**", timeout=30_000)
    wait_metric(page, 0, "4.00 GiB")
    page.get_by_role("link", name="Compare").click()
    page.wait_for_url("**/compare?**batch=4**", timeout=30_000)
    wait_for_app(page)
    assert page.get_by_role("spinbutton", name="Batch").input_value(timeout=60_000) == "4"
    page.go_back()
    page.wait_for_url(lambda url: "/compare" not in url and "batch=4" in url, timeout=30_000)
    wait_for_app(page)
    wait_metric(page, 0, "4.00 GiB")
    page.go_forward()
    page.wait_for_url("**/compare?**batch=4**", timeout=30_000)
    wait_for_app(page)
    assert page.get_by_role("spinbutton", name="Batch").input_value(timeout=60_000) == "4"


def test_a_refused_link_parameter_is_named_on_the_page(page, app_url):
    page.goto(f"{app_url}/?model=llama-9&batch=2")
    wait_for_app(page)
    page.get_by_text("model=llama-9").wait_for(timeout=60_000)
    wait_metric(page, 0, "2.00 GiB")  # batch 2 kept, the default model
    assert "batch=2" in page.url and "llama-9" not in page.url


def test_a_strategies_tab_keeps_the_other_tabs_inputs_and_lives_in_the_url(page, app_url):
    # Strategies computes only the open tab; a value set on one tab survives opening another,
    # and both the tab and the value are in the URL.
    page.goto(f"{app_url}/strategies?strategy_view=Prefix+sharing+and+offloading")
    wait_for_app(page)
    box = page.get_by_role("spinbutton", name="Shared prefix (tokens)")
    box.fill("4096")
    box.press("Enter")
    page.wait_for_url("**prefix=4096**", timeout=30_000)
    wait_for_app(page)
    page.get_by_role("tab", name="Eviction").click()
    page.wait_for_url("**strategy_view=Eviction**", timeout=30_000)
    wait_for_app(page)
    page.locator(".js-plotly-plot .gtitle").filter(has_text="KV cache vs tokens generated").wait_for(timeout=60_000)
    assert "prefix=4096" in page.url
    page.get_by_role("tab", name="Prefix sharing and offloading").click()
    wait_for_app(page)
    assert page.get_by_role("spinbutton", name="Shared prefix (tokens)").input_value(timeout=60_000) == "4096"
    kv_metric = page.locator('[data-testid="stMetricLabel"]').filter(has_text="KV on the device")
    kv_metric.first.wait_for(timeout=60_000)        # the tab's metrics draw after its inputs: wait, then count
    assert kv_metric.count() == 1
