"""kvmem's llama.cpp output buffer and n_outputs_max (kvmem.engines.llamacpp.draft) against llama.cpp's own
lines (kvmem/oracles/llamacpp_draft.py)."""

from tests.oracles.conftest import require

require("llama_cpp")

from kvmem.oracles import llamacpp_draft as oracle  # noqa: E402


def test_output_buffer_and_n_outputs_max_equal_llama_cpps():
    cases = oracle.directed_cases()
    assert len(cases) == 5
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, llama.cpp {c.engine!r}"
           for name, case in cases for c in oracle.run_case(name, case) if not c.matches]
    assert not bad, "\n".join(bad)
