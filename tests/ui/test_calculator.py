"""The calculator page, headless (streamlit.testing AppTest): the numbers shown are the library's."""

from pathlib import Path

import pytest

import kvmem
from tests.fixtures import ABRIDGED
from tests.ui.apptest import APP, run


@pytest.fixture
def app():
    return run("app.py")


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def test_defaults_show_llama_8k(app):
    assert not app.exception
    # defaults: Llama-3.1-8B, 8k, batch 1, bf16, vLLM, H100
    assert app.selectbox(key="engine").value == "vllm" and app.selectbox(key="gpu").value == "h100-sxm-80gb"
    expected = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens="8k", kv_dtype="auto")
    assert metrics(app)["Total KV cache"] == kvmem.format_bytes(expected.total_bytes) == "1.00 GiB"
    weights = kvmem.weights.weights("llama-3.1-8b").per_device()
    assert metrics(app)["Weights per device"] == kvmem.format_bytes(weights) == "14.96 GiB"
    assert metrics(app)["Per token"] == "131,072 B"
    assert any(f"{expected.total_bytes:,} bytes" in c.value for c in app.caption)
    assert app.get("plotly_chart")


def test_change_model_tokens_batch_dtype(app):
    app.selectbox(key="model").set_value("deepseek-v3")
    app.text_input(key="tokens").set_value("128k")
    app.number_input(key="batch").set_value(4)
    app.selectbox(key="kv_dtype").set_value("fp8")
    app.run()
    expected = kvmem.estimate("deepseek-v3", engine="vllm", tokens="128k", batch=4, kv_dtype="fp8")
    assert not app.exception
    assert metrics(app)["Total KV cache"] == kvmem.format_bytes(expected.total_bytes)
    assert metrics(app)["Per sequence"] == kvmem.format_bytes(expected.total_bytes // 4)


@pytest.mark.parametrize("text", ["-3", "abc", "0", "1.5"])
def test_bad_tokens_is_a_message(app, text):
    app.text_input(key="tokens").set_value(text).run()
    assert not app.exception
    assert app.error and "tokens" in app.error[0].value


def test_llamacpp_log_lines_shown(app):
    app.selectbox(key="engine").set_value("llama.cpp").run()
    assert not app.exception
    assert any("llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs)" in c.value for c in app.code)
    # issue 23 items 5 and 16: the app's default KV dtype is the CLI's (auto), so llama.cpp takes its own
    # default f16 and logs "K (f16)" as the CLI does; the block wraps instead of being cut off
    assert app.selectbox(key="kv_dtype").value == kvmem.defaults.KV_DTYPE == "auto"
    assert app.selectbox(key="engine").value == "llama.cpp"
    block = next(c for c in app.code if "llama_kv_cache" in c.value)
    assert "K (f16):  512.00 MiB, V (f16):  512.00 MiB" in block.value and block.proto.wrap_lines


def test_home_page_renders_without_importing_pandas_but_with_numpy_loaded():
    # the first page a user opens plots rows directly; pandas (~0.5-0.8 s to import here) waits for
    # the pages that show tables (see bench/README.md). numpy is loaded before any page draws, so
    # that no session's torch or pandas import leaves it half-initialised while plotly looks at it.
    import subprocess
    import sys

    code = ("import sys; from streamlit.testing.v1 import AppTest; "
            f"at = AppTest.from_file({str(APP)!r}, default_timeout=60).run(); "
            "print(bool(at.exception), 'pandas' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True"]


def test_kv_only_view_keeps_a_small_cache_legible(app):
    # DeepSeek-V3: 627 GiB of weights beside a few GiB of KV; the KV-only chart draws the cache alone
    import json

    app.selectbox(key="model").set_value("deepseek-v3")
    app.segmented_control(key="view").set_value("KV only vs context").run()
    assert not app.exception
    names = [t["name"] for t in json.loads(app.get("plotly_chart")[0].proto.spec)["data"]]
    assert names and "weights" not in names


def test_formula_bytes_are_whole_and_use_the_type_in_force(app):
    # gemma-3-27b, llama.cpp, K and V q8_0: p = 8.5 bits / 8 = 1.0625 B, not the sidebar's bf16
    app.selectbox(key="model").set_value("gemma-3-27b")
    app.selectbox(key="engine").set_value("llama.cpp").run()
    app.selectbox(key="opt_llama_cpp_type_k").set_value("q8_0")
    app.selectbox(key="opt_llama_cpp_type_v").set_value("q8_0").run()
    assert not app.exception
    latex = " ".join(e.value for e in app.latex)
    # 2 x 1.0625 x 62 layers x 16 heads x 128 x 8,192 tokens = 2,210,398,208 bytes, a whole number
    assert r"1.0625 \times" in latex and "2{,}210{,}398{,}208\\ " in latex
    assert any("KV in q8_0" in c.value for c in app.caption)


def test_a_workload_the_engine_refuses_is_said_above_the_numbers():
    # Qwen3-32B has 40,960 positions; vLLM refuses max_model_len 1M unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    from kvmem.engines.results import Estimate
    from tests.ui.apptest import load

    if not hasattr(Estimate, "engine_refuses"):
        pytest.skip("the library does not yet say when the engine refuses (Estimate.engine_refuses)")
    at = load("app.py")
    at.query_params.update({"model": "qwen3-32b", "tokens": "1M"})
    at.run()
    assert not at.exception
    assert any(w.value.startswith("The engine would refuse this") for w in at.warning)
    # issue 23 item 6: and what lets it start (Estimate keeps it in details; the page read only a field)
    assert any("(it starts with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)" in w.value for w in at.warning)


def test_mla_naive_formula_is_per_head_and_total_names_its_units():
    # issue 23 item 2: DeepSeek-V3 read naively off its config is 128 KV heads x (K 192, V 128) per layer:
    # 2 x 2 B x 1 x 61 layers x 128 x 160 (the mean of 192 and 128) x 1 token = 4,997,120 bytes, 71x the latent
    from tests.ui.apptest import load

    at = load("app.py")
    at.query_params.update({"model": "deepseek-v3", "tokens": "1", "engine": "ideal"})
    at.run()
    assert not at.exception
    latex = " ".join(e.value for e in at.latex)
    assert r"61 \times 128 \times 160 \times 1 = 4{,}997{,}120" in latex
    assert any("d_head = (192 + 128) / 2" in c.value for c in at.caption)
    # issue 23 item 9: KiB beside "(GiB)" read as a wrong unit
    total = next(c.value for c in at.caption if c.value.startswith("Total:"))
    assert total == "Total: 70,272 bytes = 68.62 KiB (binary) = 70.27 KB (decimal)"


def test_unknown_weights_are_unknown_not_zero_and_the_sidebar_box_gives_them(app):
    # issue 33 item 6: a model without a parameter count showed "Weights per device 0 B" and a GPU share
    app.radio(key="source").set_value("Paste JSON").run()
    app.text_area(key="pasted").set_value(Path(ABRIDGED).read_text()).run()   # no parameter count (its README)
    assert not app.exception
    assert metrics(app)["Weights per device"] == "unknown" and metrics(app)["Weights + KV / GPU"] == "—"
    assert any("Weights per device" in i.value for i in app.info)
    app.text_input(key="weights").set_value("4GB").run()        # 4,000,000,000 B = 3.73 GiB
    assert metrics(app)["Weights per device"] == "3.73 GiB"
    fit = kvmem.fit(kvmem.Model.from_hf_config(ABRIDGED), gpu="h100-sxm-80gb", context="8k", weights_bytes="4GB")
    assert fit.breakdown["weights"] == 4_000_000_000 and fit.fits
    app.text_input(key="weights").set_value("lots").run()
    assert any("Weights per device" in e.value for e in app.error)
