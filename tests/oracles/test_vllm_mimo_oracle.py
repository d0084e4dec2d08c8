"""kvmem's vllm mode on MiMo-V2-Flash (sliding layers with their own KV heads, K/V widths and window)
against vLLM 0.33.0's own planning code, the specs read from the config as mimo_v2.py builds them
(kvmem/oracles/vllm.py random_mimo_case, _mimo_specs, run_case)."""

from tests.oracles.conftest import require

require("vllm")

from kvmem.oracles import vllm as oracle  # noqa: E402


def test_seeded_mimo_v2_flash_shapes():
    for seed in range(40):
        case = oracle.random_mimo_case(seed)
        bad = [c for c in oracle.run_case(*case) if not c.matches]
        assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)
