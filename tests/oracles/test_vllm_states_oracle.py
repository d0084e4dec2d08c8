"""kvmem's vllm mode on Mamba / linear-attention families against vLLM 0.33.0's own model code
(kvmem/oracles/vllm_states.py): each family's get_mamba_state_shape_from_config /
get_mamba_state_dtype_from_config and the platform's _align_hybrid_block_size."""

import pytest

from tests.oracles.conftest import require

require("vllm")

from kvmem.catalog import get_model  # noqa: E402
from kvmem.oracles import vllm_states as oracle  # noqa: E402

PRESETS = {"kimi_linear": ("kimi-linear-48b-a3b",)}
SEEDS = range(8)


def assert_agrees(name, model, tp, num_spec=0):
    checks = oracle.run_case(name, model, tp, num_spec)
    bad = [c for c in checks if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)
    return checks


@pytest.mark.parametrize("tp", (1, 2, 4))
@pytest.mark.parametrize("name", [n for names in PRESETS.values() for n in names])
def test_presets(name, tp):
    checks = assert_agrees(name, get_model(name), tp)
    assert {c.quantity for c in checks} >= {"state bytes of one sequence"}


def test_kimi_linear_preset_numbers_and_speculative_columns():
    checks = {c.quantity: c.engine for c in assert_agrees("kimi", get_model("kimi-linear-48b-a3b"), 1)}
    assert checks["state bytes of one sequence"] == [2_170_880]
    assert checks["attention block size"] == 1920
    checks = {c.quantity: c.engine for c in assert_agrees("kimi", get_model("kimi-linear-48b-a3b"), 1, 2)}
    assert checks["attention block size"] == 2048


@pytest.mark.parametrize("model_type", sorted(PRESETS))
def test_seeded_random_configs(model_type):
    for seed in SEEDS:
        model = oracle.random_config(model_type, seed)
        for tp in (1, 2, 4):
            assert_agrees(f"{model_type}-{seed}-tp{tp}", model, tp, num_spec=seed % 3)
