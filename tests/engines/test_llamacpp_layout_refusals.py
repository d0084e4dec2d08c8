"""Architectures whose llama.cpp tensors kvmem does not lay out are refused by name, not laid out as llama's.

llama.cpp 0c1e57098 refuses the llama-style layout of each (tests/oracles/test_llamacpp_presets_oracle.py
loads the presets' GGUFs): gptneox wants output_norm.bias. gpt-oss, glm4moe, gemma4 ... have their own layouts now
(kvmem.engines.llamacpp.arch_tensors, tests/oracles/test_llamacpp_layout_families_oracle.py).
"""

import pytest

import kvmem
from kvmem.engines.llamacpp.tensors import synthesised_tensors


@pytest.mark.parametrize("preset", ["gpt-neox-20b"])
def test_refused_by_name(preset):
    model = kvmem.get_model(preset)
    with pytest.raises(ValueError, match=f"does not lay out llama.cpp's {model.model_type} tensors"):
        synthesised_tensors(model, "q4_k_m")
