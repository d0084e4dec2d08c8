"""kvmem's llama.cpp mode against llama.cpp itself (llama-cpp-python 0.3.36, no_alloc contexts)."""

from tests.oracles.conftest import require

require("llama_cpp")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kvmem.oracles import llamacpp as oracle  # noqa: E402


def assert_agrees(case):
    bad = [c for c in oracle.run_case(*case) if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, llama.cpp {c.engine!r}" for c in bad)


def test_every_directed_case():
    cases = oracle.directed_cases()
    assert len(cases) >= 200
    for case in cases:
        assert_agrees(case)


# Found by this oracle and kept (the rules are now in kvmem/engines/llamacpp/):
@example(seed=0, index=1, family="qwen2")          # head 80 x q-type with flash attention: refused
@example(seed=0, index=11, family="deepseek_v2")   # MLA GGUF, type_k != type_v: refused
@example(seed=0, index=58, family="gemma3")        # fewer layers than the pattern: empty non-SWA cache
@example(seed=0, index=66, family="llama")         # quantised row not whole blocks: llama.cpp aborts
@given(seed=st.integers(0, 2**31), index=st.integers(0, 10**6), family=st.sampled_from(oracle.FAMILIES))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_random_architectures(seed, index, family):
    assert_agrees(oracle.random_case(seed, index, family))


def test_deepseek_v32_dsa_cache_against_llama_cpp():
    # llama_kv_cache_dsa (the latent cache and the indexer cache, and their "creating" lines): the DeepSeek-V3.2
    # preset across the directed settings and 12 random deepseek32 GGUFs, about half a second each
    cases = [case for case in oracle.directed_cases() if case[0].startswith("deepseek-v3.2#")]
    assert len(cases) == 8
    for case in cases + [oracle.random_case(11, i, "deepseek_v32") for i in range(12)]:
        assert_agrees(case)


def test_mamba_recurrent_state_against_llama_cpp():
    # llama_memory_recurrent's line (R and S rows per layer and sequence, f32): 16 random Mamba / Falcon-Mamba GGUFs
    for i in range(16):
        assert_agrees(oracle.random_case(13, i, "mamba"))


def test_glm_dsa_indexer_layers_against_llama_cpp():
    # glm-dsa GGUFs with random indexer_types, or none below / at a 1M training context (GLM-5.2's default
    # pattern): the indexer cache's layers as llama.cpp's is_indexer_full marks them
    for i in range(16):
        assert_agrees(oracle.random_case(17, i, "glm_moe_dsa"))


def test_lfm2_hybrid_against_llama_cpp():
    # llama_memory_hybrid: the attention layers' KV line and the short convolutions' recurrent line
    for i in range(12):
        assert_agrees(oracle.random_case(19, i, "lfm2"))


def test_minimax_01_lightning_state_against_llama_cpp():
    # llama_memory_hybrid: the full layers' KV line (0 layers when fewer than 8 layers) and the lightning layers'
    # S rows (head_dim^2 x n_head). Left out: 3 separate streams, where llama.cpp 0c1e57098 aborts in graph
    # reserve (GGML_ASSERT(ggml_can_repeat(b, a)), e.g. random_case(23, 2, "minimax")) from 9 layers up
    cases = [oracle.random_case(23, i, "minimax") for i in range(20)]
    kept = [case for case in cases if case[2]["n_seq"] != 3 or case[2]["kv_unified"]]
    assert len(kept) >= 14
    for case in kept:
        assert_agrees(case)


def test_granite_hybrid_against_llama_cpp():
    # llama_memory_hybrid over Mamba2 layers (R = (d_conv - 1)(d_inner + 2 n_group d_state), S = d_state d_inner) and
    # attention layers, in random order
    for i in range(12):
        assert_agrees(oracle.random_case(29, i, "granitemoehybrid"))
