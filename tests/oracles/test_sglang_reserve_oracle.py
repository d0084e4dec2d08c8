"""kvmem's default SGLang mem_fraction_static (activation + CUDA-graph reserve) against SGLang 0.5.23's own
ServerArgs resolution (kvmem/oracles/sglang_reserve.py)."""

from tests.oracles.conftest import require

require("sglang")

from kvmem.oracles import sglang_reserve as oracle  # noqa: E402


def test_default_mem_fraction_static_equals_sglangs():
    cases = oracle.directed_cases()
    assert len(cases) == 31
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}"
           for case in cases for c in oracle.run_case(**case) if not c.matches]
    assert not bad, "\n".join(bad)
