"""Bad and unusual config.json input: clear errors that name the field; unknown families are refused,
however many fields they carry (tests/configs/test_families.py)."""

import json

import pytest

from kvmem import ConfigError, Model

LLAMA_LIKE = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256,
              "intermediate_size": 14336, "torch_dtype": "bfloat16"}


def test_unknown_model_type_is_refused_even_with_every_llama_field():
    # a generic reading would give 32 x 8 x 128 heads here; nothing says the family caches that
    with pytest.raises(ConfigError, match="model_type 'brand_new_arch' is not a family kvmem reads"):
        Model.from_hf_config({**LLAMA_LIKE, "model_type": "brand_new_arch"})


@pytest.mark.parametrize("field", ["num_hidden_layers", "num_attention_heads"])
def test_missing_field_is_named(field):
    # kvmem's own "custom" family has no transformers defaults to fall back on
    cfg = {k: v for k, v in LLAMA_LIKE.items() if k != field}
    cfg["model_type"] = "custom"
    with pytest.raises(ConfigError, match=f"{field!r} is missing .*'custom' has no default"):
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
        Model.from_hf_config({**LLAMA_LIKE, "model_type": "custom", "layer_types": types})


def test_wrong_type_of_value_is_named():
    with pytest.raises(ConfigError, match=r"'num_hidden_layers' must be an integer from 1 to 1,024, got '32'"):
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


# issue 13: hostile and malformed configs give a ConfigError that names the field (each a repro)
NEMOTRON_LIKE = {**LLAMA_LIKE, "model_type": "nemotron_h", "num_hidden_layers": 2, "mamba_num_heads": 8,
                 "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4}


@pytest.mark.parametrize("changes, message", [
    ({"model_type": ["llama"]}, "'model_type' must be a string, got list"),
    ({"model_type": {"a": 1}}, "'model_type' must be a string, got dict"),
    ({"num_hidden_layers": 2, "sliding_window": 4, "layer_types": [["x"], {}]}, r"layer_types\[0\] is \['x'\]"),
    ({"model_type": "llama4_text", "num_hidden_layers": 2, "no_rope_layers": [1], "attention_chunk_size": 8},
     "'no_rope_layers' must list 0 or 1 for each of the 2 layers"),
    ({"model_type": "mixtral", "num_local_experts": "8"}, "'num_local_experts' must be an integer from 0 to 65,536"),
    ({"model_type": "mixtral", "num_local_experts": 7.5}, "'num_local_experts' must be an integer .*got 7.5"),
    ({"model_type": "mixtral", "num_local_experts": -8}, "'num_local_experts' must be an integer .*got -8"),
    ({"model_type": "mixtral", "num_local_experts": float("nan")}, "'num_local_experts' .*got nan"),
    ({"num_hidden_layers": 1_000_000}, "'num_hidden_layers' must be an integer from 1 to 1,024, got 1000000"),
    ({"head_dim": 10**30}, "'head_dim' must be an integer from 1 to 65,536, got a 100-bit integer"),
    ({"vocab_size": 10**9}, "'vocab_size' must be an integer from 1 to 16,777,216"),
    ({"sliding_window": 10**12}, "'sliding_window' must be an integer from 0 to 1,073,741,824"),
    ({"_name_or_path": 5}, "'_name_or_path' must be a string, got int"),
])
def test_malformed_fields_are_named(changes, message):
    with pytest.raises(ConfigError, match=message):
        Model.from_hf_config({**LLAMA_LIKE, **changes})


@pytest.mark.parametrize("pattern, message", [
    (5, "'hybrid_override_pattern' must be a string"),               # was TypeError
    ("*x", "hybrid_override_pattern has unknown block 'x'"),        # was 0 bytes for every layer
])
def test_nemotron_pattern_is_checked(pattern, message):
    with pytest.raises(ConfigError, match=message):
        Model.from_hf_config({**NEMOTRON_LIKE, "hybrid_override_pattern": pattern})


def test_json_text_hazards():
    with pytest.raises(ConfigError, match="nested deeper than 32 levels"):  # was RecursionError
        Model.from_hf_config('{"a": ' + "[" * 10_000 + "]" * 10_000 + "}")
    text = json.dumps(LLAMA_LIKE).replace('"num_hidden_layers": 32', '"num_hidden_layers": ' + "9" * 5000)
    with pytest.raises(ConfigError, match="'num_hidden_layers' must be .*got a 5,000-digit number"):
        Model.from_hf_config(text)  # Python refuses int("9" * 5000): was a bare ValueError


def test_config_files_are_regular_utf8_and_bounded(tmp_path):
    with pytest.raises(ConfigError, match="is not a regular file"):
        Model.from_hf_config(tmp_path)  # a directory; a symlink to /dev/zero is refused the same way
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="is not a regular file"):
        Model.from_hf_config(str(link))
    utf16 = tmp_path / "utf16.json"
    utf16.write_text(json.dumps(LLAMA_LIKE), encoding="utf-16")
    with pytest.raises(ConfigError, match="is UTF-16 text"):
        Model.from_hf_config(str(utf16))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"model_type": "caf\xe9"}')
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(byte 0xe9 at offset 19\)"):
        Model.from_hf_config(str(latin))
    big = tmp_path / "big.json"
    big.write_text('{"pad": "' + "x" * (4 * 2**20) + '"}')
    with pytest.raises(ConfigError, match="larger than 4,194,304 bytes"):
        Model.from_hf_config(str(big))


@pytest.mark.parametrize("value", [3.5, "LlamaForCausalLM", {"a": 1}, [1, 2]])
def test_architectures_of_another_type_is_named(value):
    # issue 20: a float here was a TypeError (exit 70), not a refusal
    with pytest.raises(ConfigError, match="config field 'architectures' must be a list of class names"):
        Model.from_hf_config({**LLAMA_LIKE, "architectures": value})
