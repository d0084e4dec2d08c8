"""Validate page (AppTest): a live measurement shows predicted == measured, errors are messages."""

import pytest

import kvmem
from tests.ui.apptest import run


@pytest.fixture
def page():
    return run("ui/validate.py")


def test_measure_llama_on_cpu(page):
    page.text_input(key="val_tokens").set_value("8, 32")
    page.selectbox(key="val_device").set_value("cpu")
    page.button(key="val_run").click().run()
    assert not page.exception
    frame = page.table[0].value
    assert list(frame["Tokens"]) == [8, 32] and frame["Matches"].all()
    # 32 layers x 8 KV heads x 128 x (K,V) x 2 B = 131,072 B per token
    assert list(frame["Tensors held (bytes)"]) == [8 * 131_072, 32 * 131_072]
    assert list(frame["Predicted (bytes)"]) == [kvmem.estimate("llama-3.1-8b", engine="hf-dynamic", tokens=t,
                                                              kv_dtype="bf16").kv_bytes for t in (8, 32)]
    assert "2 of 2 match" in page.success[0].value


def test_quantized_cache(page):
    page.selectbox(key="model").set_value("llama-3.2-1b")
    page.selectbox(key="val_engine").set_value("hf-quantized")
    page.text_input(key="val_tokens").set_value("40")
    page.button(key="val_run").click().run()
    assert not page.exception and page.table[0].value["Matches"].all()


def test_bad_tokens_and_refusals_are_messages(page):
    page.text_input(key="val_tokens").set_value("8, lots").run()
    assert not page.exception and "lots" in page.error[0].value
    page.text_input(key="val_tokens").set_value("16").run()
    page.selectbox(key="model").set_value("gemma-3-1b")
    page.selectbox(key="val_engine").set_value("hf-quantized")
    page.button(key="val_run").click().run()
    assert not page.exception and page.error


def cuda_expanders(page):
    return [e for e in page.expander if e.label.startswith("The CUDA report")]


def test_no_gpu_run_recorded_says_how_to_make_one(monkeypatch, tmp_path):
    import kvmem.validation
    monkeypatch.setattr(kvmem.validation, "CUDA_REPORT", tmp_path / "cuda.md")
    page = run("ui/validate.py")
    assert not page.exception and not cuda_expanders(page)
    text = " ".join(i.value for i in page.info)
    assert "No GPU run has been recorded yet" in text and "bash tools/cuda_validate.sh" in text


def test_recorded_cuda_report_is_shown_beside_the_live_one(monkeypatch, tmp_path):
    import kvmem.validation
    report = tmp_path / "cuda.md"  # a stand-in written here, with this test's own words
    report.write_text("# Measured validation on CUDA\n\n**3 of 3 cases match** (stand-in)\n\n"
                      "| case | predicted |\n|---|---|\n| stand-in row | 123 |\n")
    monkeypatch.setattr(kvmem.validation, "CUDA_REPORT", report)
    page = run("ui/validate.py")
    assert not page.exception and not page.info
    assert "3 of 3 cases match (stand-in)" in " ".join(c.value for c in page.caption)
    assert any("stand-in row" in m.value for m in cuda_expanders(page)[0].markdown)
    page.text_input(key="val_tokens").set_value("8")
    page.selectbox(key="val_device").set_value("cpu")
    page.button(key="val_run").click().run()
    assert not page.exception and page.table[0].value["Matches"].all() and cuda_expanders(page)
