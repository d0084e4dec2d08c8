"""A field a config file leaves out is filled as transformers 5.24's config class fills it, derived values
included (issue 31): HY-V4's indexer_types and num_key_value_heads, Inkling-2-Loop's loop fields.
The same configs through transformers' own cache: tests/oracles/test_transformers_absent_fields.py."""

import pytest

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


# ----------------------------------------------------------------------------- found by the sweep
# (kvmem/oracles/transformers.py absent_fields: each declared field of every family left out in turn)

def test_derived_layer_types_follow_each_config_class_for_1_to_13_layers():
    # DERIVED_LAYER_TYPES against the classes themselves: the layer_types each __post_init__ writes when the
    # file has none, for every layer count its validation accepts
    pytest.importorskip("transformers")
    from transformers.utils import logging

    from kvmem.configs.derived import DERIVED_LAYER_TYPES
    from kvmem.configs.kinds import LAYER_TYPE_NAMES
    from kvmem.oracles.transformers import config_classes
    logging.set_verbosity_error()
    classes, checked = config_classes(), 0
    for model_type, (rule, _) in DERIVED_LAYER_TYPES.items():
        for n in range(1, 14):
            try:
                config = classes[model_type](num_hidden_layers=n)
            except Exception:  # noqa: BLE001 -- a layer count the class rejects (OLMo-Hybrid needs a linear layer)
                continue
            assert [LAYER_TYPE_NAMES[t] for t in config.layer_types] == [rule(i, n) for i in range(n)], (model_type, n)
            checked += 1
    assert checked >= 15 * 12


def test_olmo3_without_layer_types_is_full_every_fourth_layer():
    # configuration_olmo3.py#L92-L95: sliding unless (i + 1) % 4 == 0 (the generic rule made all 8 sliding).
    # 8 KV heads x 128 x 2 (K, V) x 2 B = 4,096 B/token a layer; at 8,192 tokens, window 4,096:
    # 2 full x 4,096 x 8,192 + 6 sliding x 4,096 x 4,096 = 67,108,864 + 100,663,296 = 167,772,160 B
    cfg = {"model_type": "olmo3", "num_hidden_layers": 8, "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "sliding_window": 4096}
    model = Model.from_hf_config(cfg)
    assert [layer.window for layer in model.layers] == [4096, 4096, 4096, 0] * 2
    assert kvmem.estimate(model, tokens=8192, kv_dtype="bf16").kv_bytes == 167_772_160


def test_families_whose_class_takes_a_pattern_kwarg_default_it():
    # Qwen3-Next without layer_types or full_attention_interval: the kwarg's 4 (configuration_qwen3_next.py
    # #L129-L133); Cohere2 without sliding_window_pattern: 4 (configuration_cohere2.py#L95-L100)
    qwen = Model.from_hf_config({"model_type": "qwen3_next", "num_hidden_layers": 8})
    assert [layer.kind for layer in qwen.layers] == ["linear"] * 3 + ["full"] + ["linear"] * 3 + ["full"]
    cohere = Model.from_hf_config({"model_type": "cohere2", "num_hidden_layers": 8, "sliding_window": 4096})
    assert [layer.window for layer in cohere.layers] == [4096, 4096, 4096, 0] * 2


def test_cohere2_takes_head_dim_from_hidden_size_whatever_the_file_says():
    # Cohere2Config.__post_init__ sets head_dim = hidden_size // num_attention_heads (configuration_cohere2.py
    # #L91-L92): 4096 / 32 = 128, not the file's 64. 8 KV heads x 128 x 2 x 2 B = 4,096 B/token a layer
    cfg = {"model_type": "cohere2", "num_hidden_layers": 4, "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 4096}
    assert kv_per_token(Model.from_hf_config(cfg)) == 4 * 4_096


def test_hrm_text_without_num_layers_per_stack_caches_every_attention_call():
    # HrmTextConfig.__post_init__ (configuration_hrm_text.py#L109-L115): num_hidden_layers 4 is the per-stack
    # count; the cache keeps 4 x H_cycles 2 x (L_cycles 3 + 1) = 32 layers
    cfg = {"model_type": "hrm_text", "num_hidden_layers": 4}
    assert len(Model.from_hf_config(cfg).layers) == 32
    assert len(Model.from_hf_config({**cfg, "num_hidden_layers": 32, "num_layers_per_stack": 4}).layers) == 32


def test_fields_a_class_derives_are_derived_not_refused():
    # MiniCPM3 without v_head_dim: hidden // heads (configuration_minicpm3.py#L124-L125) = 2560 / 40 = 64
    minicpm = {"model_type": "minicpm3", "num_hidden_layers": 2, "hidden_size": 2560, "num_attention_heads": 40}
    assert Model.from_hf_config(minicpm).params_total == Model.from_hf_config({**minicpm, "v_head_dim": 64}).params_total
    # OLMo-Hybrid without its linear dims: key heads = value heads = 32, key dim int(0.75 x 3840 / 32) = 90,
    # value dim 180 (configuration_olmo_hybrid.py#L131-L138)
    olmo = {"model_type": "olmo_hybrid", "num_hidden_layers": 4, "hidden_size": 3840, "num_attention_heads": 32}
    explicit = {**olmo, "linear_num_key_heads": 32, "linear_num_value_heads": 32, "linear_key_head_dim": 90,
                "linear_value_head_dim": 180}
    assert Model.from_hf_config(olmo).layers == Model.from_hf_config(explicit).layers
    # GLM-4.7-Flash's shape without qk_nope_head_dim: the class's 192 (+ 64 rope), not hidden / heads (2048 / 20)
    glm = {"model_type": "glm4_moe_lite", "num_hidden_layers": 2, "hidden_size": 2048, "num_attention_heads": 20}
    assert kv_per_token(Model.from_hf_config(glm)) == 2 * (512 + 64) * 2


def test_a_wrapper_s_own_width_does_not_fill_its_text_config():
    # Ovis2Config has a hidden_size of its own (1536); its Qwen2 text model without one takes Qwen2Config's
    # 4096 (transformers builds the text model from text_config alone). head_dim 4096 / 8 = 512:
    # 2 layers x 2 KV heads x 512 x 2 (K, V) x 2 B = 8,192 B/token (the wrapper's width gave 192: 3,072)
    cfg = {"model_type": "ovis2", "hidden_size": 1536,
           "text_config": {"model_type": "qwen2", "num_hidden_layers": 2, "num_attention_heads": 8,
                           "num_key_value_heads": 2}}
    assert kv_per_token(Model.from_hf_config(cfg)) == 8_192


def test_nemotron_h_without_a_layer_list_is_refused_with_the_class_s_reason():
    # NemotronHConfig without hybrid_override_pattern or layers_block_type builds a 4-layer default and ignores
    # num_hidden_layers (configuration_nemotron_h.py#L174-L186): refused, saying so
    with pytest.raises(kvmem.ConfigError, match="4-layer default"):
        Model.from_hf_config({"model_type": "nemotron_h", "num_hidden_layers": 52})


def test_a_null_field_the_class_derives_is_derived():
    # MiniCPM3Config.__post_init__ derives v_head_dim when it is None, set to null as when absent
    # (configuration_minicpm3.py#L124-L125): 2560 / 40 = 64
    minicpm = {"model_type": "minicpm3", "num_hidden_layers": 2, "hidden_size": 2560, "num_attention_heads": 40}
    model = Model.from_hf_config({**minicpm, "v_head_dim": None})
    assert dict(model.reading.from_defaults)["v_head_dim"] == 64


def test_beam_without_layer_types_under_vllm_is_every_layer_sliding():
    # transformers' BeamConfig: every 6th and the last layer full (configuration_beam.py#L112-L117), kvmem's
    # reading; vLLM 0.33's own BeamConfig: every layer sliding (vllm/transformers_utils/configs/beam.py#L50-L51),
    # kvmem.engines.vllm.models.vllm_layers. 6 layers x 8 KV heads x 128 x 2 x 2 B = 24,576 B/token at most
    cfg = {"model_type": "beam", "num_hidden_layers": 6, "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 1024}
    model = Model.from_hf_config(cfg)
    assert [layer.window for layer in model.layers] == [1024] * 5 + [0]
    listed = Model.from_hf_config({**cfg, "layer_types": ["sliding_attention"] * 6})
    for tokens in (512, 8192):
        vllm = kvmem.estimate(model, engine="vllm", tokens=tokens, kv_dtype="bf16")
        assert vllm.kv_bytes == kvmem.estimate(listed, engine="vllm", tokens=tokens, kv_dtype="bf16").kv_bytes
    # ideal at 8,192 tokens: 5 x 4,096 B x 1,024 + 4,096 B x 8,192 = 20,971,520 + 33,554,432 = 54,525,952 B
    assert kvmem.estimate(model, tokens=8192, kv_dtype="bf16").kv_bytes == 54_525_952
