"""kvmem's vLLM CPU offload tier against vLLM 0.33.0's own CPUOffloadingSpec (kvmem/oracles/vllm_offload.py)."""

from tests.oracles.conftest import require

require("vllm")

import kvmem  # noqa: E402
from kvmem.oracles import vllm_offload as oracle  # noqa: E402

GIB = 1 << 30


def test_dense_mla_and_hybrid_tiers_equal_vllms():
    cases = oracle.directed_cases()
    assert {c["model"].name for c in cases} >= {"llama-3.1-8b", "deepseek-v2-lite", "gpt-oss-20b"}
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}"
           for case in cases for c in oracle.run_case(**case) if not c.matches]
    assert not bad, "\n".join(bad)


def test_mla_on_two_ranks_keeps_one_copy():
    # deepseek-v2-lite: 27 layers x 64 tokens x 576 x 2 B = 1,990,656 B a block, one copy for both ranks
    checks = {c.quantity: c.engine for c in oracle.run_case(
        "dsv2-lite tp2", kvmem.get_model("deepseek-v2-lite"), size_gib=100, kv_memory=10 * GIB,
        max_model_len=32768, tp=2)}
    assert checks["kv_bytes_per_chunk"] == 1_990_656
    assert checks["num_chunks"] == 53_939            # 107,374,182,400 // 1,990,656
    assert checks["replicated layout"] is True
