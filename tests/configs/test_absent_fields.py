"""A field a config file leaves out is filled as transformers 5.24's config class fills it, derived values
included (issue 31): HY-V4's indexer_types and num_key_value_heads, Inkling-2-Loop's loop fields.
The same configs through transformers' own cache: tests/oracles/test_transformers_absent_fields.py."""

import kvmem
from kvmem import Model

# HY-V4 (model_type hy_v4), six layers, the rest from HYV4Config's defaults: kv_lora_rank 512,
# qk_rope_head_dim 64, index_head_dim 128, index_topk 2048
HY_V4 = {"model_type": "hy_v4", "num_hidden_layers": 6, "num_attention_heads": 32}


def kv_per_token(model, engine="ideal"):
    return kvmem.estimate(model, engine=engine, tokens=1, kv_dtype="bf16").kv_bytes


def test_hy_v4_without_indexer_types_keeps_indexer_keys_on_layers_0_1_and_5():
    # configuration_hy_v4.py#L151-L155: "full" on layer 0 and where (i - 1) % 4 == 0, else "shared" (no indexer,
    # modeling_hy_v4.py#L370-L371). 6 x (512 + 64) x 2 B + 3 x 128 x 2 B = 6,912 + 768 = 7,680 B/token
    # (every layer keyed, as GLM-5's default rule would: 6 x 1,408 = 8,448)
    model = Model.from_hf_config(HY_V4)
    assert [layer.index_head_dim for layer in model.layers] == [128, 128, 0, 0, 0, 128]
    for engine in ("ideal", "hf-dynamic"):
        assert kv_per_token(model, engine) == 7_680
    listed = Model.from_hf_config({**HY_V4, "indexer_types": ["full", "full", "shared", "shared", "shared", "full"]})
    assert listed.layers == model.layers
    # the wrapper's text model (hy_v4_vl_text) keeps the same rule (configuration_hy_v4_vl.py#L190-L194)
    wrapped = Model.from_hf_config({"model_type": "hy_v4_vl", "text_config": {**HY_V4, "model_type": "hy_v4_vl_text"}})
    assert wrapped.layers == model.layers


def test_hy_v4_with_16_heads_and_no_kv_heads_takes_kv_heads_from_the_query_heads():
    # HYV4Config.__post_init__ sets num_key_value_heads = num_attention_heads (configuration_hy_v4.py#L138-L139):
    # 16 heads read as 16 KV heads, not the declared default 32 (which "16 is not a multiple of 32" refused).
    # MLA caches the latent whatever the heads: the same 7,680 B/token
    for model_type in ("hy_v4", "hy_v4_vl_text"):
        cfg = {**HY_V4, "model_type": model_type, "num_attention_heads": 16}
        assert kv_per_token(Model.from_hf_config(cfg)) == 7_680
        # a file that says 32 KV heads is overridden the same way
        assert kv_per_token(Model.from_hf_config({**cfg, "num_key_value_heads": 32})) == 7_680


def test_inkling_2_loop_without_loop_fields_takes_6_18_and_3_passes():
    # Inkling2LoopTextConfig (configuration_inkling2_loop.py#L139-L141): loop_layer_index_start 6,
    # loop_layer_index_end 18, loop_num_passes 3; its 24 layers are "hybrid" where (i + 1) % 6 == 0 (5, 11, 17, 23).
    # Passes 2 and 3 copy layers 6..17 (two full: 11, 17): 24 + 2 x 12 = 48 cache layers, 4 + 2 x 2 = 8 full.
    # 8 KV heads x 128 x 2 (K, V) x 2 B = 4,096 B/token a layer, full and sliding alike (swa heads 8, dim 128):
    # 48 x 4,096 = 196,608 B/token
    model = Model.from_hf_config({"model_type": "inkling2_loop_text"})
    assert len(model.layers) == 48 and model.kinds == {"full": 8, "sliding": 40}
    assert model.layers[24:36] == model.layers[6:18]
    assert kv_per_token(model) == 196_608
    assert dict(model.reading.from_defaults)["loop_num_passes"] == 3
