"""Architectures whose llama.cpp tensors kvmem does not lay out are refused by name, not laid out as llama's.

llama.cpp 0c1e57098 refuses the llama-style layout of each (tests/oracles/test_llamacpp_presets_oracle.py
loads the presets' GGUFs): gptneox wants output_norm.bias. gpt-oss, glm4moe, gemma4 ... have their own layouts now
(kvmem.engines.llamacpp.arch_tensors, tests/oracles/test_llamacpp_layout_families_oracle.py), gptneox too
(graphs_classic, tests/oracles/test_llamacpp_classic_oracle.py).
"""

import pytest

import kvmem
from kvmem.engines.llamacpp.tensors import synthesised_tensors


def test_gptneox_is_laid_out_with_the_tensors_llamacpp_wants():
    # not llama's layout: the output_norm.bias llama.cpp asked for, a fused attn_qkv with its bias
    names = {t.name for t in synthesised_tensors(kvmem.get_model("gpt-neox-20b"), "q4_k_m")}
    assert {"output_norm.bias", "blk.0.attn_qkv.weight", "blk.0.attn_qkv.bias"} <= names
    assert "blk.0.attn_q.weight" not in names


@pytest.mark.parametrize("model_type", ["olmo2", "granite", "starcoder2", "cohere", "exaone", "stablelm"])
def test_families_without_a_transcribed_layout_are_refused(model_type):
    """Full-attention families whose llama.cpp load_arch_tensors kvmem has not transcribed (olmo2's post
    norms, granite's scales, starcoder2's biases and LayerNorms, ...) are refused, not laid out as llama's."""
    cfg = {"model_type": model_type, "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
           "num_key_value_heads": 16, "intermediate_size": 5632, "vocab_size": 32000}
    with pytest.raises(ValueError, match=f"'{model_type}' is not one of them .*give the GGUF file itself"):
        synthesised_tensors(kvmem.Model.from_hf_config(cfg), "q4_k_m")
