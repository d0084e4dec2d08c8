"""Export the whole plan from any page (AppTest): the sidebar's two download buttons write kvmem.report's
JSON and Markdown of the sidebar's workload when clicked, and the JSON runs again to the same numbers."""

import json

import pytest

import kvmem
from tests.ui.apptest import load


@pytest.fixture
def written(monkeypatch):
    """The text a deferred download button writes when clicked (AppTest's media file manager, recorded)."""
    import streamlit.testing.v1.app_test as app_test
    from streamlit.runtime.media_file_manager import MediaFileManager

    managers = []

    class Recording(MediaFileManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            managers.append(self)

    monkeypatch.setattr(app_test, "MediaFileManager", Recording)

    def click(at, key: str) -> str:
        button = next(b for b in at.get("download_button") if b.key == key)
        url = managers[-1].execute_deferred(button.proto.deferred_file_id)
        return managers[-1]._storage.get_file(url.rsplit("/", 1)[-1]).content.decode("utf-8")

    return click


def test_calculator_exports_the_sidebars_plan(written):
    at = load()
    at.run()
    assert not at.exception
    assert [b.label for b in at.get("download_button") if b.key.startswith("export_")] == ["Plan as JSON",
                                                                                            "Plan as Markdown"]
    doc = json.loads(written(at, "export_json"))
    fit = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=8192, batch=1)
    assert doc["inputs"]["model"] == {"preset": "llama-3.1-8b"} and doc["inputs"]["context"] == 8192
    assert doc["fit"]["max_batch"] == fit.max_batch == 54
    assert doc["plan"]["command"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert kvmem.rerun_report(doc).to_dict() == doc
    text = written(at, "export_md")
    assert text.startswith("# kvmem plan: llama-3.1-8b on 1 × h100-sxm-80gb (vllm): fits")


def test_fit_page_exports_its_own_workload_and_utilization(written):
    at = load()
    at.run()
    at.switch_page("ui/fit.py")
    at.run()
    at.selectbox(key="model").set_value("llama-3.3-70b")
    at.text_input(key="tokens").set_value("32k")
    at.number_input(key="num_gpus").set_value(2)
    at.selectbox(key="kv_dtype").set_value("fp8")
    at.selectbox(key="weight_dtype").set_value("fp8")
    at.number_input(key="util").set_value(0.85)
    at.run()
    assert not at.exception
    doc = json.loads(written(at, "export_json"))
    expected = kvmem.report("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=1, kv_dtype="fp8",
                            weight_dtype="fp8", gpu_memory_utilization=0.85).to_dict()
    assert doc == expected
    assert doc["inputs"]["gpu_memory_utilization"] == 0.85 and "--gpu-memory-utilization 0.85" in doc["plan"]["command"]
