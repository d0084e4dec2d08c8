"""DeepSeek-V4 read as transformers 5.24's modeling code caches it: hand-derived bytes, bf16, batch 1.

The config is the published DeepSeek-V4-Flash config.json, verbatim
(tests/fixtures/configs/new/deepseek-v4-flash.json, its source in SOURCES.md): 43 layers,
head_dim 512, one KV head, sliding_window 128, index_head_dim 128, compress_ratios
[0, 0, 4, 128, 4, 128, ..., 4, 0] (the 44th entry is the MTP layer's, which transformers does not
build), so layers 0-1 sliding only, 21 CSA layers (2, 4, ..., 42; compress rate 4) and 20 HCA
layers (3, 5, ..., 41; compress rate 128), the rates of DeepseekV4Config.default_compress_rates.

Per layer and sequence of t tokens (modeling_deepseek_v4.py; kvmem.layer.Compressor):
    every layer   min(t, 128) x 512 K=V rows                       (DeepseekV4Attention kv_proj)
    CSA           + floor(t / 4) x (512 + 128) compressed rows and indexer keys
                  + (t mod 4) x 2 x 640 projected tokens, kv and gate (Ca, Cb series)
                  + 4 x 640 Ca slice in kv and in an fp32 gate once a window closed
                                                                   (DeepseekV4CSACache, DeepseekV4Indexer)
    HCA           + floor(t / 128) x 512 compressed rows + (t mod 128) x 512 kv and gate
                                                                   (DeepseekV4HCACache)
"""

from pathlib import Path

import pytest

import kvmem
from kvmem import ConfigError, Model

FLASH = Path(__file__).parent.parent / "fixtures" / "configs" / "new" / "deepseek-v4-flash.json"
K, M = 1024, 131072
CSA_LAYERS, HCA_LAYERS = range(2, 43, 2), range(3, 42, 2)


@pytest.fixture(scope="module")
def flash():
    return Model.from_hf_config(FLASH)


def test_the_published_flash_config_reads_43_compressed_layers(flash):
    assert flash.num_layers == 43 and flash.kinds == {"compressed": 43}
    assert all((layer.kv_heads, layer.head_dim_k, layer.window) == (1, 512, 128) for layer in flash.layers)
    assert flash.layers[0].compressor is None and flash.layers[1].compressor is None
    csa, hca = flash.layers[2].compressor, flash.layers[3].compressor
    assert (csa.rate, csa.head_dim, csa.index_head_dim, csa.overlap) == (4, 512, 128, True)
    assert (hca.rate, hca.head_dim, hca.index_head_dim, hca.overlap) == (128, 512, 0, False)
    assert [i for i, layer in enumerate(flash.layers) if layer.compressor == csa] == list(CSA_LAYERS)
    assert [i for i, layer in enumerate(flash.layers) if layer.compressor == hca] == list(HCA_LAYERS)


def test_ideal_bytes_at_1k_and_128k(flash):
    # window: 43 x min(t, 128) x 512 x 2 B = 5,636,096 B once t >= 128
    # t = 1,024: CSA 21 x 256 x 640 x 2 B = 6,881,280; HCA 20 x 8 x 512 x 2 B = 163,840
    #            state: no token buffered (1,024 = 256 x 4 = 8 x 128); CSA's Ca slice 21 x 4 x 640 x (2 + 4) B
    e = kvmem.estimate(flash, tokens=K, kv_dtype="bf16")
    assert (e.kv_bytes, e.state_bytes) == (5_636_096 + 6_881_280 + 163_840, 322_560) == (12_681_216, 322_560)
    # t = 131,072: CSA 21 x 32,768 x 640 x 2 B = 880,803,840; HCA 20 x 1,024 x 512 x 2 B = 20,971,520
    e = kvmem.estimate(flash, tokens=M, kv_dtype="bf16")
    assert (e.kv_bytes, e.state_bytes) == (5_636_096 + 880_803_840 + 20_971_520, 322_560) == (907_411_456, 322_560)
    # the old reading, every layer a plain 128-token sliding layer of 512 K + 512 V: x0.012 of this at 128k
    assert 43 * 128 * 1024 * 2 / e.kv_bytes == pytest.approx(0.0124, abs=1e-4)


def test_ideal_buffers_the_open_window(flash):
    # t = 1,000: CSA 21 x 250 x 640 x 2 = 6,720,000; HCA 20 x 7 x 512 x 2 = 143,360;
    # 1,000 mod 128 = 104 tokens wait in each HCA layer: 20 x 104 x 512 x 2 (kv, gate) x 2 B = 4,259,840
    e = kvmem.estimate(flash, tokens=1000, kv_dtype="bf16")
    assert (e.kv_bytes, e.state_bytes) == (5_636_096 + 6_720_000 + 143_360, 4_259_840 + 322_560)
    # fp8 K/V: the rows are one byte each; the buffers stay in the model's bf16, the Ca gate in fp32
    assert kvmem.estimate(flash, tokens=K, kv_dtype="fp8").kv_bytes == 12_681_216 // 2


def test_hf_dynamic_after_one_decode_step_at_1k_and_128k(flash):
    # prompt t - 1, one decode step (modeling_deepseek_v4.py, cache_utils.py), t = 1,024:
    #   layers 0-1 (DynamicSlidingWindowLayer.update(kv, kv)): K and V apart, 2 x 2 x 128 x 512 x 2 B = 524,288
    #   41 compressed layers: one K=V view of the 128-token cat, 41 x 128 x 512 x 2 B = 5,373,952
    #   rows as ideal: 6,881,280 + 163,840
    #   CSA buffers pin the step's cat of t - 4 x floor(1,023 / 4) = 4 tokens: 21 x 4 x 1,280 x 2 x 2 B
    #       = 430,080, + the Ca slice 322,560
    #   HCA buffers pin 1,024 - 128 x 7 = 128 tokens: 20 x 128 x 512 x 2 x 2 B = 5,242,880
    e = kvmem.estimate(flash, engine="hf-dynamic", tokens=K, prompt_tokens=K - 1)
    assert e.kv_bytes == 524_288 + 5_373_952 + 6_881_280 + 163_840 == 12_943_360
    assert e.state_bytes == 430_080 + 322_560 + 5_242_880 == 5_995_520
    e = kvmem.estimate(flash, engine="hf-dynamic", tokens=M, prompt_tokens=M - 1)
    assert e.kv_bytes == 524_288 + 5_373_952 + 880_803_840 + 20_971_520 and e.state_bytes == 5_995_520


def test_hf_dynamic_right_after_a_prefill_pins_the_whole_prompt(flash):
    # a 1,024-token prefill: every window view pins the 1,024-token cat, every buffer the whole projection
    #   layers 0-1: 2 x 2 x 1,024 x 512 x 2 B = 4,194,304; 41 x 1,024 x 512 x 2 B = 42,991,616
    #   CSA 21 x (1,024 x 1,280 x 2 x 2 B + 15,360) = 110,423,040; HCA 20 x 1,024 x 512 x 2 x 2 B = 41,943,040
    e = kvmem.estimate(flash, engine="hf-dynamic", tokens=K)
    assert e.kv_bytes == 4_194_304 + 42_991_616 + 6_881_280 + 163_840
    assert e.state_bytes == 110_423_040 + 41_943_040


def test_who_sizes_it(flash):
    # ideal and hf-dynamic above; vLLM 0.33.0 its own way (tests/engines/test_vllm_dsv4*: fp8_ds_mla packed groups)
    assert kvmem.estimate(flash, engine="vllm", tokens=K).kv_dtype == "fp8_ds_mla"
    with pytest.raises(ValueError, match="StaticCache has no layer class for compressed_sparse_attention"):
        kvmem.estimate(flash, engine="hf-static", tokens=K)
    with pytest.raises(ValueError, match="QuantizedCache` is only supported for models with only full attention"):
        kvmem.estimate(flash, engine="hf-quantized", tokens=K)
    # SGLang 0.5.23 its own way (tests/engines/test_sglang_dsv4.py: DSV4PoolConfigurator, fp8 V4 pages)
    assert kvmem.estimate(flash, engine="sglang", tokens=K).kv_dtype == "fp8_e4m3"
    # TensorRT-LLM its own way (tests/engines/test_trtllm_dsv4.py), with the block size its manager asserts:
    # its default of 32 tokens per block is refused in its words
    with pytest.raises(ValueError, match=r"asserts tokens_per_block in \[128, 256\]"):
        kvmem.estimate(flash, engine="trtllm", tokens=K)
    assert kvmem.estimate(flash, engine="trtllm", tokens=K, tokens_per_block=128, indexer_k_dtype="fp8").kv_bytes > 0


def test_compressed_layers_outside_their_family_are_refused_by_the_other_engines(flash):
    hand_built = flash.with_layers(flash.layers, model_type="")
    with pytest.raises(ValueError, match="TensorRT-LLM builds compressed-attention caches only for DeepseekV4"):
        kvmem.estimate(hand_built, engine="trtllm", tokens=K)
    with pytest.raises(ValueError, match="SGLang 0.5.23 builds compressed-attention caches only in its DeepSeek-V4"):
        kvmem.estimate(hand_built, engine="sglang", tokens=K)
    # vLLM builds these caches in its DeepSeek-V4 model only: never read as another layer kind
    with pytest.raises(ValueError, match="compressed-attention caches only in its DeepSeek-V4 model"):
        kvmem.estimate(hand_built, engine="vllm", tokens=K)


def small(**fields):
    cfg = {"model_type": "deepseek_v4", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 1,
           "head_dim": 64, "hidden_size": 256, "sliding_window": 8, "index_head_dim": 16}
    return Model.from_hf_config({**cfg, **fields})


def rates(model):
    return [layer.compressor and layer.compressor.rate for layer in model.layers]


def test_layer_types_win_over_compress_ratios_and_the_class_default_fills_in():
    typed = small(layer_types=["sliding_attention", "heavily_compressed_attention", "compressed_sparse_attention",
                               "sliding_attention"], compress_ratios=[4, 4, 4, 4])
    assert rates(typed) == [None, 128, 4, None]
    assert rates(small(compress_ratios=[4, 128, 0, 0, 4])) == [4, 128, None, None]   # the 5th: MTP
    assert rates(small(layer_types=["sliding_attention"] * 5)) == [None] * 4             # as transformers cuts it
    # DeepseekV4Config.__post_init__: 2 HCA, then HCA and CSA alternating
    assert rates(small()) == [128, 128, 128, 4]


def test_compress_rates_and_their_legacy_spellings():
    assert rates(small(compress_rates={"compressed_sparse_attention": 8, "heavily_compressed_attention": 32})) \
        == [32, 32, 32, 8]
    assert rates(small(compress_rate_csa=2, compress_rate_hca=16)) == [16, 16, 16, 2]


@pytest.mark.parametrize("fields, message", [
    ({"num_key_value_heads": 8}, "'num_key_value_heads' is 8: DeepSeek-V4 caches one row"),
    ({"compress_ratios": [0, 4, 64, 128]}, "'compress_ratios' must list 0, 4 or 128 for each of the 4"),
    ({"compress_ratios": [0, 4, 128]}, "'compress_ratios' must list 0, 4 or 128 for each of the 4"),
    ({"layer_types": ["full_attention"] * 4}, "'layer_types' must list one of sliding_attention"),
    ({"layer_types": ["sliding_attention"] * 3}, "'layer_types' must list one of sliding_attention"),
    ({"compress_rates": {"compressed_sparse_attention": 4}}, "'compress_rates' must give a rate for exactly"),
    ({"compress_rates": {"compressed_sparse_attention": 0, "heavily_compressed_attention": 128}},
     "'compress_rates.compressed_sparse_attention' must be an integer from 1"),
    ({"kv_lora_rank": 512}, "'kv_lora_rank' shapes the cache, and kvmem's reading of model_type 'deepseek_v4'"),
])
def test_what_it_cannot_read_is_refused_by_name(fields, message):
    with pytest.raises(ConfigError, match=message):
        small(**fields)


def test_transformers_reads_the_same_layer_types():
    transformers = pytest.importorskip("transformers")
    import json
    cfg = json.loads(FLASH.read_text())
    hf = transformers.DeepseekV4Config(**{k: v for k, v in cfg.items() if k != "model_type"})
    kinds = {"sliding_attention": None, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    assert [kinds[t] for t in hf.layer_types] == rates(Model.from_hf_config(FLASH))
    assert hf.compress_rates == {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def test_the_preset_is_the_verbatim_file(flash):
    import json

    from kvmem.catalog import preset as read_preset
    preset = read_preset("deepseek-v4-flash")
    assert preset["config"] == json.loads(FLASH.read_text()) and preset["hf_id"] == "deepseek-ai/DeepSeek-V4-Flash"
    assert kvmem.get_model("deepseek-ai/DeepSeek-V4-Flash").layers == flash.layers
    assert kvmem.estimate("deepseek-v4-flash", tokens="128k").kv_bytes == 907_411_456
