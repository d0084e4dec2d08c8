"""kvmem.check_log on SGLang startup logs (moved from tests/logcheck/test_check_log.py: each engine's log
reader lives in kvmem/engines/sglang/logs.py, and its tests beside the engine's)."""

import json
import pathlib

from kvmem.logcheck import check_log
from tests.engines.test_sglang import qwen35_9b

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVING = json.loads((ROOT / "docs/research/engine_logs_serving.json").read_text())
# The held-out SGLang Qwen3.5-9B TP2 log (tests/engines/test_sglang.py), both ranks' lines
QWEN35_LOG = """[2026-04-14 16:08:49 TP0] Load weight end. elapsed=5.54 s, type=Qwen3_5ForConditionalGeneration, avail mem=14.08 GB
[2026-04-14 16:08:49 TP0] Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: 0.10GB, ssm_state size: 4.38GB 
[2026-04-14 16:08:49 TP1] Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: 0.10GB, ssm_state size: 4.38GB 
[2026-04-14 16:08:49 TP0] KV Cache is allocated. #tokens: 327310, K size: 2.50 GB, V size: 2.50 GB
[2026-04-14 16:08:49 TP1] KV Cache is allocated. #tokens: 327310, K size: 2.50 GB, V size: 2.50 GB
"""  # noqa: W291  (SGLang's Mamba line ends with a space)


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
