"""Real browser (chromium, playwright): the Overview page's matrix and the sidebar's Export buttons, whose
files Streamlit writes only when clicked (a deferred download, which AppTest cannot click)."""

import json

import pytest

import kvmem
from tests.e2e.server import browser, require_browser, streamlit_server, wait_for_app

pytestmark = pytest.mark.browser
require_browser()


def test_overview_matrix_and_both_exports_download():
    with browser() as chromium, streamlit_server() as url:
        context = chromium.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(f"{url}/overview?ov_gpus=rtx-4090-24gb&ov_models=llama-2-7b")
        wait_for_app(page)
        page.wait_for_selector("text=vllm: max batch at 8,192 tokens", timeout=90_000)
        table = page.locator('[data-testid="stMain"] table').first.inner_text(timeout=60_000)
        # llama-2-7b at 8k under vLLM: its cells say "refused", the reason once in the row's "why refused"
        assert "refused" in table and "past the model's 4,096 positions" in table
        assert page.locator('[data-testid="stException"]').count() == 0
        with page.expect_download(timeout=60_000) as json_file:
            page.get_by_role("button", name="Plan as JSON").click()
        doc = json.loads(open(json_file.value.path(), encoding="utf-8").read())
        assert json_file.value.suggested_filename == "kvmem-plan.json"
        assert doc["inputs"]["model"] == {"preset": "llama-3.1-8b"} and doc["fit"]["max_batch"] == 54
        assert kvmem.rerun_report(doc).to_dict() == doc
        with page.expect_download(timeout=60_000) as md_file:
            page.get_by_role("button", name="Plan as Markdown").click()
        text = open(md_file.value.path(), encoding="utf-8").read()
        assert text.startswith("# kvmem plan: llama-3.1-8b on 1 × h100-sxm-80gb (vllm): fits")
        context.close()
