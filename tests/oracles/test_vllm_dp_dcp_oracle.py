"""kvmem's decode context parallelism (vLLM --decode-context-parallel-size) against vLLM 0.33.0's own KV planning on
the CPU (kvmem/oracles/vllm_dp_dcp.py): blocks, logged tokens and concurrency."""

from tests.oracles.conftest import require

require("vllm")

import pytest  # noqa: E402

from kvmem.oracles import vllm_dp_dcp as oracle  # noqa: E402


def assert_agrees(name, setting):
    checks = oracle.run_case(name, setting)
    bad = [c for c in checks if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)
    return {c.quantity: c.kvmem for c in checks}


def test_deepseek_v3_over_8_dcp_ranks():
    # 9,549 blocks of 64 tokens; a 32k request cdiv(cdiv(32,768, 8), 64) = 64 of them: 149.20x, 4,889,088 tokens
    numbers = assert_agrees(*oracle.cases()[0])
    assert (numbers["num_blocks"], numbers["KV cache size tokens"]) == (9549, 4889088)


@pytest.mark.parametrize("case", oracle.cases()[1:], ids=lambda case: case[0])
def test_directed(case):
    assert_agrees(*case)


@pytest.mark.parametrize("index", range(8))
def test_seeded_random_settings(index):
    assert_agrees(*oracle.random_case(7, index))
