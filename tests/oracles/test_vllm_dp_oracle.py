"""kvmem's routed-expert share per GPU under --data-parallel-size / --enable-expert-parallel against vLLM 0.33.0's
own FusedMoEParallelConfig.make and determine_expert_map on the CPU (kvmem/oracles/vllm_dp.py)."""

from tests.oracles.conftest import require

require("vllm")

from fractions import Fraction  # noqa: E402

import pytest  # noqa: E402

from kvmem.oracles import vllm_dp as oracle  # noqa: E402


def assert_agrees(name, setting):
    checks = oracle.run_case(name, setting)
    bad = [c for c in checks if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)
    return checks[0].kvmem


def test_uneven_expert_parallel_takes_the_fuller_rank():
    # qwen3-30b-a3b on 3 replicas of tp 1 with EP: 128 experts over 3 ranks -> 43, 43, 42; the first holds 43/128
    assert oracle.vllm_share(tp=1, dp=3, experts=128, redundant=0, expert_parallel=True) == Fraction(43, 128)
    assert_agrees(*oracle.cases()[3])


@pytest.mark.parametrize("case", oracle.cases(), ids=lambda case: case[0])
def test_directed(case):
    assert_agrees(*case)


@pytest.mark.parametrize("index", range(12))
def test_seeded_random_settings(index):
    assert_agrees(*oracle.random_case(0, index))
