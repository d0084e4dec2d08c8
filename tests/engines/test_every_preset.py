"""Every engine mode on every preset: a number, or the refusal this file expects — never a crash.

REFUSALS names each (preset, engine) that refuses and the reason it gives; any other
ValueError fails, and so does an expected refusal that no longer happens.
"""

import pytest

import kvmem
from kvmem.engines import ENGINES

_QUANTIZED_CACHE = "`QuantizedCache` is only supported for models with only full attention layers"
REFUSALS = {
    # transformers' QuantizedCache refuses any layer that is not full attention (cache_utils.py)
    **{(name, "hf-quantized"): _QUANTIZED_CACHE for name in (
        "deepseek-v3.2", "gemma-2-27b", "gemma-2-2b", "gemma-2-9b", "gemma-3-1b", "gemma-3-27b", "gemma-3-4b",
        "gemma-3n-e2b", "gemma-3n-e4b", "gemma-3-12b", "gpt-oss-120b", "gpt-oss-20b", "jamba-1.5-mini", "llama-4-maverick-17b-128e",
        "llama-4-scout-17b-16e", "mistral-7b-v0.1", "nemotron-h-8b", "phi-3-medium-4k", "phi-3-mini-4k",
        "qwen3-next-80b-a3b", "qwen3.5-27b", "qwen3.5-397b-a17b", "nemotron-3-nano-30b-a3b",
        "qwen3.5-9b", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.6-35b-a3b",
        # the opt-in families hf-quantized now declares (kvmem/engines/hf/__init__.py QUANTIZED_FAMILIES)
        "kimi-linear-48b-a3b", "minimax-m1", "deepseek-v4-flash", "deepseek-v4-pro", "glm-5", "glm-5.1", "glm-5.2",
        "kimi-k3", "gemma-4-26b-a4b", "minimax-m3")},
    # vllm/model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS: removed after 0.23.0
    ("minimax-m1", "vllm"): "vLLM 0.33.0 has no MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM",
    # python/sglang/srt/models/: no EntryClass for MiniMax-Text-01 / M1 (kvmem/engines/sglang/families.py)
    ("minimax-m1", "sglang"): "SGLang 0.5.23 has no model file for MiniMax-Text-01 / MiniMax-M1",
    # tensorrt_llm/_torch/models/_arch_index.py: MiniMaxM2 and MiniMaxM3Sparse only
    ("minimax-m1", "trtllm"): "TensorRT-LLM's PyTorch backend registers no MiniMaxText01ForCausalLM",
    # tensorrt_llm/_torch/models/modeling_kimi_linear.py: Kimi-K3's latent MoE only
    ("kimi-linear-48b-a3b", "trtllm"): "KimiLinearForCausalLM builds Kimi-K3's latent MoE layer only",
    # DeepSeek-V4's compressed sparse attention: ideal and hf-dynamic only (StaticCache has no layer class for it)
    **{(name, "hf-static"): "StaticCache has no layer class for compressed_sparse_attention"
       for name in ("deepseek-v4-flash", "deepseek-v4-pro")},
    # TensorRT-LLM's DeepseekV4CacheManager asserts 128 or 256 tokens per block; its default is 32
    **{(name, "trtllm"): "asserts tokens_per_block in [128, 256]" for name in ("deepseek-v4-flash", "deepseek-v4-pro")},
    # python/sglang/srt/models/: no EntryClass for JambaForCausalLM (kvmem/engines/sglang/families.py)
    ("jamba-1.5-mini", "sglang"): "SGLang 0.5.23 has no model file for JambaForCausalLM",
    # tensorrt_llm/_torch/models/_arch_index.py: Glm4MoeForCausalLM, no Glm4ForCausalLM (kvmem/engines/trtllm/families.py)
    **{(name, "trtllm"): "TensorRT-LLM's PyTorch backend registers no Glm4ForCausalLM"
       for name in ("glm-4-32b-0414", "glm-z1-32b-0414", "glm-4-9b-0414")},
    # likewise no GPT-2, GPT-NeoX, Falcon, Gemma 2, DeepSeek-V2, Gemma 3n or Jamba (tests/engines/test_trtllm_registry.py)
    **{(name, "trtllm"): f"TensorRT-LLM's PyTorch backend registers no {arch}" for name, arch in (
        ("gpt2", "GPT2LMHeadModel"), ("gpt-neox-20b", "GPTNeoXForCausalLM"), ("falcon-7b", "FalconForCausalLM"),
        ("falcon-40b", "FalconForCausalLM"), ("gemma-2-2b", "Gemma2ForCausalLM"), ("gemma-2-9b", "Gemma2ForCausalLM"),
        ("gemma-2-27b", "Gemma2ForCausalLM"), ("deepseek-v2", "DeepseekV2ForCausalLM"),
        ("deepseek-v2-lite", "DeepseekV2ForCausalLM"), ("gemma-3n-e2b", "Gemma3nForConditionalGeneration"),
        ("gemma-3n-e4b", "Gemma3nForConditionalGeneration"), ("jamba-1.5-mini", "JambaForCausalLM"))},
}


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("name", kvmem.list_models())
def test_estimate_or_expected_refusal(name, engine):
    expected = REFUSALS.get((name, engine))
    if expected is not None:
        with pytest.raises(ValueError) as refused:
            kvmem.estimate(name, engine=engine, tokens=4096, batch=2)
        assert expected in str(refused.value)
        return
    result = kvmem.estimate(name, engine=engine, tokens=4096, batch=2)
    model = kvmem.get_model(name)
    assert result.kv_bytes > 0 or model.count("linear") == model.num_layers
    assert result.total_bytes == result.kv_bytes + result.state_bytes
    assert result.to_dict()["kv_bytes"] == result.kv_bytes
    assert len(result.per_layer) >= model.num_layers  # draft/MTP layers may follow the model's own
    assert result.kv_bytes_all_devices >= result.kv_bytes


def test_the_allowlist_names_real_presets_and_engines():
    assert {name for name, _ in REFUSALS} <= set(kvmem.list_models())
    assert {engine for _, engine in REFUSALS} <= set(ENGINES)
