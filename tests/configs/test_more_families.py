"""More families read right: Inkling, ZAYA, Ling (bailing_hybrid), LongCat-Flash, Mistral Large 4,
ModernBERT as a decoder, GPT-Neo, Laguna, Kosmos-2.5's text model and MiniMax-M3's sparse layers.

Hand-derived bytes, bf16, batch 1, kvmem's default (ideal) mode unless named; each derivation
cites the transformers 5.24 modeling code it follows. The configs carry the class defaults of
their configuration_*.py (no verbatim published file was found for these families).
"""

import pytest

import kvmem
from kvmem import ConfigError, Model

K, M = 1024, 131072


def ideal(model, tokens):
    e = kvmem.estimate(model, tokens=tokens, kv_dtype="bf16")
    return e.kv_bytes, e.state_bytes


INKLING = {"model_type": "inkling_text", "num_hidden_layers": 66, "hidden_size": 6144, "num_attention_heads": 64,
           "num_key_value_heads": 8, "head_dim": 128, "swa_num_key_value_heads": 16, "swa_head_dim": 128,
           "sliding_window_size": 512, "conv_kernel_size": 4}


def test_inkling_sliding_layers_take_their_own_heads_and_every_layer_keeps_four_fp32_convolutions():
    # configuration_inkling.py: "hybrid" where (i + 1) % 6 == 0, else "hybrid_sliding": 11 full, 55 sliding.
    # modeling_inkling.py InklingAttention: sliding layers 16 KV heads x 128 (swa_*), full layers 8 x 128.
    #   full     11 x 8 x 128 x 2 (K, V) x 2 B = 45,056 B/token
    #   sliding  55 x 16 x 128 x 2 x 2 B = 450,560 B/token, up to the 512-token window
    # InklingShortConvolution (in fp32) over K, V (kv_heads x 128 each) and the attention's and MLP's
    # outputs (6,144 each); kernel 4, of which 3 columns are the state:
    #   full     (2 x 1,024 + 2 x 6,144) x 3 x 4 B = 172,032 B;  sliding (2 x 2,048 + 12,288) x 3 x 4 = 196,608 B
    model = Model.from_hf_config(INKLING)
    assert model.kinds == {"full": 11, "sliding": 55}
    assert (model.layers[0].kv_heads, model.layers[5].kv_heads) == (16, 8)
    assert model.layers[0].state.conv_dtype == "fp32"
    state = 11 * 172_032 + 55 * 196_608
    assert ideal(model, K) == (45_056 * K + 450_560 * 512, state) == (276_824_064, 12_705_792)
    assert ideal(model, M) == (45_056 * M + 450_560 * 512, state)
    # transformers keeps the whole kernel (4 columns), still in fp32 (cache_utils.py update_conv_state)
    hf = kvmem.estimate(model, engine="hf-dynamic", tokens=K, kv_dtype="bf16")
    assert hf.state_bytes == state * 4 // 3


def test_inkling_local_layer_ids_and_the_kernel_alias():
    cfg = dict(INKLING, num_hidden_layers=4, local_layer_ids=[0, 2])
    assert [layer.kind for layer in Model.from_hf_config(cfg).layers] == ["sliding", "full", "sliding", "full"]
    with pytest.raises(ConfigError, match="sconv_kernel_size"):
        Model.from_hf_config(dict(INKLING, sconv_kernel_size=3))
    with pytest.raises(ConfigError, match="layer_types\\[1\\]"):
        Model.from_hf_config(dict(INKLING, num_hidden_layers=2, layer_types=["hybrid", "full_attention"]))


def test_zaya_caches_attention_beside_its_convolution_and_delayed_value():
    # configuration_zaya.py: every layer "hybrid" (full attention). K/V: 2 KV heads x 128 x 2 x 2 B = 1,024
    # B/token/layer. modeling_zaya.py ZayaCCAProjection: conv over (8 + 2) x 128 = 1,280 channels with a
    # receptive field of cca_time0 + cca_time1 - 1 = 3 tokens, 2 columns kept; the delayed value of the last
    # token, 2 x 128 / 2 = 128 elements; both in the compute dtype: (2,560 + 128) x 2 B = 5,376 B/layer
    model = Model.from_hf_config({"model_type": "zaya", "num_hidden_layers": 40, "hidden_size": 2048,
                                  "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
                                  "cca_time0": 2, "cca_time1": 2})
    assert ideal(model, K) == (40 * 1_024 * K, 40 * 5_376) == (41_943_040, 215_040)
    assert ideal(model, M)[0] == 5_368_709_120
    # transformers keeps the 2 columns ZAYA hands it, and the delayed value in bf16
    assert kvmem.estimate(model, engine="hf-dynamic", tokens=K, kv_dtype="bf16").state_bytes == 215_040


def test_ling_hybrid_mla_every_sixth_layer_kda_between():
    # configuration_bailing_hybrid.py: full (MLA) where (i + 1) % layer_group_size == 0: 7 of 42; the rest
    # BailingHybridDeltaAttention (KDA) with linear_num_heads = 32 heads of linear_head_dim = head_dim = 128.
    #   MLA  7 x (512 + 64) x 2 B = 8,064 B/token
    #   KDA  conv 3 x 32 x 128 x 3 columns x 2 B = 73,728 B; recurrent 32 x 128 x 128 x 4 B (fp32) = 2,097,152 B
    model = Model.from_hf_config({"model_type": "bailing_hybrid", "num_hidden_layers": 42, "hidden_size": 2560,
                                  "num_attention_heads": 32, "head_dim": 128, "kv_lora_rank": 512,
                                  "qk_rope_head_dim": 64, "layer_group_size": 6, "short_conv_kernel_size": 4})
    assert model.kinds == {"mla": 7, "linear": 35}
    assert ideal(model, K) == (8_064 * K, 35 * (73_728 + 2_097_152)) == (8_257_536, 75_980_800)
    assert ideal(model, M)[0] == 8_064 * M


def test_longcat_flash_has_two_mla_caches_per_decoder_layer():
    # modeling_longcat_flash.py: two LongcatFlashMLA per decoder layer (layer_idx * 2 + i), so 2 x 28 = 56
    # latent caches of (512 + 64) x 2 B = 1,152 B/token each: 64,512 B/token
    cfg = {"model_type": "longcat_flash", "num_layers": 28, "hidden_size": 6144, "num_attention_heads": 64,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}
    model = Model.from_hf_config(cfg)
    assert model.kinds == {"mla": 56}
    assert ideal(model, M) == (64_512 * M, 0)
    assert Model.from_hf_config(dict(cfg, num_hidden_layers=56)).kinds == {"mla": 56}
    with pytest.raises(ConfigError, match="twice 'num_layers'"):
        Model.from_hf_config(dict(cfg, num_hidden_layers=28))


MISTRAL_LARGE_4 = {"model_type": "mistral_large4_text", "num_hidden_layers": 8, "hidden_size": 6144,
                   "num_attention_heads": 64, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 64,
                   "v_head_dim": 128, "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32}


def test_mistral_large_4_nope_layers_cache_no_rope_key():
    # modeling_mistral_large4.py MistralLarge4Attention: qk_rope_head_dim = 0 where no_rope_layers[i] is 0
    # (every 4th layer by default); every layer keeps an indexer key of 128 (indexer_types all "full").
    #   RoPE layers 6 x (512 + 64 + 128) x 2 B = 8,448;  NoPE layers 2 x (512 + 128) x 2 B = 2,560  -> 11,008 B/token
    model = Model.from_hf_config(MISTRAL_LARGE_4)
    assert [layer.qk_rope_head_dim for layer in model.layers] == [64, 64, 64, 0, 64, 64, 64, 0]
    assert ideal(model, K) == (11_008 * K, 0)


def test_mistral_large_4_kv_sharing():
    # kv_source_layers: layers 1, 3, 5, 7 read their even neighbour's latent and reuse its indexer choice
    # ("shared"): no cache of their own. 4 owners x (512 + 64 + 128) x 2 B = 5,632 B/token (no NoPE layer here)
    cfg = dict(MISTRAL_LARGE_4, no_rope_layers=[1] * 8, kv_source_layers=[i - i % 2 for i in range(8)],
               indexer_types=["full" if i % 2 == 0 else "shared" for i in range(8)])
    model = Model.from_hf_config(cfg)
    assert model.kinds == {"mla": 4, "shared": 4}
    assert ideal(model, K)[0] == 5_632 * K
    # a layer that reads another's latent but runs its own indexer caches an indexer key alone: refused
    with pytest.raises(ConfigError, match="layer 1 reads layer 0's latent"):
        Model.from_hf_config(dict(cfg, indexer_types=["full"] * 8))
    with pytest.raises(ConfigError, match="kv_source_layers"):
        Model.from_hf_config(dict(cfg, kv_source_layers=[0, 2, 2, 2, 4, 4, 6, 6]))


def test_modernbert_decoder_window_is_half_the_local_attention_unless_the_file_names_it():
    # configuration_modernbert_decoder.py: sliding unless i % global_attn_every_n_layers == 0;
    # sliding_window = local_attention // 2, replaced by a sliding_window the file gives
    cfg = {"model_type": "modernbert-decoder", "num_hidden_layers": 6, "hidden_size": 768,
           "num_attention_heads": 12, "local_attention": 128, "global_attn_every_n_layers": 3}
    model = Model.from_hf_config(cfg)
    assert [layer.kind for layer in model.layers] == ["full", "sliding", "sliding"] * 2
    assert model.layers[1].window == 64
    assert Model.from_hf_config(dict(cfg, sliding_window=16)).layers[1].window == 16


def test_gpt_neo_is_sized_as_transformers_caches_it_and_windowed_by_ideal():
    # modeling_gpt_neo.py: DynamicCache(config=...) from a config without layer_types: every layer whole,
    # the local layers' window_size is a mask. 24 x 16 x 128 x 2 x 2 B = 196,608 B/token
    cfg = {"model_type": "gpt_neo", "num_layers": 24, "num_heads": 16, "hidden_size": 2048,
           "attention_types": [[["global", "local"], 12]], "window_size": 256}
    assert kvmem.estimate(cfg, engine="hf-dynamic", tokens=K, kv_dtype="bf16").kv_bytes == 196_608 * K
    # the ideal count keeps only the window on the 12 local layers: 12 x 8,192 B x K + 12 x 8,192 B x 256
    assert kvmem.estimate(cfg, engine="ideal", tokens=K, kv_dtype="bf16").kv_bytes == 12 * 8192 * (K + min(K, 256))


def test_laguna_per_layer_heads_are_query_heads():
    # modeling_laguna.py LagunaAttention: num_attention_heads_per_layer sets q_proj; K/V keep 8 x 128
    cfg = {"model_type": "laguna", "num_hidden_layers": 4, "hidden_size": 2048, "num_attention_heads": 48,
           "num_key_value_heads": 8, "head_dim": 128, "num_attention_heads_per_layer": [48, 64, 48, 64]}
    assert ideal(Model.from_hf_config(cfg), K)[0] == 4 * 8 * 128 * 2 * 2 * K


def test_kosmos_2_5_text_model_spells_its_sizes_its_own_way():
    # configuration_kosmos2_5.py: layers, attention_heads, embed_dim; head_dim = embed_dim / heads = 96
    model = Model.from_hf_config({"model_type": "kosmos-2.5", "text_config": {
        "model_type": "kosmos_2_5_text_model", "layers": 24, "attention_heads": 16, "embed_dim": 1536}})
    assert (len(model.layers), model.layers[0].kv_heads, model.layers[0].head_dim_k) == (24, 16, 96)


def test_minimax_m3_sparse_layers_keep_an_indexer_key_beside_k_and_v():
    # modeling_minimax_m3_vl.py: a "minimax_m3_sparse" layer (sparse_attention_freq 1) caches K and V as a full
    # layer does and MiniMaxM3VLIndexer's key, one head of sparse_index_dim, in MiniMaxM3VLSparseCacheLayer.
    #   full   2 x 4 x 128 x 2 (K, V) x 2 B = 4,096 B/token;  sparse 2 x (2,048 + 128 x 2 B) = 4,608 B/token
    cfg = {"model_type": "minimax_m3_vl_text", "num_hidden_layers": 4, "hidden_size": 6144,
           "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
           "sparse_attention_config": {"use_sparse_attention": True, "sparse_index_dim": 128,
                                       "sparse_num_index_heads": 4, "sparse_attention_freq": [0, 0, 1, 1]}}
    model = Model.from_hf_config(cfg)
    assert [layer.index_head_dim for layer in model.layers] == [0, 0, 128, 128]
    assert ideal(model, K) == (8_704 * K, 0)
    assert kvmem.estimate(model, engine="hf-dynamic", tokens=K, kv_dtype="bf16").kv_bytes == 8_704 * K
    # layer_types names them the same way; without either, every layer is full
    named = dict(cfg, layer_types=["full_attention", "full_attention", "minimax_m3_sparse", "minimax_m3_sparse"])
    del named["sparse_attention_config"]
    assert Model.from_hf_config(named).layers == model.layers
    plain = {k: v for k, v in cfg.items() if k != "sparse_attention_config"}
    assert ideal(Model.from_hf_config(plain), K)[0] == 8_192 * K
    with pytest.raises(ConfigError, match="sparse_attention_freq"):
        Model.from_hf_config(dict(cfg, sparse_attention_config={"sparse_attention_freq": [0, 1]}))
    # vLLM 0.33.0 (minimax_m3/nvidia/model.py): the same K, V and index key, in blocks of 128 (1,024 tokens: 8 whole)
    vllm = kvmem.estimate(model, engine="vllm", tokens=K, kv_dtype="bf16")
    assert vllm.kv_bytes == 8_704 * K and vllm.per_layer == (2_048 * K,) * 2 + (2_304 * K,) * 2


def test_inkling_2_loop_caches_each_extra_pass_in_copies_of_the_looped_layers():
    # modeling_inkling2_loop.py: passes 2..loop_num_passes over layers [6, 12) append copies of those
    # cache layers: 12 + 2 x 6 = 24 cache layers; of the looped six, one is full (layer 11)
    cfg = dict(INKLING, model_type="inkling2_loop_text", num_hidden_layers=12, loop_layer_index_start=6,
               loop_layer_index_end=12, loop_num_passes=3)
    model = Model.from_hf_config(cfg)
    assert len(model.layers) == 24 and model.kinds == {"full": 4, "sliding": 20}
    assert model.layers[12:18] == model.layers[6:12]
    assert len(Model.from_hf_config(dict(cfg, loop_config={"num_passes": 2})).layers) == 18


def test_k_exaone_per_layer_windows_are_read_and_the_hf_modes_refuse_them():
    # K-EXAONE's published files list sliding_windows per layer (null on full layers); vLLM 0.33's
    # exaone_moe.py reads them; transformers 5.24 gives every sliding layer the one sliding_window.
    # 2 KV heads x 64 x 2 (K, V) x 2 B = 512 B/token: windows 128 and 4,096, then a full layer
    cfg = {"model_type": "exaone_moe", "num_hidden_layers": 3, "hidden_size": 1024, "num_attention_heads": 16,
           "num_key_value_heads": 2, "head_dim": 64, "sliding_window": 4096,
           "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
           "sliding_windows": [128, 4096, None]}
    model = Model.from_hf_config(cfg)
    assert [layer.window for layer in model.layers] == [128, 4096, 0]
    assert ideal(model, 8192)[0] == 512 * (128 + 4096 + 8192)
    with pytest.raises(ValueError, match="sliding_windows lists others \\(128\\)"):
        kvmem.estimate(model, engine="hf-dynamic", tokens=8192)
    # windows equal to sliding_window: transformers' own cache (a one-token decode after 8,191 of prompt:
    # the sliding layers keep their window's last cat, 4,096 tokens)
    same = dict(cfg, sliding_windows=[4096, 4096, None])
    hf = kvmem.estimate(same, engine="hf-dynamic", tokens=8192, prompt_tokens=8191, kv_dtype="bf16")
    assert hf.kv_bytes == 512 * (4096 * 2 + 8192)
    with pytest.raises(ConfigError, match="sliding_windows"):
        Model.from_hf_config(dict(cfg, sliding_windows=[128, None, None]))


def test_smollm3_slides_only_its_nope_layers_and_only_when_asked():
    # configuration_smollm3.py: without layer_types, a layer slides when use_sliding_window and sliding_window
    # are set and it is a NoPE layer (no_rope_layers 0: every 4th by default); a sliding_window alone does nothing
    cfg = {"model_type": "smollm3", "num_hidden_layers": 8, "hidden_size": 2048, "num_attention_heads": 16,
           "num_key_value_heads": 4, "head_dim": 128, "sliding_window": 4096, "use_sliding_window": False}
    assert Model.from_hf_config(cfg).kinds == {"full": 8}
    kinds = [layer.kind for layer in Model.from_hf_config(dict(cfg, use_sliding_window=True)).layers]
    assert kinds == ["full", "full", "full", "sliding"] * 2
