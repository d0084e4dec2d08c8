"""Real-browser end-to-end tests: Debian chromium driven by playwright against `streamlit run app.py`.

Each page loads without an exception, an input change updates its chart, and a screenshot is
saved under test-output/screenshots/. Outside CI these skip (saying why) where chromium is absent;
in CI (.ci/run installs chromium) a missing browser is a failure.
"""

import pathlib
import re

import pytest

from tests.e2e.server import browser, require_browser, streamlit_server, wait_for_app

pytestmark = pytest.mark.browser
require_browser()

SHOTS = pathlib.Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
PAGES = {"calculator": "", "compare": "compare", "fit": "fit", "strategies": "strategies", "learn": "learn", "validate": "validate"}  # default page at the root


@pytest.fixture(scope="module")
def app_url():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def chromium():
    with browser() as instance:
        yield instance


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    yield tab
    context.close()


def chart_title(page, index: int = 0) -> str:
    return page.locator(".js-plotly-plot .gtitle").nth(index).text_content(timeout=60_000)


@pytest.mark.parametrize("name", list(PAGES))
def test_page_loads_without_exception(page, app_url, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(f"{app_url}/{PAGES[name]}")
    wait_for_app(page)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=90_000)
    if name != "validate":  # the Validate page draws its chart once measured
        page.wait_for_selector(".js-plotly-plot", timeout=90_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.get_by_text("Page not found").count() == 0
    assert page.get_by_text("Something went wrong").count() == 0
    # every drawn chart shows marks with a size (a category axis forced to "linear" draws zero-width bars)
    empty = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => {
        const marks = [...p.querySelectorAll('.bars .point path, .scatterlayer .js-line, .scatterlayer .point path, '
                                             + '.heatmaplayer image, .hm image')];
        return !marks.some(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0; });
    }).length""")
    assert empty == 0, f"{empty} chart(s) drawn without visible data on {name}"
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def wait_title(page, text: str):
    page.wait_for_function("(t) => [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
                           ".some(e => e.textContent.includes(t))", arg=text, timeout=90_000)


def set_number(page, label: str, value: int):
    box = page.get_by_role("spinbutton", name=label)
    box.fill(str(value))
    box.press("Enter")


def test_calculator_input_change_updates_chart_and_url(page, app_url):
    page.goto(f"{app_url}/")
    wait_for_app(page)
    wait_title(page, "(batch 1)")
    set_number(page, "Batch", 4)
    wait_title(page, "(batch 4)")
    metric = page.locator('[data-testid="stMetricValue"]').first.text_content()
    assert metric.strip() == "4.00 GiB"
    assert "batch=4" in page.url
    page.screenshot(path=str(SHOTS / "calculator-batch4.png"), full_page=True)


# For each other page: an input to change and the chart title that shows the change took effect.
CHANGES = {
    "compare": (lambda page: set_number(page, "Batch", 3), "KV cache vs context (batch 3)"),
    "fit": (lambda page: set_number(page, "GPUs", 2), "(2 GPU(s) each)"),
    "strategies": (lambda page: set_number(page, "Batch", 5), "tokens × 5"),
    "learn": (lambda page: page.get_by_role("slider", name="Show step").press("ArrowLeft"), "No cache: 4×4"),
    "validate": (lambda page: page.get_by_role("button", name="Measure").click(), "llama-3.1-8b · hf-dynamic"),
}


@pytest.mark.parametrize("name", list(CHANGES))
def test_input_change_updates_the_chart(page, app_url, name):
    change, expected_title = CHANGES[name]
    page.goto(f"{app_url}/{PAGES[name]}")
    wait_for_app(page)
    if name != "validate":
        page.wait_for_selector(".js-plotly-plot .gtitle", timeout=90_000)
    change(page)
    wait_title(page, expected_title)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(SHOTS / f"{name}-changed.png"), full_page=True)


def test_shared_link_reproduces_the_view(page, app_url):
    page.goto(f"{app_url}/?model=deepseek-v3&tokens=128k&batch=2")
    wait_for_app(page)
    page.wait_for_selector(".js-plotly-plot", timeout=60_000)
    assert "deepseek-v3" in chart_title(page)
    # 61 layers x 576 x 2 B x 131,072 tokens x 2 sequences = 17.16 GiB (vLLM rounds 128k to whole blocks)
    assert page.locator('[data-testid="stMetricValue"]').first.text_content().strip() == "17.16 GiB"


def rgb(css: str) -> list[int]:
    """[r, g, b] of a CSS colour such as 'rgb(14, 17, 23)' or 'rgba(250, 250, 250, 1)'."""
    return [int(float(v)) for v in re.findall(r"[\d.]+", css)[:3]]


def test_dark_theme_follows_the_system(chromium, app_url):
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    try:
        page.goto(f"{app_url}/")
        wait_for_app(page)
        wait_title(page, "(batch 1)")
        background = page.evaluate("""() => getComputedStyle(document.querySelector('[data-testid="stApp"]'))
                                          .backgroundColor""")
        assert sum(rgb(background)) < 200, background  # a dark page
        text = page.evaluate("""() => getComputedStyle(document.querySelector('h1')).color""")
        assert sum(rgb(text)) > 500, text  # light headings
        title = page.evaluate("() => getComputedStyle(document.querySelector('.js-plotly-plot .gtitle')).fill")
        assert sum(rgb(title)) > 500, title  # the chart follows: plots.template(dark=True)
        page.screenshot(path=str(SHOTS / "calculator-dark.png"), full_page=True)
    finally:
        context.close()
