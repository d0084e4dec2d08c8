"""explain.reasons: why an engine's number differs from the seed formula, in sentences."""

import kvmem
from kvmem.explain import reasons


def test_reasons_for_a_gqa_model_on_vllm():
    model = kvmem.get_model("llama-3.1-8b")
    result = kvmem.estimate(model, engine="vllm", tokens=1000, batch=2)
    out = reasons(model, result)
    # seed formula: 2 x 2 B x 2 x 32 layers x 8 KV heads x 128 x 1000 = 262,144,000 B = 250.00 MiB;
    # vLLM: 63 blocks of 16 = 1008 slots per sequence -> 264,241,152 B = 252.00 MiB
    assert out[0] == ("The seed formula with these numbers gives 250.00 MiB; every cached element counted once "
                      "(ideal) is 250.00 MiB; vllm holds 252.00 MiB on one device.")
    assert "GQA: 8 KV heads serve 32 query heads (4x smaller than MHA)." in out
    assert out[-len(result.notes):] == list(result.notes)
    assert out[-len(result.notes) - 1].startswith("Read as llama (configuration_llama.py, generic rule); fields read: "
                                                  "num_hidden_layers, num_attention_heads, num_key_value_heads")


def test_reasons_say_which_fields_came_from_defaults():
    # a sparse config is filled from LlamaConfig's defaults: say so, field by field
    model = kvmem.Model.from_hf_config({"model_type": "llama", "hidden_size": 4096})
    out = reasons(model, kvmem.estimate(model, tokens=16))
    assert ("Not in the file, taken from transformers' defaults for this family: num_hidden_layers = 32, "
            "num_attention_heads = 32") in out[-1]


def test_reasons_name_windows_latents_states_and_tensor_parallel():
    gemma = kvmem.get_model("gemma-3-27b")
    out = reasons(gemma, kvmem.estimate(gemma, tokens=8192))
    assert "52 of 62 layers use a sliding window of 1,024 tokens and hold at most that many, whatever the context." in out
    deepseek = kvmem.get_model("deepseek-v3")
    out = reasons(deepseek, kvmem.estimate(deepseek, tokens=100, tp=8))
    assert "MLA: each layer caches one 576-wide latent per token for all 128 heads, not per-head K and V." in out
    assert "Tensor parallel 8: KV heads are split across devices; the number is one device's." in out
    qwen_next = kvmem.get_model("qwen3-next-80b-a3b")
    result = kvmem.estimate(qwen_next, tokens=100)
    assert any(line.startswith("36 linear-attention/SSM layers keep a fixed state per sequence")
               for line in reasons(qwen_next, result))
