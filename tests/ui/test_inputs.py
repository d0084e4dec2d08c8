"""The shared sidebar's four model inputs (AppTest): preset, upload, paste, custom fields.
Uploaded and pasted configs are parsed as JSON only; malformed input is a message naming the problem."""

import json

import pytest

import kvmem
from kvmem.catalog import preset
from tests.ui.apptest import load, run


@pytest.fixture
def app():
    return run("app.py")


def total(at) -> str:
    return at.metric[0].value


def test_upload_a_real_config(app):
    app.radio(key="source").set_value("Upload config.json").run()
    assert "upload a config.json" in app.error[0].value
    cfg = json.dumps(preset("qwen3-0.6b")["config"]).encode()
    app.file_uploader(key="upload").set_value(("config.json", cfg, "application/json")).run()
    assert not app.exception and not app.error
    expected = kvmem.estimate(kvmem.Model.from_hf_config(preset("qwen3-0.6b")["config"]), engine="vllm", tokens=8192,
                              kv_dtype="bf16")
    assert total(app) == kvmem.format_bytes(expected.total_bytes)


@pytest.mark.parametrize("content, message", [
    (b"{not json", "not valid JSON"),
    (b'{"model_type": "brand_new", "hidden_size": 64}', "model_type 'brand_new' is not a family kvmem reads"),
    (b'{"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}', "config has no 'model_type'"),
    (b'{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 3, "num_key_value_heads": 2, '
     b'"hidden_size": 6}', "num_attention_heads (3) is not a multiple of num_key_value_heads (2)"),
    (b"\x80\x81 binary", "not valid JSON"),
])
def test_malformed_upload_is_a_message(app, content, message):
    app.radio(key="source").set_value("Upload config.json").run()
    app.file_uploader(key="upload").set_value(("config.json", content, "application/json")).run()
    assert not app.exception
    assert message in app.error[0].value


def test_oversized_upload_is_refused(app):
    app.radio(key="source").set_value("Paste JSON").run()
    app.text_area(key="pasted").set_value('{"x": "' + "a" * 1_000_100 + '"}').run()
    assert not app.exception and "larger than 1,000,000 bytes" in app.error[0].value


def test_paste_json(app):
    app.radio(key="source").set_value("Paste JSON").run()
    app.text_area(key="pasted").set_value(json.dumps(preset("deepseek-v3")["config"])).run()
    assert not app.exception and not app.error
    # MLA: 61 layers x 576 x 2 B = 70,272 B per token (vLLM, FlashMLA block 64)
    assert app.metric[1].value == "70,272 B"


def test_custom_fields_gqa_and_sliding(app):
    app.radio(key="source").set_value("Custom fields").run()
    app.number_input(key="c_layers").set_value(10)
    app.number_input(key="c_kv_heads").set_value(4)
    app.number_input(key="c_head_dim").set_value(64)
    app.selectbox(key="engine").set_value("ideal")
    app.run()
    assert not app.exception
    assert app.metric[1].value == f"{10 * 4 * 64 * 2 * 2:,} B"
    app.number_input(key="c_window").set_value(1024)
    app.number_input(key="c_full_every").set_value(5)
    app.text_input(key="tokens").set_value("64k").run()
    # 2 full layers hold 65,536 tokens, 8 sliding layers 1,024
    assert total(app) == kvmem.format_bytes((2 * 65536 + 8 * 1024) * 4 * 64 * 2 * 2)


def test_custom_mla(app):
    app.radio(key="source").set_value("Custom fields").run()
    app.number_input(key="c_mla_rank").set_value(512)
    app.number_input(key="c_mla_rope").set_value(64)
    app.selectbox(key="engine").set_value("ideal")
    app.run()
    assert not app.exception and app.metric[1].value == f"{32 * 576 * 2:,} B"


def test_query_params_restore_the_view():
    at = load("app.py")
    at.query_params.update({"model": "gemma-3-27b", "tokens": "128k", "batch": "2", "engine": "ideal"})
    at.run()
    assert not at.exception
    assert at.selectbox(key="model").value == "gemma-3-27b" and at.number_input(key="batch").value == 2
    assert total(at) == kvmem.format_bytes(kvmem.estimate("gemma-3-27b", tokens="128k", batch=2).total_bytes)


def test_a_device_dependent_option_shows_the_value_in_force_and_follows_the_gpu():
    # issue 14 item 8: vLLM's max_num_batched_tokens is 2048 on an A100 80 GB and 8192 on an H100
    # (get_batch_defaults): the box shows the value in force, follows a GPU change, and keeps a
    # value the user typed
    from kvmem.sizing import engine_defaults

    def box(at):
        return at.number_input(key="opt_vllm_max_num_batched_tokens").value

    at = load("app.py")
    at.query_params.update({"gpu": "a100-sxm-80gb"})
    at.run()
    a100 = engine_defaults("vllm", "a100-sxm-80gb", context=8192).values["max_num_batched_tokens"]
    h100 = engine_defaults("vllm", "h100-sxm-80gb", context=8192).values["max_num_batched_tokens"]
    assert box(at) == a100 == 2048
    at.selectbox(key="gpu").set_value("h100-sxm-80gb").run()
    assert box(at) == h100 == 8192
    at.selectbox(key="gpu").set_value("a100-sxm-80gb").run()
    assert box(at) == 2048
    at.number_input(key="opt_vllm_max_num_batched_tokens").set_value(4096).run()
    at.selectbox(key="gpu").set_value("h100-sxm-80gb").run()
    assert box(at) == 4096 and not at.exception


def test_batch_zero_is_a_message_not_a_kept_batch_of_one(app):
    # issue 23 item 11: the box refused 0 behind a red icon (message on hover) and the page kept batch 1
    app.number_input(key="batch").set_value(0).run()
    assert [e.value for e in app.error] == ["Batch: batch must be a positive integer, got 0"] and not app.metric


def test_a_paste_error_is_placed_in_the_text_as_pasted(app):
    # issue 23 item 13: "hello world }{" was reported at column 2, a column of the text the app wrapped in {}
    app.radio(key="source").set_value("Paste JSON").run()
    app.text_area(key="pasted").set_value("hello world }{").run()
    assert app.error[0].value.endswith("at line 1 column 1")
    app.text_area(key="pasted").set_value('"model_type": "llama",\n"hidden_size": 4096,\n"num_hidden_layers": }').run()
    assert app.error[0].value.endswith("at line 3 column 22")


def test_fields_a_sparse_config_leaves_out_are_named(app):
    # issue 23 item 14: {"model_type": "llama", "hidden_size": 4096} was sized as 32 layers x 32 heads without a word
    app.radio(key="source").set_value("Paste JSON").run()
    app.text_area(key="pasted").set_value('{"model_type": "llama", "hidden_size": 4096}').run()
    note = next(w.value for w in app.sidebar.warning if "transformers' defaults" in w.value)
    assert "num_hidden_layers = 32, num_attention_heads = 32" in note
