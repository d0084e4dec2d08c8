"""Presets for checkpoints people run on their own GPUs (issue 34): Qwen3-14B / 4B, Qwen2.5-32B,
Qwen3-Coder-30B-A3B, Gemma-3-12B, Mistral-Small-3.2-24B, MiniMax-M2.5, Llama-3.1-405B.

Every number below is worked out by hand from the published config.json (the preset's ``source``)."""

import pytest

import kvmem
from kvmem.catalog import preset

# name -> (hf_id, layers, KV heads, head_dim)
LOCAL = {
    "qwen3-14b": ("Qwen/Qwen3-14B", 40, 8, 128),
    "qwen3-4b": ("Qwen/Qwen3-4B", 36, 8, 128),
    "qwen2.5-32b": ("Qwen/Qwen2.5-32B", 64, 8, 128),                 # no head_dim field: 5120 / 40
    "qwen3-coder-30b-a3b": ("Qwen/Qwen3-Coder-30B-A3B-Instruct", 48, 4, 128),
    "gemma-3-12b": ("google/gemma-3-12b-it", 48, 8, 256),
    "mistral-small-3.2-24b": ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", 40, 8, 128),
    "minimax-m2.5": ("MiniMaxAI/MiniMax-M2.5", 62, 8, 128),
    "llama-3.1-405b": ("meta-llama/Llama-3.1-405B", 126, 8, 128),     # 16384 / 128 heads
}


@pytest.mark.parametrize("name", sorted(LOCAL))
def test_the_preset_names_its_source_and_is_found_by_its_hf_id(name):
    hf_id, layers, _, _ = LOCAL[name]
    data = preset(name)
    assert data["hf_id"] == hf_id
    assert " @ " in data["source"] or "index id" in data["source"]     # repository path @ commit, or an index id
    assert kvmem.get_model(hf_id).name == name and kvmem.get_model(name).num_layers == layers


# one token, the config's dtype (bf16): layers x KV heads x head_dim x (K, V) x 2 B -- every layer holds the
# first token (Gemma-3's sliding layers too)
BYTES_PER_TOKEN = {name: layers * kv * dim * 2 * 2 for name, (_, layers, kv, dim) in LOCAL.items()}
assert BYTES_PER_TOKEN == {"qwen3-14b": 163_840, "qwen3-4b": 147_456, "qwen2.5-32b": 262_144,
                           "qwen3-coder-30b-a3b": 98_304, "gemma-3-12b": 393_216, "mistral-small-3.2-24b": 163_840,
                           "minimax-m2.5": 253_952, "llama-3.1-405b": 516_096}


@pytest.mark.parametrize("name", sorted(LOCAL))
def test_bytes_per_token(name):
    assert kvmem.estimate(name, tokens=1, kv_dtype="auto").kv_bytes == BYTES_PER_TOKEN[name]


def test_gemma_3_12b_sliding_layers_at_32k():
    # sliding_window 1024, sliding_window_pattern 6: layers 5, 11, ..., 47 global (8), the other 40 hold 1,024
    result = kvmem.estimate("gemma-3-12b", tokens="32k", kv_dtype="auto")
    assert result.kv_bytes == (8 * 32768 + 40 * 1024) * 8 * 256 * 2 * 2 == 2_483_027_968


def test_qwen3_coder_parameters_are_the_published_checkpoint_in_bf16():
    # model.safetensors.index.json total_size 61,064,245,248 B of bf16 tensors -> 30,532,122,624 parameters
    published = preset("qwen3-coder-30b-a3b")["published"]
    assert published["checkpoint_bytes"] == 61_064_245_248
    assert kvmem.get_model("qwen3-coder-30b-a3b").params_total * 2 == published["checkpoint_bytes"]


def test_minimax_m2_5_weights_are_the_releases_fp8_blocks():
    data = preset("minimax-m2.5")
    assert data["config"]["quantization_config"]["weight_block_size"] == [128, 128]
    fit = kvmem.fit("minimax-m2.5", gpu="h100-sxm-80gb", num_gpus=4, context="32k", engine="vllm")
    assert fit.fits and "fp8-block" in str(fit.to_dict())
