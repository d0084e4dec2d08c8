"""Bad and unusual config.json input: clear errors that name the field; unknown families that carry
enough fields still work."""

import json

import pytest

from kvmem import ConfigError, Model

LLAMA_LIKE = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256,
              "intermediate_size": 14336, "torch_dtype": "bfloat16"}


def test_unknown_model_type_with_enough_fields_works():
    cfg = {**LLAMA_LIKE, "model_type": "brand_new_arch"}
    model = Model.from_hf_config(cfg)
    assert model.num_layers == 32
    assert {layer.kv_heads for layer in model.layers} == {8}
    assert {layer.head_dim_k for layer in model.layers} == {128}


def test_unknown_model_type_with_too_few_fields():
    with pytest.raises(ConfigError, match="'num_hidden_layers' is missing .*'brand_new_arch' has no default"):
        Model.from_hf_config({"model_type": "brand_new_arch", "hidden_size": 64})


@pytest.mark.parametrize("field", ["num_hidden_layers", "num_attention_heads"])
def test_missing_field_is_named(field):
    cfg = {k: v for k, v in LLAMA_LIKE.items() if k != field}
    cfg["model_type"] = "not_a_family"
    with pytest.raises(ConfigError, match=repr(field)):
        Model.from_hf_config(cfg)


def test_heads_that_do_not_divide():
    with pytest.raises(ConfigError, match=r"num_attention_heads \(32\) is not a multiple of num_key_value_heads \(6\)"):
        Model.from_hf_config({**LLAMA_LIKE, "num_key_value_heads": 6})


def test_hidden_not_divisible_without_head_dim():
    with pytest.raises(ConfigError, match=r"hidden_size \(4100\) is not divisible by num_attention_heads \(32\)"):
        Model.from_hf_config({**LLAMA_LIKE, "hidden_size": 4100})


def test_head_dim_wins_over_hidden_over_heads():
    model = Model.from_hf_config({**LLAMA_LIKE, "hidden_size": 4000, "head_dim": 160})
    assert model.layers[0].head_dim_k == 160


def test_missing_kv_heads_means_mha():
    cfg = {k: v for k, v in LLAMA_LIKE.items() if k != "num_key_value_heads"}
    assert Model.from_hf_config(cfg).layers[0].kv_heads == 32


def test_layer_types_length_must_match():
    with pytest.raises(ConfigError, match=r"layer_types must list one type per layer \(32\), got 3"):
        Model.from_hf_config({**LLAMA_LIKE, "layer_types": ["full_attention"] * 3})


def test_unknown_layer_type_is_named():
    types = ["full_attention"] * 31 + ["weird_attention"]
    with pytest.raises(ConfigError, match=r"layer_types\[31\] is 'weird_attention'"):
        Model.from_hf_config({**LLAMA_LIKE, "layer_types": types})


def test_sliding_layers_need_a_window():
    types = ["sliding_attention", "full_attention"] * 16
    with pytest.raises(ConfigError, match="sliding_window is not set"):
        Model.from_hf_config({**LLAMA_LIKE, "model_type": "not_a_family", "layer_types": types})


def test_wrong_type_of_value_is_named():
    with pytest.raises(ConfigError, match=r"'num_hidden_layers' must be an integer >= 1, got '32'"):
        Model.from_hf_config({**LLAMA_LIKE, "num_hidden_layers": "32"})


def test_json_text_and_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_LIKE))
    assert Model.from_hf_config(str(path)).num_layers == 32
    assert Model.from_hf_config(path).num_layers == 32
    assert Model.from_hf_config(json.dumps(LLAMA_LIKE)).num_layers == 32


def test_malformed_json_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid JSON"):
        Model.from_hf_config('{"num_hidden_layers": 3,')
    with pytest.raises(ConfigError, match="cannot read config file"):
        Model.from_hf_config(str(tmp_path / "absent.json"))
    with pytest.raises(ConfigError, match="must be a JSON object"):
        Model.from_hf_config("[1, 2]")


def test_null_field_is_not_replaced_by_class_default():
    # Mistral's class default window is 4096; a config that says null means full attention.
    cfg = {**LLAMA_LIKE, "model_type": "mistral", "sliding_window": None}
    assert Model.from_hf_config(cfg).kinds == {"full": 32}
    cfg["sliding_window"] = 4096
    assert Model.from_hf_config(cfg).kinds == {"sliding": 32}


def test_models_are_immutable():
    model = Model.from_hf_config(LLAMA_LIKE)
    with pytest.raises(AttributeError):
        model.name = "x"
    with pytest.raises(AttributeError):
        model.layers[0].kv_heads = 1
