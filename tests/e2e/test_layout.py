"""Real browser: labels that must not overlap or be cut off (issue 14 items 7, 11 and 12)."""

import pytest

from tests.e2e.server import browser, require_browser, streamlit_server, wait_for_app

pytestmark = pytest.mark.browser
require_browser()

OVERLAPS = """(texts) => {
    const boxes = [...document.querySelectorAll('.js-plotly-plot .annotation-text, .js-plotly-plot .gtitle,'
                                               + ' .js-plotly-plot .legendtext')]
        .filter(e => texts.some(t => e.textContent.includes(t))).map(e => e.getBoundingClientRect());
    const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    let n = 0;
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) if (hit(boxes[i], boxes[j])) n++;
    return [boxes.length, n];
}"""


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


def test_fit_marks_do_not_overlap(page, app_url):
    # the KV pool mark and the device total sit close together on an 8B model at 8k
    page.goto(f"{app_url}/fit")
    wait_for_app(page)
    page.wait_for_selector(".js-plotly-plot .annotation-text", timeout=90_000)
    found, overlapping = page.evaluate(OVERLAPS, ["device memory", "KV this workload needs"])
    assert found == 2 and overlapping == 0


def test_strategies_chart_title_clear_of_its_legend(page, app_url):
    page.goto(f"{app_url}/strategies")
    wait_for_app(page)
    page.wait_for_selector(".js-plotly-plot .gtitle", timeout=90_000)
    found, overlapping = page.evaluate(OVERLAPS, ["KV bytes per strategy", "quantisation", "eviction",
                                                  "architecture", "baseline"])
    assert found >= 2 and overlapping == 0


def test_fit_heatmap_shows_whole_gpu_names(page, app_url):
    # issue 14 item 12: "GPU names are not cut off"; the heatmap's axis cut them at the left edge
    page.goto(f"{app_url}/fit")
    wait_for_app(page)
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=90_000)
    names, clipped = page.evaluate("""() => {
        const plot = [...document.querySelectorAll('.js-plotly-plot')].find(p => p.querySelector('.heatmaplayer'));
        const edge = plot.getBoundingClientRect().left;
        const labels = [...plot.querySelectorAll('.ytick text')];
        return [labels.map(t => t.textContent), labels.filter(t => t.getBoundingClientRect().left < edge).length];
    }""")
    assert "rtx-4090-24gb" in names and clipped == 0


def test_compare_default_model_chips_are_whole(page, app_url):
    # issue 23 item 17: in a third of the row the 4th default model chip ("deepseek-v3") was cut off
    page.goto(f"{app_url}/compare")
    wait_for_app(page)
    page.wait_for_selector('[data-testid="stMultiSelect"] [data-tag]', timeout=90_000)
    chips = page.evaluate("""() => {
        const box = [...document.querySelectorAll('[data-testid="stMultiSelect"]')]
            .find(b => b.querySelector('label').textContent.includes('Models'));
        const edge = box.getBoundingClientRect().right;
        return [...box.querySelectorAll('[data-tag]')].map(tag => {
            const text = tag.querySelector('span[title]');
            return [text.title, text.scrollWidth <= text.clientWidth && tag.getBoundingClientRect().right <= edge];
        });
    }""")
    assert [name for name, _ in chips] == ["llama-3.1-8b", "qwen3-8b", "gemma-3-27b", "deepseek-v3"]
    assert all(whole for _, whole in chips), chips
