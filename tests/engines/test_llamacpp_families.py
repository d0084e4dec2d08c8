"""llama.cpp mode on the opt-in families (kvmem.configs.families): the rule each takes at the vendored
build 0c1e57098 (llama-cpp-python 0.3.36), with the bytes worked by hand, and the refusals naming what
llama.cpp's own code lacks (docs/research/families_llamacpp.md)."""

import pytest

import kvmem
from kvmem.configs.families import FAMILIES
from kvmem.engines import ENGINES, engine_estimate
from kvmem.errors import EngineRefusal

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
    with pytest.raises(EngineRefusal) as refused:
        llama(m, tokens=16)
    assert refused.value.engine == "llama.cpp"
    assert refused.value.reason.startswith("its converter convert_hf_to_gguf.py has no XGLMForCausalLM")


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
    from kvmem.engines.llamacpp.indexers import indexer_widths
    # a 1M training context without indexer_types: GLM_5_2_DEFAULT_INDEXER_TYPES, layers 0, 1, 2, 6, 10
    m = _glm5(num_hidden_layers=12, max_position_embeddings=1048576)
    assert sorted(indexer_widths(m)) == [0, 1, 2, 6, 10]
    assert len(indexer_widths(_glm5(num_hidden_layers=12))) == 12


def test_hy_v4_indexer_layers_by_indexer_types_else_sparse_layer_types_else_none():
    base = dict(model_type="hy_v4", num_hidden_layers=4, hidden_size=1024, num_attention_heads=8,
                num_key_value_heads=8, kv_lora_rank=512, q_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                v_head_dim=128, head_dim=64, index_topk=256, index_head_dim=128, index_n_heads=4, vocab_size=1000,
                intermediate_size=2048)
    shared = llama(_m(**base, indexer_types=["full", "shared", "full", "shared"]))
    # latent: 4 x 576 x 2 B x 4096 = 18,874,368 B; indexer on layers 0 and 2: 2 x 128 x 2 B x 4096 = 2,097,152 B
    assert [(c["cache"], c["layers"], c["k_bytes"]) for c in shared.details.caches] == [
        ("kv", 4, 18_874_368), ("kv_idx", 2, 2_097_152)]
    # neither indexer_types nor sparse layer_types: conversion/hy_v4.py writes no DSA, one latent cache
    assert _kv(llama(_m(**base))) == [("kv", 4, 4096, 18_874_368, 0)]


def test_dsa_lays_out_every_build_from_its_pr_and_refuses_other_mla_modes():
    # PR #25407 (2026-07-24) puts glm-dsa over llama_kv_cache_dsa, its indexer cache in every layer until PR #26474
    # (2026-08-03): the builds between are laid out (test_llamacpp_dsa_builds has each window)
    assert [c["cache"] for c in llama(_glm5(), build="2026-07-24").details.caches] == ["kv", "kv_idx"]
    with pytest.raises(ValueError, match="use mla='latent'"):
        llama(_glm5(), mla="none")


# the families left undecided (docs/research/families_llamacpp.md): llama.cpp runs them with caches kvmem
# does not model yet (llama_kv_cache_dsv4)
UNDECIDED = {"deepseek_v4", "deepseek_ref"}


CORPUS = "tests/fixtures/configs/corpus/"


def _m(**config) -> kvmem.Model:
    return kvmem.Model.from_hf_config(config)


def _kv(e) -> list:
    return [(c["cache"], c["layers"], c["cells"], c.get("k_bytes"), c.get("v_bytes")) for c in e.details.caches]


# ---- plain attention: the layers as kvmem reads them ----------------------------------------

_DENSE = dict(num_hidden_layers=4, hidden_size=1024, num_attention_heads=8, num_key_value_heads=2, head_dim=128,
              intermediate_size=2048, vocab_size=1000)


@pytest.mark.parametrize("model_type", ["qwen2_vl_text", "qwen2_5_vl_text", "dots1", "smollm3"])
def test_families_whose_window_llama_cpp_does_not_read_hold_n_ctx_cells(model_type):
    # src/models/qwen2vl.cpp, dots1.cpp, smollm3.cpp read no sliding_window: one cache of n_ctx cells
    config = dict(_DENSE, model_type=model_type, use_sliding_window=True, sliding_window=1024)
    if model_type == "smollm3":
        config.update(layer_types=["full_attention", "sliding_attention"] * 2)
    else:
        config.update(max_window_layers=2)
    e = llama(_m(**config), tokens=4096)
    # 4 layers x 2 heads x 128 x 2 B x 4096 cells = 8,388,608 B for K, as much for V
    assert _kv(e) == [("kv", 4, 4096, 8_388_608, 8_388_608)]


def test_mpt_dbrx_and_multi_query_gpt_bigcode():
    mpt = _m(model_type="mpt", n_layers=2, n_heads=4, d_model=256, vocab_size=100)
    # MHA: 2 layers x 4 heads x 64 x 2 B x 256 cells = 262,144 B each of K and V
    assert _kv(llama(mpt, tokens=256)) == [("kv", 2, 256, 262_144, 262_144)]
    dbrx = _m(model_type="dbrx", n_layers=2, n_heads=4, d_model=256, vocab_size=100,
              attn_config={"kv_n_heads": 1}, ffn_config={"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 2})
    # conversion/dbrx.py head_count_kv = kv_n_heads: 2 x 1 x 64 x 2 B x 256 = 65,536 B
    assert _kv(llama(dbrx, tokens=256)) == [("kv", 2, 256, 65_536, 65_536)]
    bigcode = dict(model_type="gpt_bigcode", n_layer=2, n_head=4, n_embd=256, vocab_size=100)
    assert _kv(llama(_m(**bigcode, multi_query=True), tokens=256)) == [("kv", 2, 256, 65_536, 65_536)]
    with pytest.raises(ValueError, match="multi-query only"):
        llama(_m(**bigcode, multi_query=False), tokens=256)


@pytest.mark.parametrize("model_type", ["mistral4", "youtu"])
def test_mistral4_and_youtu_convert_as_deepseek2_and_keep_the_latent_alone(model_type):
    m = _m(model_type=model_type, num_hidden_layers=3, hidden_size=1024, num_attention_heads=8,
           num_key_value_heads=8, kv_lora_rank=256,
           q_lora_rank=512, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64, vocab_size=1000,
           intermediate_size=2048)
    # 3 layers x (256 + 32) x 2 B x 4096 = 7,077,888 B, no V (hparams.is_mla())
    assert _kv(llama(m)) == [("kv", 3, 4096, 7_077_888, 0)]


def test_minicpm3_caches_per_head_keys_and_values():
    m = _m(model_type="minicpm3", num_hidden_layers=2, hidden_size=2560, num_attention_heads=40,
           num_key_value_heads=40, kv_lora_rank=256, q_lora_rank=768, qk_nope_head_dim=64, qk_rope_head_dim=32,
           v_head_dim=64, vocab_size=1000, intermediate_size=6400)
    e = llama(m)
    # K: 40 heads x (64 + 32) = 3840 wide, V: 40 x 2560 / 40 = 2560 wide; x 2 layers x 2 B x 4096
    assert _kv(e) == [("kv", 2, 4096, 62_914_560, 41_943_040)]
    # not an MLA GGUF: K and V types may differ, and no mla mode applies
    assert llama(m, type_k="q8_0", type_v="f16").k_bytes == 2 * 3840 // 32 * 34 * 4096
    with pytest.raises(ValueError, match="no MLA split cache"):
        llama(m, mla="latent")


# ---- sliding windows by llama.cpp's own pattern ------------------------------------------------

def _exaone4(n, **extra):
    return _m(**dict(_DENSE, model_type="exaone4", num_hidden_layers=n, sliding_window=4096,
                     sliding_window_pattern=4, **extra))


def test_exaone4_has_a_window_only_with_64_layers():
    # src/models/exaone4.cpp: swa_type is set for n_layer == 64 alone; 8 layers: one n_ctx cache,
    # 8 x 2 x 128 x 2 B x 8192 = 33,554,432 B of K
    assert _kv(llama(_exaone4(8), tokens=8192)) == [("kv", 8, 8192, 33_554_432, 33_554_432)]
    e = llama(_exaone4(64), tokens=8192)
    # 64 layers, every 4th full: 16 full of 8192 cells, 48 sliding of pad256(4096 + 512) = 4608 cells
    assert [(c["cache"], c["layers"], c["cells"]) for c in e.details.caches] == [("kv", 16, 8192), ("kv_swa", 48, 4608)]


def test_exaone_moe_takes_the_one_sliding_window():
    m = _m(**dict(_DENSE, model_type="exaone_moe", num_hidden_layers=4, sliding_window=128,
                  layer_types=["sliding_attention"] * 3 + ["full_attention"],
                  sliding_windows=[128, 256, 128, None], num_experts=4, num_experts_per_tok=2,
                  moe_intermediate_size=64))
    e = llama(m, tokens=4096)
    # n_swa = 128 (conversion/exaone.py): pad256(128 + 512) = 768 cells for the three sliding layers
    assert (e.details.n_swa, e.details.swa_cells) == (128, 768)


def test_afmoe_slides_three_layers_of_four_whatever_the_config_says():
    base = dict(_DENSE, model_type="afmoe", num_hidden_layers=8, sliding_window=1024, num_experts=4,
                num_experts_per_tok=2, moe_intermediate_size=64)
    e = llama(_m(**base, global_attn_every_n_layers=4), tokens=4096)
    # full on layers 3 and 7: 2 x 2 x 128 x 2 B x 4096 = 4,194,304 B of K; sliding: 6 x 256 x 2 B x
    # pad256(1024 + 512) = 1536 cells = 4,718,592 B of K
    assert _kv(e) == [("kv", 2, 4096, 4_194_304, 4_194_304), ("kv_swa", 6, 1536, 4_718_592, 4_718_592)]
    with pytest.raises(ValueError, match="llama.cpp makes layer 1 sliding"):
        llama(_m(**base, global_attn_every_n_layers=2), tokens=4096)


def test_cohere2_moe_follows_layer_types():
    types = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
    m = _m(**dict(_DENSE, model_type="cohere2_moe", sliding_window=512, layer_types=types, num_experts=4,
                  num_experts_per_tok=2, moe_intermediate_size=64))
    e = llama(m, tokens=4096)
    # 1 full layer of 4096 cells: 1 x 256 x 2 B x 4096 = 2,097,152 B; 3 sliding of pad256(512 + 512) = 1024 cells
    assert _kv(e) == [("kv", 1, 4096, 2_097_152, 2_097_152), ("kv_swa", 3, 1024, 1_572_864, 1_572_864)]


def test_laguna_xs2_and_a_config_against_llamas_pattern():
    e = llama(kvmem.Model.from_hf_config(CORPUS + "poolside--Laguna-XS.2-FP8.json"), tokens=4096)
    # 40 layers, full where il % 4 == 0: 10 x 8 x 128 x 2 B x 4096 = 83,886,080 B of K; 30 sliding of
    # pad256(512 + 512) = 1024 cells: 30 x 1024 x 2 B x 1024 = 62,914,560 B of K
    assert _kv(e) == [("kv", 10, 4096, 83_886_080, 83_886_080), ("kv_swa", 30, 1024, 62_914_560, 62_914_560)]
    every_full = _m(**dict(_DENSE, model_type="laguna", sliding_window=512, layer_types=["full_attention"] * 4))
    with pytest.raises(ValueError, match="llama.cpp makes layer 1 sliding"):
        llama(every_full)


def test_mimo_v2_flash_takes_the_configs_window_not_window_plus_one():
    m = kvmem.Model.from_hf_config(CORPUS + "XiaomiMiMo--MiMo-V2-Flash.json")
    e = llama(m, tokens=4096, n_ubatch=128)
    # n_swa 128 + n_ubatch 128 = 256 cells (129 + 128 would pad to 512). Full: 9 layers x 4 heads x 192 x 2 B x 4096
    # = 56,623,104 B of K, V 9 x 4 x 128 x 2 x 4096 = 37,748,736 B; sliding 39 x 8 x 192 x 2 x 256 = 30,670,848 B
    # of K, 39 x 8 x 128 x 2 x 256 = 20,447,232 B of V
    assert _kv(e) == [("kv", 9, 4096, 56_623_104, 37_748_736), ("kv_swa", 39, 256, 30_670_848, 20_447_232)]


# ---- recurrent state: llama.cpp's n_embd_r / n_embd_s -----------------------------------------

def test_mamba_and_mamba2_state_rows():
    mamba = _m(model_type="mamba", num_hidden_layers=2, hidden_size=768, state_size=16, conv_kernel=4, expand=2,
               intermediate_size=1536, vocab_size=100)
    # R = 3 x 1536 = 4608, S = 16 x 1536 = 24,576 values; f32, one sequence: 2 x 29,184 x 4 = 233,472 B
    assert llama(mamba, tokens=16).state_bytes == 233_472
    falcon = _m(model_type="falcon_mamba", num_hidden_layers=2, hidden_size=768, state_size=16, conv_kernel=4,
                expand=2, intermediate_size=1536, vocab_size=100)
    assert llama(falcon, tokens=16).state_bytes == 233_472
    mamba2 = _m(model_type="mamba2", num_hidden_layers=2, hidden_size=1024, state_size=64, conv_kernel=4, expand=2,
                n_groups=2, head_dim=64, num_heads=32, vocab_size=100)
    # d_inner 2048: R = 3 x (2048 + 2 x 2 x 64) = 6912, S = 64 x 2048 = 131,072; 2 x 137,984 x 4 = 1,103,872 B
    assert llama(mamba2, tokens=16).state_bytes == 1_103_872


def _hybrid(model_type, **extra):
    return _m(**{**dict(model_type=model_type, num_hidden_layers=4, hidden_size=1024, num_attention_heads=8,
                        num_key_value_heads=2, mamba_n_heads=32, mamba_d_head=64, mamba_n_groups=1, mamba_d_state=64,
                        mamba_d_conv=4, mamba_expand=2, intermediate_size=2048, vocab_size=100), **extra})


def test_mamba2_hybrids():
    granite = _hybrid("granitemoehybrid", layer_types=["mamba", "attention", "mamba", "mamba"])
    e = llama(granite, tokens=4096)
    # attention: 1 layer x 2 x 128 x 2 B x 4096 = 2,097,152 B of K; 3 Mamba2 layers: d_inner 2 x 1024,
    # R = 3 x (2048 + 2 x 64) = 6528, S = 64 x 2048 = 131,072: 3 x 137,600 x 4 B = 1,651,200 B
    assert (e.k_bytes, e.state_bytes) == (2_097_152, 1_651_200)
    bamba = _hybrid("bamba", attn_layer_indices=[1])
    assert (llama(bamba, tokens=4096).k_bytes, llama(bamba, tokens=4096).state_bytes) == (2_097_152, 1_651_200)
    with pytest.raises(ValueError, match="asserts d_inner = 2 x hidden_size"):
        llama(_hybrid("bamba", attn_layer_indices=[1], mamba_expand=4, mamba_n_heads=64), tokens=16)
    falcon = _hybrid("falcon_h1", mamba_d_ssm=2048)
    e = llama(falcon, tokens=4096)
    # every layer both: 4 x 2,097,152 B of K, 4 x 137,600 x 4 B = 2,201,600 B of state
    assert (e.k_bytes, e.state_bytes) == (8_388_608, 2_201_600)


def test_lfm2_short_convolution_rows():
    e = llama(kvmem.Model.from_hf_config("tests/fixtures/configs/new/lfm2.5-1.2b-finetune.json"), tokens=4096)
    # 10 conv layers x 2048 x (3 - 1) x 4 B = 163,840 B; 6 attention layers x 8 x 64 x 2 B x 4096 = 25,165,824 B of K
    assert (e.state_bytes, e.k_bytes) == (163_840, 25_165_824)
    moe = _m(model_type="lfm2_moe", num_hidden_layers=2, hidden_size=512, num_attention_heads=8, num_key_value_heads=2,
             conv_L_cache=3, layer_types=["conv", "full_attention"], num_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=64, intermediate_size=1024, vocab_size=100)
    # 1 conv layer x 512 x 2 x 4 B = 4096 B
    assert llama(moe, tokens=16).state_bytes == 4096


def test_kimi_linear_kda_and_mla():
    e = llama(kvmem.Model.from_hf_config(CORPUS + "moonshotai--Kimi-Linear-48B-A3B-Instruct.json"), tokens=4096)
    # 7 MLA layers x 576 x 2 B x 4096 = 33,030,144 B, no V; 20 KDA layers: R = 3 x 3 x 32 x 128 = 36,864,
    # S = 128 x 128 x 32 = 524,288 values, f32: 20 x 561,152 x 4 = 44,892,160 B
    assert (e.k_bytes, e.v_bytes, e.state_bytes) == (33_030_144, 0, 44_892_160)


def test_minimax_lightning_layers():
    m = kvmem.Model.from_hf_config("tests/fixtures/configs/new/minimax-m1.json")
    e = llama(m, tokens=4096)
    # 10 full layers x 8 x 128 x 2 B x 4096 = 83,886,080 B of K; 70 lightning layers: S = 128 x 128 x 64 values, f32,
    # no R: 70 x 1,048,576 x 4 = 293,601,280 B
    assert (e.k_bytes, e.state_bytes) == (83_886_080, 293_601_280)


def test_nemotron_nas_blocks_without_attention_keep_zero_wide_rows():
    m = kvmem.Model.from_hf_config(CORPUS + "nvidia--Llama-3_3-Nemotron-Super-49B-v1.json")
    on, off = llama(m, flash_attn=True), llama(m, flash_attn=False)
    # 49 attention blocks x 8 x 128 x 2 B x 4096 = 411,041,792 B of K; all 80 blocks in the cache
    assert (on.details.caches[0]["layers"], on.k_bytes, on.v_bytes) == (80, 411_041_792, 411_041_792)
    # without flash attention every block's V row is padded to 1024: 80 x 1024 x 2 B x 4096 = 671,088,640 B
    assert (off.k_bytes, off.v_bytes) == (411_041_792, 671_088_640)


def _minimax_m3(n=6, dense=2, **extra) -> kvmem.Model:
    """A MiniMax-M3-shaped text config (the geometry of MiniMax-M3: 4 KV heads of 128, a 128-wide indexer key;
    fewer layers), with sparse_attention_config and moe_layer_freq as llama.cpp's converter reads them."""
    freq = [0] * dense + [1] * (n - dense)
    return _m(**{**dict(model_type="minimax_m3_vl_text", num_hidden_layers=n, hidden_size=6144, num_attention_heads=64,
                        num_key_value_heads=4, head_dim=128, moe_layer_freq=freq, vocab_size=1000,
                        intermediate_size=3072, num_local_experts=8, num_experts_per_tok=2,
                        sparse_attention_config=dict(sparse_attention_freq=freq, sparse_index_dim=128,
                                                     sparse_num_index_heads=4, sparse_block_size=128,
                                                     sparse_topk_blocks=16, sparse_local_block=1)), **extra})


def test_minimax_m3_msa_keeps_an_indexer_cache_with_one_value_head():
    e = llama(_minimax_m3(), tokens=4096)
    # main: 6 layers x 4 heads x 128 x 2 B x 4096 = 25,165,824 B each of K and V; indexer on the 4 layers after the
    # 2 leading dense ones (moe_layer_freq): one 128-wide K and one 128-wide V head, 4 x 128 x 2 x 4096 = 4,194,304 B
    assert _kv(e) == [("kv", 6, 4096, 25_165_824, 25_165_824), ("kv_idx", 4, 4096, 4_194_304, 4_194_304)]
    assert e.log_lines[0] == "llama_kv_cache_msa: creating main KV cache, size = 4096 cells"
    with pytest.raises(ValueError, match="sparse_attention_config"):
        llama(_m(**dict(_DENSE, model_type="minimax_m3_vl_text", layer_types=["full_attention"] * 4)))


def test_new_2026_families():
    # MiMo-7B: MiMoForCausalLM is not in the converter's TEXT_MODEL_MAP
    m = _m(**dict(_DENSE, model_type="mimo"))
    with pytest.raises(ValueError, match="has no MiMoForCausalLM"):
        llama(m)
    # EXAONE-4.5's text model converts as exaone4 (conversion/exaone.py Exaone4_5_TextModel): 8 layers, no window
    m = _m(**dict(_DENSE, model_type="exaone4_5_text", num_hidden_layers=8, sliding_window=4096,
                  sliding_window_pattern=4))
    assert _kv(llama(m, tokens=8192)) == [("kv", 8, 8192, 33_554_432, 33_554_432)]
    # Step-3.5: the converter needs num_attention_groups (conversion/step3.py L149)
    step = dict(_DENSE, model_type="step3p5", sliding_window=512,
                layer_types=["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"])
    with pytest.raises(ValueError, match="num_attention_groups"):
        llama(_m(**step))
    e = llama(_m(**step, num_attention_groups=2), tokens=4096)
    # 1 full layer: 2 x 128 x 2 B x 4096 = 2,097,152 B of K; 3 sliding of pad256(512 + 512) = 1024 cells: 1,572,864 B
    assert _kv(e) == [("kv", 1, 4096, 2_097_152, 2_097_152), ("kv_swa", 3, 1024, 1_572_864, 1_572_864)]
    # sliding layers' K/V heads from attention_other_setting (conversion/step3.py L152), which kvmem does not read
    with pytest.raises(ValueError, match="4 in llama.cpp's step35 GGUF"):
        llama(_m(**step, num_attention_groups=2, attention_other_setting={"num_attention_groups": 4}))
