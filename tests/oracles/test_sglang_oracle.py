"""kvmem's SGLang pools against SGLang 0.5.23's real MHA/MLA token pools built on the CPU."""

from tests.oracles.conftest import require

require("sglang")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kvmem.oracles import sglang as oracle  # noqa: E402


def assert_agrees(case):
    bad = [c for c in oracle.run_case(*case) if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}" for c in bad)


def test_every_directed_case():
    cases = oracle.directed_cases()
    assert len(cases) >= 150
    for case in cases:
        assert_agrees(case)


@given(seed=st.integers(0, 2**31), index=st.integers(0, 10**6), family=st.sampled_from(oracle.FAMILIES))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_random_architectures(seed, index, family):
    assert_agrees(oracle.random_case(seed, index, family))
