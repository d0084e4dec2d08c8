"""kvmem.check_log on TRT-LLM startup logs (moved from tests/logcheck/test_check_log.py: each engine's log
reader lives in kvmem/engines/trtllm/logs.py, and its tests beside the engine's)."""

import json
import pathlib

from kvmem.logcheck import check_log

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVING = json.loads((ROOT / "docs/research/engine_logs_serving.json").read_text())


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
