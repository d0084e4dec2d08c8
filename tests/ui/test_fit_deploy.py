"""Fit page: the engine's numbers, the formats in the headline and chart, the real reserve and the
shortfall, and the Deploy panel's command in the shared URL (issues #21 items 1 and 4, #23 items 1, 7, 15)."""

import json

import kvmem
from tests.ui.apptest import load

SEVENTY_B = {"model": "llama-3.3-70b", "gpu": "h100-sxm-80gb", "num_gpus": "2", "tp": "2", "tokens": "32k",
             "kv_dtype": "fp8", "weight_dtype": "fp8"}


def _page(params: dict):
    at = load("ui/fit.py")
    at.query_params.update(params)
    return at.run()


def test_engine_numbers_formats_and_the_deploy_command():
    at = _page({**SEVENTY_B, "deploy_target": "largest batch"})
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    # kvmem.fit's own (activations at max_num_seqs 14, the largest batch, as the command sets it)
    assert metrics["GPU KV cache size (tokens)"] == "465,664"
    assert metrics["Concurrency at 32,768 tokens"] == "14.21x"
    assert any(c.value.startswith("Estimated: it depends on the profile run's peak") for c in at.caption)
    assert at.subheader[0].value.replace("\\", "") == "llama-3.3-70b on 2 × h100-sxm-80gb (KV fp8, weights fp8): fits"
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert "KV fp8, weights fp8" in title
    expected = kvmem.plan("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, tp=2, context="32k", batch=1,
                          kv_dtype="fp8", weight_dtype="fp8", engine="vllm", target="max_batch")
    codes = [c.value for c in at.code]
    assert expected.command in codes and "--max-num-seqs 14" in expected.command
    assert at.radio(key="deploy_target").value == "largest batch"


def test_not_fitting_has_no_command_no_decode_bound_and_draws_the_shortfall_apart():
    at = _page({"model": "llama-3.3-70b", "gpu": "h100-sxm-80gb", "num_gpus": "2", "tokens": "32k", "kv_dtype": "bf16"})
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Decode bound at batch 1"] == "—"
    # one shortfall on the page (the fit's refusal); the Deploy box refers to it, no "No command: no command:"
    assert [i.value for i in at.info if i.value.startswith("No command")] == [
        "No command: the workload does not fit (the shortfall and what would fit are above)."]
    assert sum("short by" in e.value for e in at.error) == 1 and not at.warning
    traces = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    by_name = {t["name"]: t["x"][0] for t in traces}
    assert round(by_name["reserve outside vLLM's budget (1 − gpu_memory_utilization)"], 2) == 7.92
    assert round(by_name["short of vllm's KV budget"], 2) == 1.35


def test_a_pasted_log_without_settings_is_read_under_the_sidebars():
    # 8 GiB for Llama-3.1-8B bf16 (131,072 B/token): 65,536 tokens, 8.00x at 8,192; the same log read with fp8 KV
    # is named. The log prints no setting, so the sidebar's fill in (and the page says so).
    log = ("INFO [gpu_worker.py:232] Available KV cache memory: 8.00 GiB\n"
           "INFO [kv_cache_utils.py:1149] GPU KV cache size: 65,536 tokens, Maximum concurrency for 8,192 tokens "
           "per request: 8.00x\n")
    at = load("ui/fit.py").run()
    at.text_area(key="deploy_log").set_value(log).run()
    assert not at.exception and not at.warning
    assert [s.value for s in at.success] == ["Line 2, GPU KV cache size: matches (65,536 tokens).",
                                             "Line 2, Maximum concurrency: matches (8.00x)."]
    assert any(c.value.startswith("Read under: model llama-3.1-8b (the sidebar; the log names no model); kv_dtype auto (the sidebar)")
               for c in at.caption)
    # the plan's budget is shown beside the log's, not checked against it (the log is not the plan's run)
    assert any(c.value == "The Deploy plan budgets 54.72 GiB of KV per GPU; this server had 8.00 GiB (its profile "
                          "run, weights and settings)." for c in at.caption)
    at.selectbox(key="kv_dtype").set_value("fp8").run()
    # fp8: 65,536 B/token, 7.995..8.005 GiB -> 130,976..131,152 tokens in blocks of 16
    assert any(w.value.startswith("Line 2, GPU KV cache size: logged 65,536 tokens, kvmem 130,976 to 131,152 tokens. "
                                  "fewer tokens than kvmem finds") for w in at.warning)


def test_a_pasted_log_is_checked_under_the_settings_it_prints():
    # issue 33 item 7: the app compared a log with its Deploy plan; a log that prints its settings (vLLM 0.33's
    # non-default args and config line: Qwen2.5-7B, fp8 KV, 32k) is read under them whatever the sidebar says
    # (Llama-3.1-8B, bf16 KV, 8k). By hand: 28,672 B/token fp8, 8.0 GiB -> 299,392..299,776 tokens, 9.14x..9.15x.
    from tests.logcheck.test_printed_settings import V1_LOG
    at = load("ui/fit.py").run()
    at.text_area(key="deploy_log").set_value(V1_LOG).run()
    assert not at.exception and not at.warning and not at.error
    assert [s.value for s in at.success] == ["Line 4, GPU KV cache size: matches (299,520 tokens).",
                                             "Line 4, Maximum concurrency: matches (9.14x)."]
    read = next(c.value for c in at.caption if c.value.startswith("Read under: "))
    assert "model qwen2.5-7b (log line 1: 'Qwen/Qwen2.5-7B-Instruct'); " in read
    assert "kv_dtype fp8 (log line 1)" in read and "tp 1 (log line 2)" in read


def test_the_log_box_is_capped_and_a_hostile_paste_is_refused_by_line():
    # issue 32 H2/M2: a 1 MB paste held the page 55-80 s (a quadratic pattern); a 400-digit number was
    # "Something went wrong" (OverflowError); the box holds at most MAX_PASTE_CHARS (Streamlit cuts a longer
    # value to it) and says so when a paste fills it
    import time

    from ui.deploy import MAX_PASTE_CHARS
    at = load("ui/fit.py").run()
    started = time.perf_counter()
    at.text_area(key="deploy_log").set_value("Memory profiling results: " * 40_000).run()     # 1.04 MB
    assert not at.exception and time.perf_counter() - started < 20
    assert any(i.value.startswith("no line kvmem can check") for i in at.info)
    at.text_area(key="deploy_log").set_value("Available KV cache memory: " + "9" * 400 + " GiB\n").run()
    assert not at.exception
    assert at.error[0].value.startswith("The log could not be checked: log line 1 ('Available KV cache memory: 999")
    assert "a 400-character number" in at.error[0].value
    assert at.text_area(key="deploy_log").max_chars == MAX_PASTE_CHARS == 2_000_000
    at.text_area(key="deploy_log").set_value("x" * MAX_PASTE_CHARS).run()
    assert at.warning[0].value.startswith("The paste reached the box's limit of 2,000,000 characters")


def test_one_will_print_prediction_from_the_commands_record():
    # issue 33 finding 3: the page and its Deploy box each drew a "vLLM will print" block; now one, from the
    # plan's Fit where there is a command (largest batch: 14 sequences, 465,664 tokens), said for it
    at = _page({**SEVENTY_B, "deploy_target": "largest batch"})
    expected = kvmem.plan("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, tp=2, context="32k", batch=1,
                          kv_dtype="fp8", weight_dtype="fp8", engine="vllm", target="max_batch")
    printed = "\n".join(expected.fit.engine_numbers.lines)
    assert [c.value for c in at.code].count(printed) == 1
    assert sum(c.value.startswith("Available KV cache memory") for c in at.code) == 1
    assert "vllm will print, for the command below (14 sequence(s) × 32,768 tokens per replica):" in [
        c.value for c in at.caption]
