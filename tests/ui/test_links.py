"""Shared links (AppTest): every input, engine options included, is read from the URL and reaches
the page's result; a parameter the app cannot take is refused by name, with why and the nearest
valid value, and the other parameters are kept."""

import pytest

import kvmem
from tests.ui.apptest import load


def opened(query: dict, page: str | None = None):
    at = load("app.py")
    at.query_params.update(query)
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception
    return at


def refusals(at) -> str:
    return " ".join(w.value for w in at.warning if "refused" in w.value)


def test_engine_options_in_the_link_reach_the_calculator():
    # issue 14 item 2: gemma-3-27b, llama.cpp, 32k, K and V in q8_0 = 1.65 GiB (f16: 3.11 GiB)
    at = opened({"model": "gemma-3-27b", "engine": "llama.cpp", "tokens": "32k",
                 "opt_llama_cpp_type_k": "q8_0", "opt_llama_cpp_type_v": "q8_0"})
    expected = kvmem.estimate("gemma-3-27b", engine="llama.cpp", tokens="32k", type_k="q8_0", type_v="q8_0")
    assert at.metric[0].value == kvmem.format_bytes(expected.total_bytes) == "1.65 GiB"
    assert at.query_params["opt_llama_cpp_type_k"] == ["q8_0"] or at.query_params["opt_llama_cpp_type_k"] == "q8_0"


def test_engine_options_reach_fit_hardware():
    # issue 14 item 1: Qwen3-32B q4_k_m on an RTX 4090 under llama.cpp: f16 KV gives 21,504 tokens,
    # K and V in q8_0 give 40,448 (kvmem's placement, every layer on the GPU, since review finding 3; budget.py's
    # compute estimate gave 18,432 and 34,816)
    query = {"model": "qwen3-32b", "gpu": "rtx-4090-24gb", "engine": "llama.cpp", "tokens": "16k",
             "weight_dtype": "q4_k_m"}
    f16 = {m.label: m.value for m in opened(query, "ui/fit.py").metric}
    q8 = {m.label: m.value for m in opened({**query, "opt_llama_cpp_type_k": "q8_0",
                                            "opt_llama_cpp_type_v": "q8_0"}, "ui/fit.py").metric}
    expected = kvmem.fit("qwen3-32b", gpu="rtx-4090-24gb", engine="llama.cpp", context="16k", batch=1,
                         weight_dtype="q4_k_m", type_k="q8_0", type_v="q8_0")
    assert f16["Max context"] == "21,504"
    assert q8["Max context"] == f"{expected.max_context:,}" == "40,448"


def test_vllm_max_num_batched_tokens_reaches_fit():
    query = {"model": "llama-3.1-8b", "gpu": "l40s-48gb", "tokens": "32k"}
    base = {m.label: m.value for m in opened(query, "ui/fit.py").metric}
    more = {m.label: m.value for m in opened({**query, "opt_vllm_max_num_batched_tokens": "65536"},
                                             "ui/fit.py").metric}
    expected = kvmem.fit("llama-3.1-8b", gpu="l40s-48gb", context="32k", batch=1, max_num_batched_tokens=65536)
    assert more["Max batch"] == f"{expected.max_batch:,}" != base["Max batch"]


@pytest.mark.parametrize("query, refused, nearest", [
    ({"model": "llama-9"}, "`model=llama-9` refused: not one of the choices", None),
    ({"model": "llama-3.1-8B"}, "`model=llama-3.1-8B` refused", "llama-3.1-8b"),
    ({"engine": "foo"}, "`engine=foo` refused: not one of the choices (ideal, hf-dynamic", None),
    ({"engine": "VLLM"}, "`engine=VLLM` refused", "vllm"),
    ({"batch": "-3"}, "`batch=-3` refused: must be from 1 to 1,000,000", "1"),
    ({"tp": "0"}, "`tp=0` refused: must be from 1 to 1,024", "1"),
    ({"batch": "2.5"}, "`batch=2.5` refused: must be a whole number", "2"),
    ({"batch": "1e400"}, "`batch=1e400` refused: not a finite number", "1000000"),  # issue 13: OverflowError
    ({"tokens": "9" * 5000}, "refused: longer than 200 characters", None),          # issue 13: OverflowError
    ({"tokens": "9" * 20}, "`tokens=99999999999999999999` refused: tokens must be at most 1,099,511,627,776", None),
    ({"tokens": "-5"}, "`tokens=-5` refused", None),
    ({"kv_dtype": "fp9"}, "`kv_dtype=fp9` refused", "fp8"),
    ({"opt_llama_cpp_type_k": "q9_0", "engine": "llama.cpp"}, "`opt_llama_cpp_type_k=q9_0` refused", "q8_0"),
])
def test_a_bad_parameter_is_refused_by_name_and_the_rest_kept(query, refused, nearest):
    at = opened({**query, "batch": query.get("batch", "3"), "gpu": "l40s-48gb"})
    message = refusals(at)
    assert refused in message, message
    if nearest is not None:
        assert f"nearest valid value: `{nearest}`" in message
    assert at.selectbox(key="gpu").value == "l40s-48gb"  # the other parameters are kept
    if "batch" not in query:
        assert at.number_input(key="batch").value == 3
    assert not at.error or all("Something went wrong" not in e.value for e in at.error)


def test_twenty_digit_tokens_on_compare_is_a_refusal_not_a_crash():
    at = opened({"tokens": "9" * 20}, "ui/compare.py")
    assert "refused" in refusals(at) and not at.error
    assert at.get("plotly_chart")


def test_page_parameters_are_checked_too():
    at = load("ui/fit.py")
    at.query_params.update({"engine": "vllm", "util": "7"})
    at.run()
    assert not at.exception
    at.run()
    assert "`util=7` refused: must be from 0.05 to 1.0" in refusals(at)


def test_typed_input_is_not_a_refused_link_and_a_corrected_one_clears_its_refusal():
    # issue 23 item 10. A bound widget writes what is typed to the URL: a bad typed value is the page's input
    # error, not a "link parameter refused" banner
    at = opened({})
    at.query_params["tokens"] = "abc"
    at.text_input(key="tokens").set_value("abc").run()
    assert not refusals(at) and at.error[0].value.startswith("Tokens per sequence: tokens: cannot read 'abc'")
    # a link's bad value is refused; typing a good one (the widget writes it to the URL) clears the banner
    at = opened({"tokens": "abc"})
    assert "`tokens=abc` refused" in refusals(at)
    at.query_params["tokens"] = "16k"
    at.text_input(key="tokens").set_value("16k").run()
    assert not refusals(at) and at.metric[0].value == "2.00 GiB"  # llama-3.1-8b, 16,384 x 131,072 B


def test_an_engine_option_the_engine_refuses_is_a_refused_link_and_the_page_stays():
    # issue 23 item 12: /?engine=vllm&opt_vllm_block_size=-1 stopped the page with the engine's message
    at = opened({"engine": "vllm", "opt_vllm_block_size": "-1"})
    assert "`opt_vllm_block_size=-1` refused: block_size must be a positive integer, got -1" in refusals(at)
    assert not at.error and at.metric[0].value == "1.00 GiB" and at.text_input(key="opt_vllm_block_size").value == ""


@pytest.mark.parametrize("query, page, refused", [
    ({"util": "7"}, "ui/fit.py", "`util=7` refused"),
    ({"deploy_target": "biggest"}, "ui/fit.py", "`deploy_target=biggest` refused"),
    ({"val_tokens": "lots"}, "ui/validate.py", "`val_tokens=lots` refused"),
])
def test_a_page_parameter_is_refused_on_the_first_render(query, page, refused):
    # issue 32 (Low): the pages check their own parameters while they draw, after the app had drawn the
    # refusals; the message showed only from the second render
    assert refused in refusals(opened(query, page))
