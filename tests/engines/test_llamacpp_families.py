"""llama.cpp mode on the opt-in families (kvmem.configs.families): the rule each takes at the vendored
build 0c1e57098 (llama-cpp-python 0.3.36), with the bytes worked by hand, and the refusals naming what
llama.cpp's own code lacks (docs/research/families_llamacpp.md)."""

import pytest

import kvmem
from kvmem.configs.families import FAMILIES
from kvmem.engines import ENGINES, engine_estimate

SPEC = ENGINES["llama.cpp"]


def llama(model, **options):
    options.setdefault("tokens", 4096)
    return engine_estimate(model, engine="llama.cpp", **options)


def _glm5(**extra) -> kvmem.Model:
    """A GLM-5-shaped glm_moe_dsa config (zai-org/GLM-5 config.json geometry, fewer layers)."""
    config = dict(
        model_type="glm_moe_dsa", num_hidden_layers=6, hidden_size=6144, num_attention_heads=64,
        num_key_value_heads=64, kv_lora_rank=512, q_lora_rank=2048, qk_nope_head_dim=192, qk_rope_head_dim=64,
        v_head_dim=256, index_topk=2048, index_head_dim=128, index_n_heads=32, vocab_size=154880,
        intermediate_size=12288, moe_intermediate_size=2048, n_routed_experts=256, num_experts_per_tok=8,
        max_position_embeddings=202752)
    return kvmem.Model.from_hf_config({**config, **extra})


# ---- every opt-in family: sized, or refused with llama.cpp's own reason --------------------------

def test_every_opt_in_family_is_declared_or_refused_with_an_engine_reason():
    undecided = {t for t, f in FAMILIES.items() if f.opt_in and not SPEC.families.sizes(t) and t not in SPEC.refusals}
    # left to a later session, each with the reason in docs/research/families_llamacpp.md
    assert undecided <= UNDECIDED, sorted(undecided - UNDECIDED)
    for t, why in SPEC.refusals.items():
        assert t in FAMILIES and not SPEC.families.sizes(t), t
        assert "convert_hf_to_gguf.py" in why, t


def test_a_family_the_converter_lacks_is_refused_naming_the_architecture():
    m = kvmem.Model.from_hf_config(dict(model_type="xglm", num_layers=2, attention_heads=4, d_model=64,
                                        vocab_size=100))
    with pytest.raises(ValueError, match="does not size model_type 'xglm': its converter convert_hf_to_gguf.py "
                                         "has no XGLMForCausalLM"):
        llama(m, tokens=16)


# ---- DeepSeek sparse attention: llama_kv_cache_dsa --------------------------------------------

def test_deepseek_v32_keeps_the_latent_and_a_separate_indexer_cache():
    e = llama("deepseek-v3.2", tokens=4096)
    main, index = e.details.caches
    # main: 61 layers x (512 + 64) x 2 B x 4096 cells = 287,834,112 B, no V (the MLA GGUF's K-only cache)
    assert (main["cache"], main["layers"], main["k_bytes"], main["v_bytes"]) == ("kv", 61, 287_834_112, 0)
    # indexer: 61 layers x one 128-wide key x 2 B x 4096 cells = 63,963,136 B
    assert (index["cache"], index["layers"], index["k_bytes"], index["v_bytes"]) == ("kv_idx", 61, 63_963_136, 0)
    assert e.kv_bytes == 287_834_112 + 63_963_136
    assert e.log_lines == (
        "llama_kv_cache_dsa: creating main KV cache, size = 4096 cells",
        "llama_kv_cache: size =  274.50 MiB (  4096 cells,  61 layers,  1/1 seqs), K (f16):  274.50 MiB, "
        "V (f16):    0.00 MiB",
        "llama_kv_cache_dsa: creating indexer KV cache, size = 4096 cells",
        "llama_kv_cache: size =   61.00 MiB (  4096 cells,  61 layers,  1/1 seqs), K (f16):   61.00 MiB, "
        "V (f16):    0.00 MiB")


def test_the_indexer_cache_takes_type_k_and_the_streams():
    e = llama("deepseek-v3.2", tokens=1000, batch=2, type_k="q8_0", type_v="q8_0")
    index = e.details.caches[1]
    # n_ctx 2000 -> pad256 2048, 2 streams of pad256(1024) = 1024 cells; q8_0: 128 values = 4 blocks x 34 B = 136 B
    # 61 layers x 136 B x 1024 cells x 2 streams = 16,990,208 B
    assert (index["cells"], index["streams"], index["k_bytes"]) == (1024, 2, 16_990_208)


def test_glm5_indexer_layers_follow_indexer_types():
    every = llama(_glm5(), tokens=4096)
    # GLM-5 (indexer_types all "full"): 6 x 576 x 2 B x 4096 = 28,311,552 B; indexer 6 x 128 x 2 x 4096 = 6,291,456 B
    assert [c["k_bytes"] for c in every.details.caches] == [28_311_552, 6_291_456]
    # GLM-5.2: "full" on layers 0, 1, 2 of six ("shared" reuse an earlier layer's top-k): 3 x 1,048,576 B
    types = ["full", "full", "full", "shared", "shared", "shared"]
    some = llama(_glm5(indexer_types=types), tokens=4096)
    assert [(c["layers"], c["k_bytes"]) for c in some.details.caches] == [(6, 28_311_552), (3, 3_145_728)]


def test_glm_dsa_without_indexer_types_takes_llamas_default_for_its_context():
    from kvmem.engines.llamacpp.plan import indexer_widths
    # a 1M training context without indexer_types: GLM_5_2_DEFAULT_INDEXER_TYPES, layers 0, 1, 2, 6, 10
    m = _glm5(num_hidden_layers=12, max_position_embeddings=1048576)
    assert sorted(indexer_widths(m)) == [0, 1, 2, 6, 10]
    assert len(indexer_widths(_glm5(num_hidden_layers=12))) == 12


def test_dsa_refuses_an_unpinned_build_and_other_mla_modes():
    with pytest.raises(ValueError, match="build 2026-03-01 is refused"):
        llama(_glm5(), build="2026-03-01")
    with pytest.raises(ValueError, match="use mla='latent'"):
        llama(_glm5(), mla="none")


UNDECIDED = {
    'afmoe',
    'bamba',
    'cohere2_moe',
    'dbrx',
    'deepseek_v4',
    'dots1',
    'exaone4',
    'exaone_moe',
    'falcon_h1',
    'falcon_mamba',
    'gemma4_unified_text',
    'gpt_bigcode',
    'granitemoehybrid',
    'hy_v4',
    'kimi_linear',
    'laguna',
    'lfm2',
    'lfm2_moe',
    'mamba',
    'mamba2',
    'mimo_v2_flash',
    'minicpm3',
    'minimax',
    'minimax_m3_vl_text',
    'mistral4',
    'mpt',
    'nemotron-nas',
    'qwen2_5_vl_text',
    'qwen2_vl_text',
    'smollm3',
    'youtu',
}
