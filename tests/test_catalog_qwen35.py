"""The Qwen3.5 / Qwen3.6 presets people run (issue 34): their configs as published, their KV and recurrent state.

Every number below is worked out by hand from the published config.json (the preset's ``source``)."""

import pytest

import kvmem
from kvmem.catalog import preset

# name -> (hf_id, layers, full-attention layers, KV heads, linear value heads, experts or None)
QWEN35 = {
    "qwen3.5-9b": ("Qwen/Qwen3.5-9B", 32, 8, 4, 32, None),
    "qwen3.5-35b-a3b": ("Qwen/Qwen3.5-35B-A3B", 40, 10, 2, 32, (256, 8)),
    "qwen3.6-35b-a3b": ("Qwen/Qwen3.6-35B-A3B", 40, 10, 2, 32, (256, 8)),
    "qwen3.5-122b-a10b": ("Qwen/Qwen3.5-122B-A10B", 48, 12, 2, 64, (256, 8)),
}


@pytest.mark.parametrize("name", sorted(QWEN35))
def test_the_preset_is_the_published_config(name):
    hf_id, layers, full, kv_heads, v_heads, experts = QWEN35[name]
    data = preset(name)
    assert data["hf_id"] == hf_id and " @ " in data["source"]        # repository path @ commit
    text = data["config"]["text_config"]
    assert text["num_hidden_layers"] == len(text["layer_types"]) == layers
    # every 4th layer is full attention (full_attention_interval 4), the rest Gated DeltaNet
    assert [i for i, t in enumerate(text["layer_types"]) if t == "full_attention"] == list(range(3, layers, 4))
    assert text["num_key_value_heads"] == kv_heads and text["head_dim"] == 256
    assert text["linear_num_value_heads"] == v_heads and text["linear_num_key_heads"] == 16
    assert (text.get("num_experts"), text.get("num_experts_per_tok")) == (experts or (None, None))
    assert "quantization_config" not in data["config"]        # the BF16 release (the FP8 copy's block is dropped)
    model = kvmem.get_model(name)
    assert model.num_layers == layers and model.count("linear") == layers - full


# one token, the config's dtype (bf16): full-attention layers x KV heads x head_dim 256 x (K, V) x 2 B
BYTES_PER_TOKEN = {
    "qwen3.5-9b": 8 * 4 * 256 * 2 * 2,              # 32,768
    "qwen3.5-35b-a3b": 10 * 2 * 256 * 2 * 2,        # 20,480
    "qwen3.6-35b-a3b": 10 * 2 * 256 * 2 * 2,        # 20,480
    "qwen3.5-122b-a10b": 12 * 2 * 256 * 2 * 2,      # 24,576 (the figure a note quoting the HF config gives)
}
# per sequence, each Gated DeltaNet layer: conv (kernel 4 - 1) x (2 x 16 x 128 + V heads x 128) in bf16 and the
# state V heads x 128 x 128 in float32 (mamba_ssm_dtype)
STATE = {
    "qwen3.5-9b": 24 * (3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4),            # 51,511,296
    "qwen3.5-35b-a3b": 30 * (3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4),       # 64,389,120
    "qwen3.6-35b-a3b": 30 * (3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4),       # 64,389,120
    "qwen3.5-122b-a10b": 36 * (3 * (2 * 16 * 128 + 64 * 128) * 2 + 64 * 128 * 128 * 4),     # 153,649,152
}


@pytest.mark.parametrize("name", sorted(QWEN35))
def test_kv_and_recurrent_state(name):
    result = kvmem.estimate(name, tokens=1, kv_dtype="auto")
    assert (result.kv_bytes, result.state_bytes) == (BYTES_PER_TOKEN[name], STATE[name])


@pytest.mark.parametrize("name, hf_id", [("qwen3.5-122b-a10b", "Qwen/Qwen3.5-122B-A10B"),
                                         ("qwen3.6-35b-a3b", "Qwen/Qwen3.6-35B-A3B")])
def test_found_by_the_names_people_use(name, hf_id):
    # the HF id, its last part (a GGUF file's stem) in any case
    assert kvmem.get_model(hf_id).name == name
    assert kvmem.get_model(hf_id.split("/")[1].upper()).name == name
