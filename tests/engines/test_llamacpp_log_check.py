"""kvmem.check_log on llama.cpp startup logs (moved from tests/logcheck/test_check_log.py: each engine's log
reader lives in kvmem/engines/llamacpp/logs.py, and its tests beside the engine's)."""

import json
import pathlib

from kvmem.logcheck import check_log

ROOT = pathlib.Path(__file__).resolve().parents[2]
LLAMACPP = json.loads((ROOT / "docs/research/engine_logs_llamacpp.json").read_text())
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


def test_the_repositorys_llamacpp_logs():
    for index, model, kwargs in LLAMACPP_REPOSITORY:
        r = check_log(LLAMACPP[index]["log"], model, **kwargs)
        assert r.engine == "llama.cpp" and r.matches, (index, r.to_dict())
    assert check_log(LLAMACPP[15]["log"], "llama-3.2-1b").settings["build"] == "2025-06-01"


def test_llamacpp_other_cells_are_named():
    # Qwen3-32B, -c 8192: read as if the server had -c 16384, the cells differ
    r = check_log(LLAMACPP[23]["log"], "qwen3-32b", n_ctx=16384)
    assert not r.matches and r.checks[0].cause.startswith("other cells: another -c, -np, --kv-unified or -ub")
