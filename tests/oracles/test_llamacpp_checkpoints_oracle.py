"""kvmem's llama.cpp context checkpoint against llama.cpp's own state size (kvmem/oracles/llamacpp_checkpoints.py)."""

from tests.oracles.conftest import require

require("llama_cpp")

from kvmem.oracles import llamacpp_checkpoints as oracle  # noqa: E402


def test_checkpoint_headers_equal_llama_cpps_state_size():
    cases = oracle.directed_cases()
    assert {model.model_type for _, model in cases} >= {"granitemoehybrid", "lfm2"}
    checks = [c for name, model in cases for c in oracle.run_case(name, model)]
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, llama.cpp {c.engine!r}" for c in checks if not c.matches]
    assert not bad, "\n".join(bad)


def test_sliding_window_checkpoints_equal_llama_cpps_state_after_a_prompt():
    cases = oracle.swa_cases()
    checks = [c for name, model, n in cases for c in oracle.run_swa_case(name, model, n)]
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, llama.cpp {c.engine!r}" for c in checks if not c.matches]
    assert not bad, "\n".join(bad)
    assert len(checks) == 8
