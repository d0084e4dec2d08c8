"""kvmem's vllm mode on attention-only families read beyond kvmem/oracles/vllm.py FAMILIES (EXAONE 4,
AFMoE, Cohere2 and Cohere2-MoE with vLLM's sliding_window + 1, DBRX, Qwen2-VL / Qwen2.5-VL's text model,
MiniCPM3 with per-head K and V, LongCat-Flash's two MLA attentions per layer, Laguna's per-layer heads,
K-EXAONE's per-layer windows, Nemotron-NAS's per-block KV heads and no-op blocks, EXAONE-4.5's and MiMo-7B's text
models, Step-3.5/3.7's num_attention_groups, MiniMax-M3's bf16 index keys in blocks of 128) against vLLM 0.33.0's
planning."""

import pytest

from tests.oracles.conftest import require

require("vllm")

from kvmem.oracles import vllm as oracle  # noqa: E402


@pytest.mark.parametrize("model_type", ("exaone4", "afmoe", "cohere2", "cohere2_moe", "dbrx", "qwen2_vl_text",
                                        "qwen2_5_vl_text", "minicpm3", "longcat_flash", "laguna", "exaone_moe",
                                        "nemotron-nas", "ernie4_5_vl_moe_text", "exaone4_5_text", "mimo", "step3p5",
                                        "minimax_m3_text", "hy_v4", "axk1", "sarvam_mla", "gpt_bigcode",
                                        "smollm3"))
def test_seeded_shapes(model_type):
    for seed in range(20):
        case = oracle.random_attention_case(model_type, seed)
        bad = [c for c in oracle.run_case(*case) if not c.matches]
        assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)


def test_validate_draws_every_opt_in_generator():
    # kvmem validate --engine vllm: the base architectures, then each opt-in family with a generator, in turn
    cases = oracle.random_cases(len(oracle.FAMILIES) + len(oracle.OPT_IN_CASES), 0)
    types = [model.model_type for _, model, _ in cases[len(oracle.FAMILIES):]]
    assert types == list(oracle.OPT_IN_CASES)
