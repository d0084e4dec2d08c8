"""kvmem.check_log and `kvmem check-log`: real startup logs against kvmem, with the cause of a difference
(issue #21 item 3: vLLM V0 and V1, SGLang, llama.cpp, TRT-LLM)."""

import json
import pathlib
import subprocess
import sys

import kvmem
from kvmem.logcheck import check_log
from tests.engines.test_sglang import qwen35_9b

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVING = json.loads((ROOT / "docs/research/engine_logs_serving.json").read_text())
# Qwen2.5-7B-AWQ on a 16 GB card (tests/engines/test_vllm.py test_qwen25_7b_awq_format_gib): 8.0 GiB -> 149,712
VLLM_LOG = ("INFO 05-02 10:00:01 [gpu_worker.py:232] Available KV cache memory: 8.0 GiB\n"
            "INFO 05-02 10:00:01 [kv_cache_utils.py:566] GPU KV cache size: 149,712 tokens\n"
            "INFO 05-02 10:00:01 [kv_cache_utils.py:569] Maximum concurrency for 32,768 tokens per request: 4.57x\n")
# The held-out SGLang Qwen3.5-9B TP2 log (tests/engines/test_sglang.py), both ranks' lines
QWEN35_LOG = """[2026-04-14 16:08:49 TP0] Load weight end. elapsed=5.54 s, type=Qwen3_5ForConditionalGeneration, avail mem=14.08 GB
[2026-04-14 16:08:49 TP0] Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: 0.10GB, ssm_state size: 4.38GB 
[2026-04-14 16:08:49 TP1] Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: 0.10GB, ssm_state size: 4.38GB 
[2026-04-14 16:08:49 TP0] KV Cache is allocated. #tokens: 327310, K size: 2.50 GB, V size: 2.50 GB
[2026-04-14 16:08:49 TP1] KV Cache is allocated. #tokens: 327310, K size: 2.50 GB, V size: 2.50 GB
"""  # noqa: W291  (SGLang's Mamba line ends with a space)


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


def test_sglang_logs_from_the_repository_match():
    for i in (16, 19):   # Llama-3.1-8B, SGLang ~v0.4.4 and mid-2025 (no dtype field)
        r = check_log(SERVING[i]["log"], "llama-3.1-8b")
        assert r.engine == "sglang" and r.matches, r.to_dict()
        assert r.settings["dtype_in_log"] is False


def test_sglang_hybrid_log_matches_once_per_line_and_tp_mismatch_is_named():
    r = check_log(QWEN35_LOG, qwen35_9b(), tp=2)
    assert r.matches and [c.quantity for c in r.checks] == ["Mamba Cache is allocated", "KV Cache is allocated"]
    assert r.settings["max_mamba_cache_size"] == 186 and r.settings["tokens"] == [327310]
    wrong = check_log(QWEN35_LOG, qwen35_9b(), tp=1)
    assert not wrong.matches and any("--tp-size" in c.cause for c in wrong.checks)


def test_nothing_to_check_says_so_and_unknown_engines_are_not_misread():
    r = check_log("hello\nGPU memory: 80 GiB\n", "llama-3.1-8b")
    assert not r.checks and not r.matches and r.notes[0].startswith("no line kvmem can check")
    # TRT-LLM v0.5 states the tokens alone (docs/research): nothing to compare them with, and it says so
    trt = check_log(SERVING[21]["log"], "llama-2-7b")
    assert trt.engine == "trtllm" and not trt.checks and trt.settings == {"tokens": 10718}
    assert trt.notes[0].startswith("TRT-LLM lines without the memory")


def test_cli_check_log(tmp_path):
    path = tmp_path / "vllm.log"
    path.write_text(VLLM_LOG)
    ok = subprocess.run([sys.executable, "-m", "kvmem", "check-log", str(path), "--model", "qwen2.5-7b", "--json"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["matches"] is True
    bad = subprocess.run([sys.executable, "-m", "kvmem", "check-log", "-", "--model", "qwen2.5-7b", "--kv-dtype", "fp8"],
                         input=VLLM_LOG, capture_output=True, text=True)
    assert bad.returncode == 1 and "line 2: GPU KV cache size: logged 149,712 tokens" in bad.stdout
    assert kvmem.check_log is check_log


LLAMACPP = json.loads((ROOT / "docs/research/engine_logs_llamacpp.json").read_text())


def test_llamacpp_logs_from_the_repository_match():
    from tests.engines.test_llamacpp import gemma4_12b
    # Gemma-4-12B iSWA, -c 8192 -np 2: two streams of 4,096 full and 1,536 SWA cells (the log states the types)
    r = check_log(LLAMACPP[21]["log"], gemma4_12b())
    assert r.engine == "llama.cpp" and r.matches and len(r.checks) == 2
    assert r.settings == {"kv_unified": False, "n_seq": 2, "n_ctx": 8192, "type_k": "f16", "type_v": "f16"}
    # --parallel auto (4 slots, unified): "4/1 seqs", lines without their K/V part; q8_0 given as the server had it
    u = check_log(LLAMACPP[22]["log"], gemma4_12b(), type_k="q8_0", type_v="q8_0")
    assert u.matches and u.settings["kv_unified"] is True and u.settings["n_seq"] == 4
    # Qwen3.5-27B, 16 attention layers, q4_0: the KV line alone (its recurrent line is not in the excerpt)
    assert check_log(LLAMACPP[19]["log"], "qwen3.5-27b").matches


def test_llamacpp_another_cache_type_is_named():
    from tests.engines.test_llamacpp import gemma4_12b
    r = check_log(LLAMACPP[21]["log"], gemma4_12b(), type_k="q8_0")
    assert not r.matches and all(c.cause.startswith("other bytes: another cache type") for c in r.checks)


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


def test_trtllm_logs_match_and_another_kv_dtype_is_named():
    from kvmem import Model
    from tests.engines.test_trtllm import QWEN15_7B
    # TRT-LLM issue 2268: available 21.89 GiB x 0.9 -> 631 blocks of 64 tokens (fp16 cache)
    qwen = Model.from_hf_config(QWEN15_7B, name="qwen1.5-7b")
    assert check_log(SERVING[20]["log"], qwen, kv_dtype="fp16", tokens_per_block=64).matches
    docs = ("[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB, "
            "available: 70.48 GiB\n[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 4060\n"
            "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840).\n")
    r = check_log(docs, "llama-2-7b", kv_dtype="fp8", tokens_per_block=64)
    assert r.matches and [c.kvmem for c in r.checks] == ["4,060", "63.44 GiB"]
    wrong = check_log(docs, "llama-2-7b", kv_dtype="fp16", tokens_per_block=64)
    assert not wrong.matches and all(c.cause.startswith("a setting differs") for c in wrong.checks)


# Every serving log in docs/research whose model kvmem has (a preset, or the shape its test builds), with the
# settings the log's source states: what check-log makes of each. None: nothing in the log to compare with
# (a block count without memory, tokens without memory); False: a known difference, its cause named.
REPOSITORY = [
    (0, "llama-3.1-8b", {}, True), (1, "llama-3.1-8b", {}, True),                        # vLLM v0
    (2, "llama-2-7b", {}, None), (3, "llama-2-70b", dict(tp=4), None),                    # blocks only
    # tokens without the memory: a pool of exactly those tokens is searched for, and the concurrency checked over
    # the memories that give it. DeepSeek-V3 on ROCm (MI308): 107,824 is no multiple of FlashMLA's 64-token
    # blocks (kvmem's CUDA default; the nearest pool 107,840), named; Qwen3.5-27B under its source's 0.19.0 and
    # 16,384 batched tokens: 290,864 and 33.04x; DeepSeek-V3.2 tp 8 pp 4: 1,214,464 and 7.41x
    (5, "deepseek-v3", {}, False), (11, "qwen3.5-27b", dict(max_num_batched_tokens=16384, version="0.19.0"), True),
    (13, "deepseek-v3.2", dict(tp=8, pp=4), True),
    (7, "qwen3-235b-a22b", dict(tp=4, max_model_len=40960), False),   # one rank's memory (the source says so)
    (8, "qwen3-235b-a22b", dict(tp=4), False),                        # 0.3% unexplained in the source
    (10, "qwen2.5-7b", {}, True),                                                         # vLLM V1
    (15, "qwen3-235b-a22b", dict(tp=4), True), (16, "llama-3.1-8b", {}, True),            # SGLang
    (17, "llama-3.1-8b", {}, True), (19, "llama-3.1-8b", {}, True),                       # SGLang, old line
    (21, "llama-2-7b", {}, None),                                                         # TRT-LLM v0.5
    (22, "llama-2-7b", dict(kv_dtype="fp8", tokens_per_block=64), True),
]


def test_the_repositorys_serving_logs():
    for index, model, kwargs, expected in REPOSITORY:
        r = check_log(SERVING[index]["log"], model, **kwargs)
        if expected is None:
            assert not r.checks and r.notes, (index, r.to_dict())
        else:
            assert r.matches is expected, (index, r.to_dict())
            assert expected or all(c.cause for c in r.checks if not c.matches)


# The repository's llama.cpp logs whose model is a preset: each matches, the settings the log does not
# print given as the source states them (n_ubatch from --batch-size 128; n_rs_seq; flash attention on).
LLAMACPP_REPOSITORY = [
    (0, "gpt-oss-20b", dict(n_ubatch=128)),            # iSWA, q8_0, 4 devices
    (1, "qwen2.5-0.5b", {}),                           # llama_kv_cache_unified, "s/t seqs" era, unified
    (14, "llama-3.3-70b", {}), (17, "qwen3-8b", {}),   # "s/t seqs" era
    (15, "llama-3.2-1b", {}), (16, "phi-3-mini-4k", {}),   # "N seqs" era
    (18, "deepseek-r1", dict(flash_attn=True)),        # MLA split cache, K 576 + V 512, q4_0
    (19, "qwen3.5-27b", {}), (20, "qwen3.5-27b", dict(n_rs_seq=4)),   # hybrid: KV and recurrent lines
    (23, "qwen3-32b", {}),
]


def test_the_repositorys_llamacpp_logs():
    for index, model, kwargs in LLAMACPP_REPOSITORY:
        r = check_log(LLAMACPP[index]["log"], model, **kwargs)
        assert r.engine == "llama.cpp" and r.matches, (index, r.to_dict())
    assert check_log(LLAMACPP[15]["log"], "llama-3.2-1b").settings["build"] == "2025-06-01"


def test_llamacpp_other_cells_are_named():
    # Qwen3-32B, -c 8192: read as if the server had -c 16384, the cells differ
    r = check_log(LLAMACPP[23]["log"], "qwen3-32b", n_ctx=16384)
    assert not r.matches and r.checks[0].cause.startswith("other cells: another -c, -np, --kv-unified or -ub")
