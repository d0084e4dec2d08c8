"""kvmem's vllm mode on GLM-5 (glm_moe_dsa: MLA + a sparse-attention indexer key on some layers) against
vLLM 0.33.0's own planning code, the indexer key as DeepseekV32IndexerCache.get_kv_cache_spec builds it
(kvmem/oracles/vllm.py random_glm_dsa_case, run_case)."""

from tests.oracles.conftest import require

require("vllm")

from kvmem.oracles import vllm as oracle  # noqa: E402


def test_seeded_glm_5_shapes():
    for seed in range(40):
        case = oracle.random_glm_dsa_case(seed)
        bad = [c for c in oracle.run_case(*case) if not c.matches]
        assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)


def test_the_deepseek_v32_preset_is_a_directed_case():
    assert any(name.startswith("deepseek-v3.2#") for name, _, _ in oracle.directed_cases())
