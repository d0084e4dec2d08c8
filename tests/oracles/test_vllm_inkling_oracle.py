"""kvmem's vllm mode on Inkling (kvmem/engines/vllm/inkling.py) against vLLM 0.33.0's planning, the conv-state
specs from vLLM's own InklingConvState and config classes (kvmem/oracles/vllm.py _inkling_specs)."""

import pytest

from tests.oracles.conftest import require

require("vllm")

from kvmem.oracles import vllm as oracle  # noqa: E402


@pytest.mark.parametrize("seed", range(20))
def test_seeded_inkling_checkpoints(seed):
    case = oracle.random_inkling_case(seed)
    bad = [c for c in oracle.run_case(*case) if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)
