"""The one config reader: every fact engines and sizing read beyond the layers (ModelFacts, MoeShape)."""

from pathlib import Path

import pytest

import kvmem
from kvmem import ConfigError, Model
from kvmem.activations import forward_shape
from kvmem.facts import ModelFacts, MoeShape

FIXTURES = Path(__file__).parent / "fixtures" / "configs"
LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}


def test_glm_4_7_flash_reads_mla_without_head_dim():
    # glm4_moe_lite: 47 MLA layers, kv_lora_rank 512 + rope 64; hidden 2048 is not divisible by the
    # 20 heads, and the config has no head_dim: a query/key head is 192 + 64 wide
    model = Model.from_hf_config(FIXTURES / "glm-4.7-flash.json")
    assert model.name == "zai-org/GLM-4.7-Flash" and model.kinds == {"mla": 47}
    layer = model.layers[0]
    assert (layer.kv_lora_rank, layer.qk_rope_head_dim) == (512, 64)
    assert (model.hidden_size, model.num_attention_heads) == (2048, 20)
    assert (model.facts.qk_nope_head_dim, model.facts.v_head_dim, model.facts.q_lora_rank) == (192, 256, 768)
    moe = model.facts.moe
    assert (moe.experts, moe.top_k, moe.intermediate_size, moe.shared_intermediate_size) == (64, 4, 1536, 1536)
    assert moe.moe_layers == (False,) + (True,) * 46 and moe.dense_intermediate_size == 10240
    assert model.params_total // 10**9 == 29 and model.params_active // 10**8 == 35    # "30B-A3B"


def test_glm_4_7_flash_sizes_on_sglang_as_its_log_printed():
    # SGLang, tp 2: the MLA latent is replicated, 47 layers x (512 + 64) x 2 B = 54,144 B per token;
    # 383,872 tokens x 54,144 B = 20,784,365,568 B = 19.36 GiB: "KV size: 19.36 GB" (SGLang's GB = 2**30)
    model = Model.from_hf_config(FIXTURES / "glm-4.7-flash.json")
    cap = kvmem.capacity(model, engine="sglang", kv_memory=383_872 * 54_144, tp=2)
    assert cap.tokens == 383_872
    assert cap.details.log == ["KV Cache is allocated. dtype: torch.bfloat16, #tokens: 383872, KV size: 19.36 GB"]
    older = kvmem.capacity(model, engine="sglang", kv_memory=383_872 * 54_144, tp=2, version="0.5.0")
    assert older.details.log == ["KV Cache is allocated. #tokens: 383872, KV size: 19.36 GB"]   # no dtype field
    est = kvmem.estimate(model, engine="sglang", tokens=383_872, tp=2)
    assert f"{est.kv_bytes / 2**30:.2f}" == "19.36"
    assert kvmem.fit(model, gpu="h100", num_gpus=2, engine="sglang", context=32768).fits


@pytest.mark.parametrize("value", ["float8_e4m3fn", "int8", "fp64"])
def test_unknown_torch_dtype_is_an_error_never_a_silent_bf16(value):
    with pytest.raises(ConfigError, match=f"config field 'torch_dtype' is '{value}'; kvmem reads bfloat16, "
                                          "float16, float32"):
        Model.from_hf_config({**LLAMA, "torch_dtype": value})


@pytest.mark.parametrize("cfg, expected", [
    ({"torch_dtype": "torch.float16"}, "fp16"),
    ({"dtype": "float32"}, "fp32"),                # transformers 5 writes "dtype"
    ({}, "bf16"),                                  # none given: bf16, as the contract says
])
def test_torch_dtype_spellings(cfg, expected):
    assert Model.from_hf_config({**LLAMA, **cfg}).dtype == expected


def test_facts_of_a_dense_model_and_a_hand_built_one():
    facts = Model.from_hf_config({**LLAMA, "architectures": ["LlamaForCausalLM"]}).facts
    # LlamaConfig ties no embeddings by default (transformers defaults, kvmem/data/hf_defaults.json)
    assert facts == ModelFacts(architectures=("LlamaForCausalLM",), intermediate_size=512, vocab_size=1000,
                               tie_word_embeddings=False)
    hand = Model(name="x", layers=(kvmem.Layer("full", kv_heads=1, head_dim_k=8, head_dim_v=8),), hidden_size=8,
                 num_attention_heads=1)
    assert hand.facts == ModelFacts() and hand.facts.moe is None


def test_outer_config_wins_for_architectures_and_quantization_config():
    cfg = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
           "quantization_config": {"quant_method": "fp8"},
           "text_config": {**LLAMA, "model_type": "gemma3_text", "architectures": ["Inner"],
                           "quantization_config": {"quant_method": "awq"}, "sliding_window": 512,
                           "sliding_window_pattern": 6, "head_dim": 64}}
    facts = Model.from_hf_config(cfg).facts
    assert facts.architectures == ("Gemma3ForConditionalGeneration",)
    assert facts.quantization_config == {"quant_method": "fp8"}


def test_moe_shape_of_deepseek_v3_and_llama4():
    # DeepSeek-V3: 256 routed experts, 8 per token, 1 shared of 2048; the first 3 layers dense (18,432)
    moe = kvmem.get_model("deepseek-v3").facts.moe
    assert moe == MoeShape(experts=256, top_k=8, intermediate_size=2048, shared_intermediate_size=2048,
                           dense_intermediate_size=18432, moe_layers=(False,) * 3 + (True,) * 58)
    # Llama 4 Scout: 16 experts, 1 per token, a shared expert as wide as one routed expert
    scout = kvmem.get_model("llama-4-scout-17b-16e").facts.moe
    assert (scout.experts, scout.top_k, scout.shared_intermediate_size) == (16, 1, scout.intermediate_size)
    assert kvmem.get_model("llama-3.1-8b").facts.moe is None


def test_nemotron_h_is_moe_only_where_its_pattern_says_e():
    # transformers' NemotronHConfig defaults n_routed_experts=8, num_experts_per_tok=2 (for the MoE
    # Nemotron-H models); the dense Nemotron-H-8B's config.json has no "E" block, so it is dense:
    # the activation peak uses its MLP width, 21,504, not a phantom 8-expert MoE
    dense = kvmem.get_model("nemotron-h-8b")
    assert dense.facts.moe is None
    assert (forward_shape(dense).intermediate, forward_shape(dense).top_k) == (21504, 0)
    moe_cfg = {"model_type": "nemotron_h", "num_hidden_layers": 4, "hybrid_override_pattern": "M*EE",
               "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
               "intermediate_size": 512, "vocab_size": 1000, "mamba_num_heads": 8, "mamba_head_dim": 32,
               "ssm_state_size": 16, "n_groups": 1, "conv_kernel": 4, "n_routed_experts": 16,
               "num_experts_per_tok": 4, "moe_intermediate_size": 128}
    moe = Model.from_hf_config(moe_cfg, name="nemotron-moe").facts.moe
    assert (moe.experts, moe.top_k, moe.intermediate_size, moe.moe_layers) == (16, 4, 128, (False, False, True, True))


def test_architectures_must_be_a_list_of_names():
    with pytest.raises(ConfigError, match="config field 'architectures' must be a list of class names"):
        Model.from_hf_config({**LLAMA, "architectures": "LlamaForCausalLM"})
