"""Inkling's short-convolution kernel (kvmem/configs/states.py hybrid_state): the file's own
conv_kernel_size or its alias sconv_kernel_size (transformers 5.24 configuration_inkling.py
attribute_map), never the class default of 4 filled in beside a file that names only the alias."""

import pytest

import kvmem
from kvmem import ConfigError, Model

# INKLING of test_more_families.py without conv_kernel_size, as a real checkpoint writes it (sconv_kernel_size)
INKLING = {"model_type": "inkling_text", "num_hidden_layers": 66, "hidden_size": 6144, "num_attention_heads": 64,
           "num_key_value_heads": 8, "head_dim": 128, "swa_num_key_value_heads": 16, "swa_head_dim": 128,
           "sliding_window_size": 512}


def test_a_file_with_only_sconv_kernel_size_3_is_read_with_kernel_3():
    # kernel 3: 2 state columns; fp32 over K, V (kv_heads x 128 each) and two hidden-wide outputs:
    #   full     (2 x 1,024 + 2 x 6,144) x 2 x 4 B = 114,688 B;  sliding (2 x 2,048 + 12,288) x 2 x 4 = 131,072 B
    #   11 full + 55 sliding layers: 1,261,568 + 7,208,960 = 8,470,528 B
    model = Model.from_hf_config(dict(INKLING, sconv_kernel_size=3))
    assert {layer.state.conv_kernel for layer in model.layers} == {3}
    assert kvmem.estimate(model, tokens=1024, kv_dtype="bf16").state_bytes == 11 * 114_688 + 55 * 131_072 == 8_470_528


def test_the_alias_alone_and_the_field_alone_agree_and_neither_takes_the_default_4():
    alias = Model.from_hf_config(dict(INKLING, sconv_kernel_size=5))
    field = Model.from_hf_config(dict(INKLING, conv_kernel_size=5))
    assert alias.layers[0].state == field.layers[0].state and alias.layers[0].state.conv_kernel == 5
    # neither: configuration_inkling.py's default, 4
    assert Model.from_hf_config(INKLING).layers[0].state.conv_kernel == 4


def test_both_given_and_disagreeing_is_still_refused():
    with pytest.raises(ConfigError, match="'conv_kernel_size' \\(4\\) and 'sconv_kernel_size' \\(3\\)"):
        Model.from_hf_config(dict(INKLING, conv_kernel_size=4, sconv_kernel_size=3))
