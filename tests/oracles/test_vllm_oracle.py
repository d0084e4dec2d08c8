"""kvmem's vllm mode against vLLM 0.33.0's own planning code (kvmem/oracles/vllm.py)."""

from tests.oracles.conftest import require

require("vllm")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import kvmem  # noqa: E402
from kvmem.oracles import vllm as oracle  # noqa: E402

GIB = 1 << 30


def assert_agrees(case):
    bad = [c for c in oracle.run_case(*case) if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)


def test_the_issue_cases_give_vllms_numbers():
    # gemma-3-27b, 20 GiB, 32k: 62,557 tokens / 1.91x (in-flight tokens x 2 with async scheduling);
    # qwen3-8b, 3 GiB, auto-fit: 21,824 (the null block held back)
    gemma = kvmem.get_model("gemma-3-27b")
    checks = {c.quantity: c for c in oracle.run_case("gemma", gemma, dict(kv_memory=20 * GIB, max_model_len=32768))}
    assert checks["KV cache size tokens"].engine == checks["KV cache size tokens"].kvmem == 62_557
    assert checks["maximum concurrency (log, 2 decimals)"].engine == "1.91"
    qwen = kvmem.get_model("qwen3-8b")
    checks = {c.quantity: c for c in oracle.run_case("qwen", qwen, dict(kv_memory=3 * GIB, max_model_len=None))}
    assert checks["auto-fit max_model_len"].engine == checks["auto-fit max_model_len"].kvmem == 21_824


def test_every_directed_case():
    cases = oracle.directed_cases()
    assert len(cases) > 200
    for case in cases:
        assert_agrees(case)


@given(seed=st.integers(0, 2**31), index=st.integers(0, 10**6), family=st.sampled_from(oracle.FAMILIES))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_random_architectures(seed, index, family):
    assert_agrees(oracle.random_case(seed, index, family))
