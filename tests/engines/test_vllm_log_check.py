"""kvmem.check_log on vLLM startup logs (moved from tests/logcheck/test_check_log.py: each engine's log
reader lives in kvmem/engines/vllm/logs.py, and its tests beside the engine's)."""

import json
import pathlib

from kvmem.logcheck import check_log

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVING = json.loads((ROOT / "docs/research/engine_logs_serving.json").read_text())
# Qwen2.5-7B-AWQ on a 16 GB card (tests/engines/test_vllm.py test_qwen25_7b_awq_format_gib): 8.0 GiB -> 149,712
VLLM_LOG = ("INFO 05-02 10:00:01 [gpu_worker.py:232] Available KV cache memory: 8.0 GiB\n"
            "INFO 05-02 10:00:01 [kv_cache_utils.py:566] GPU KV cache size: 149,712 tokens\n"
            "INFO 05-02 10:00:01 [kv_cache_utils.py:569] Maximum concurrency for 32,768 tokens per request: 4.57x\n")


def test_vllm_v1_log_matches_and_states_its_settings():
    r = check_log(VLLM_LOG, "qwen2.5-7b")
    assert r.engine == "vllm" and r.matches
    assert r.settings == {"max_model_len": 32768, "available_kv_cache_memory_gib": 8.0, "gpu_kv_cache_tokens": 149712}
    # 7.995..8.005 GiB // 917,504 B per block = 9,356..9,368 blocks of 16 tokens (57,344 B/token)
    assert r.checks[0].kvmem == "149,696 to 149,888 tokens"


def test_vllm_a_setting_the_log_did_not_have_is_named():
    # given fp8 KV, kvmem holds twice the tokens in the same memory: the log's server ran another KV dtype
    r = check_log(VLLM_LOG, "qwen2.5-7b", kv_dtype="fp8")
    tokens, concurrency = r.checks
    assert not tokens.matches and tokens.cause.startswith("fewer tokens than kvmem finds for this memory: a setting")
    # fp8: 28,672 B/token (458,752 B blocks), 7.995..8.005 GiB -> 18,712..18,736 blocks / 2,048 a request = 9.14..9.15x
    assert not concurrency.matches and concurrency.cause.startswith("fewer requests than kvmem's pool holds")
    assert concurrency.kvmem == "9.14x to 9.15x" and r.inputs["kv_dtype"] == ("fp8", "given")


def test_vllm_available_memory_below_the_plan_is_the_profile_peak():
    r = check_log(VLLM_LOG, "qwen2.5-7b", expected_kv_memory=int(8.4 * (1 << 30)))
    c = r.checks[0]
    assert c.quantity == "Available KV cache memory" and not c.matches
    assert c.cause.startswith("Available KV cache memory is 409.60 MiB below the plan: the profile run's peak")


def test_vllm_rank_memory_case_from_the_repository_is_named():
    # docs/research: Qwen3-235B-A22B-FP8 tp 4 prints one rank's 'Available' (8.11 GiB) beside 178,880 tokens
    r = check_log(SERVING[7]["log"], "qwen3-235b-a22b", tp=4, max_model_len=40960)
    assert not r.matches and "another rank's" in r.checks[0].cause


def test_vllm_v0_logs_from_the_repository_match():
    # Llama-3.1-8B on an RTX 3090, v0: kv_cache_size=3.81 / 2.89 GiB -> 1,952 / 1,478 blocks (both spellings)
    for i, blocks in ((0, 1952), (1, 1478)):
        r = check_log(SERVING[i]["log"], "llama-3.1-8b")
        assert r.matches and r.settings["num_gpu_blocks"] == blocks
        # the weights line (14.9888 GiB = 16,060,522,496 B of bf16 + vLLM's 32 MiB rotary cache, 4 decimals),
        # the blocks and the concurrency (1,952 x 16 / 20,000 = 1.56x; 1,478 x 16 / 29,000 = 0.82x)
        assert [c.quantity for c in r.checks] == ["Model loading (weights)", "# GPU blocks (v0)",
                                                  "Maximum concurrency"]
        assert r.checks[0].kvmem == "14.9888 GiB"
