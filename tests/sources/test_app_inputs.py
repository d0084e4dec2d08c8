"""The app's "Model from" gains a Hugging Face id and a GGUF upload (AppTest, loopback Hub)."""

from __future__ import annotations

import pytest

import kvmem
from tests.fixtures import gguf_models
from tests.ui.apptest import run

from .conftest import hub_configs


@pytest.fixture
def app():
    return run("app.py")


def test_hugging_face_id_from_the_hub(hub, app):
    hub.add("Qwen/Qwen2.5-14B", {"config.json": hub_configs()["Qwen/Qwen2.5-14B"]})
    app.radio(key="source").set_value("Hugging Face id").run()
    assert "type a Hugging Face id" in app.error[0].value
    app.text_input(key="hf_id").set_value("Qwen/Qwen2.5-14B").run()
    assert not app.exception and not app.error
    expected = kvmem.estimate(kvmem.get_model("Qwen/Qwen2.5-14B"), engine="vllm", tokens=8192, kv_dtype="bf16")
    assert app.metric[0].value == kvmem.format_bytes(expected.total_bytes)
    # 48 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 196,608 B per token (Qwen3-4B is a preset since issue 34)
    assert app.metric[1].value == "196,608 B"
    assert any("Weights (format auto): the formula estimate" in c.value for c in app.sidebar.caption)


def test_a_shared_link_with_an_id_restores_it(hub):
    from tests.ui.apptest import load
    hub.add("Qwen/Qwen2.5-14B", {"config.json": hub_configs()["Qwen/Qwen2.5-14B"]})
    at = load("app.py")
    at.query_params.update({"source": "Hugging Face id", "hf_id": "Qwen/Qwen2.5-14B"})
    at.run()
    assert not at.exception and not at.error
    assert at.text_input(key="hf_id").value == "Qwen/Qwen2.5-14B" and at.metric[1].value == "196,608 B"


def test_hugging_face_id_errors_are_messages(hub, app):
    app.radio(key="source").set_value("Hugging Face id").run()
    app.text_input(key="hf_id").set_value("nobody/nothing").run()
    assert not app.exception and "nobody/nothing was not found on" in app.error[0].value


def test_gguf_upload_reads_the_header(tmp_path, app):
    path = tmp_path / "llama.gguf"
    gguf_models.write(path, "llama-3-8b", tiny=False)
    header = open(path, "rb").read(1 << 16)                   # the first 64 KiB: the whole header
    app.radio(key="source").set_value("Upload GGUF").run()
    app.file_uploader(key="gguf_upload").set_value(("llama.gguf", header, "application/octet-stream")).run()
    assert not app.exception and not app.error
    assert app.metric[1].value == "131,072 B"                 # 32 x 8 x 128 x 2 x 2 B per token
    assert any("the header only" in c.value for c in app.sidebar.caption)
    assert any("exact from the gguf headers, 4.58 GiB" in c.value for c in app.sidebar.caption)
    app.file_uploader(key="gguf_upload").set_value(("llama.gguf", header[:4000], "application/octet-stream")).run()
    assert not app.exception and "end inside the GGUF header" in app.error[0].value
