"""kvmem's trtllm mode answers only for architectures the pinned PyTorch backend registers.

The command kvmem prints is `trtllm-serve --backend pytorch`; that backend builds the model through
AutoModelForCausalLM, which looks the config's architectures[0] up in the registry
(trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118, MODEL_ARCH_TO_MODULE, 81 names) and raises
"Unknown architecture" for any other (trtllm@5d4a661c tensorrt_llm/_torch/models/modeling_auto.py#L37-L41).
"""

import ast
import importlib.util
import pathlib

import pytest

import kvmem
from kvmem.configs.families import FAMILIES
from kvmem.engines import trtllm
from kvmem.engines.trtllm.families import REGISTERED, check_architecture
from kvmem.errors import EngineRefusal

# the presets whose architecture the pinned registry lacks: the four of the brief, and the three found checking all 80
NEWLY_REFUSED = {
    "gpt2": "GPT2LMHeadModel", "gpt-neox-20b": "GPTNeoXForCausalLM", "falcon-7b": "FalconForCausalLM",
    "falcon-40b": "FalconForCausalLM", "gemma-2-2b": "Gemma2ForCausalLM", "gemma-2-9b": "Gemma2ForCausalLM",
    "gemma-2-27b": "Gemma2ForCausalLM", "deepseek-v2": "DeepseekV2ForCausalLM",
    "deepseek-v2-lite": "DeepseekV2ForCausalLM", "gemma-3n-e2b": "Gemma3nForConditionalGeneration",
    "gemma-3n-e4b": "Gemma3nForConditionalGeneration", "jamba-1.5-mini": "JambaForCausalLM",
}
# refused before (families.py: GLM-4-0414's Glm4ForCausalLM, MiniMax-M1's MiniMaxM1ForCausalLM)
REFUSED_BEFORE = {"glm-4-32b-0414", "glm-z1-32b-0414", "glm-4-9b-0414", "minimax-m1"}
_NO_ARCH = "TensorRT-LLM's PyTorch backend registers no {arch}"
_CITED = "trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118"


def test_the_registry_is_the_pinned_index_one_name_a_line():
    # #L37-L117 hold the 81 entries, sorted; a name's line is 37 + its index
    assert len(REGISTERED) == 117 - 37 + 1 == 81 and list(REGISTERED) == sorted(set(REGISTERED))
    line = {name: 37 + i for i, name in enumerate(REGISTERED)}
    # the lines families.py cites for the families kvmem sizes or refuses
    assert line["AfmoeForCausalLM"] == 37 and line["BertForSequenceClassification"] == 39
    assert line["DeciLMForCausalLM"] == 43 and line["DeepseekV4ForCausalLM"] == 46
    assert line["Exaone4ForCausalLM"] == 49 and line["ExaoneMoEForCausalLM"] == 51
    assert (line["Gemma4ForCausalLM"], line["Gemma4UnifiedForConditionalGeneration"]) == (55, 57)
    assert line["Glm4MoeForCausalLM"] == 58 and line["GlmMoeDsaForCausalLM"] == 59
    assert (line["KimiLinearForCausalLM"], line["LagunaForCausalLM"]) == (67, 68)
    assert (line["MiniMaxM3SparseForCausalLM"], line["MiniMaxM3SparseForConditionalGeneration"]) == (77, 78)
    assert (line["Qwen2VLForConditionalGeneration"], line["Qwen2_5_VLForConditionalGeneration"]) == (98, 99)
    assert (line["Step3p5ForCausalLM"], line["WhisperForConditionalGeneration"]) == (114, 117)
    for absent in ("GPT2LMHeadModel", "GPTNeoXForCausalLM", "FalconForCausalLM", "RWForCausalLM", "Gemma2ForCausalLM",
                   "GemmaForCausalLM", "DeepseekV2ForCausalLM", "JambaForCausalLM", "Gemma3nForConditionalGeneration"):
        assert absent not in REGISTERED


def test_the_command_kvmem_prints_is_the_pytorch_backend():
    # the registry judges because the printed command selects it (launch.py; serve.py launch_server: pytorch ->
    # the PyTorch LLM); a legacy TensorRT engine would need trtllm-build and --backend tensorrt
    argv = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k", engine="trtllm").argv
    assert argv[:4] == ["trtllm-serve", "meta-llama/Llama-3.1-8B-Instruct", "--backend", "pytorch"]


@pytest.mark.parametrize("name", sorted(NEWLY_REFUSED))
def test_a_preset_whose_architecture_the_registry_lacks_is_refused_with_the_engines_reason(name):
    arch = NEWLY_REFUSED[name]
    assert kvmem.get_model(name).facts.architectures[0] == arch
    with pytest.raises(EngineRefusal) as refused:
        kvmem.estimate(name, engine="trtllm", tokens=4096, batch=2)
    assert _NO_ARCH.format(arch=arch) in refused.value.reason and _CITED in refused.value.reason
    assert refused.value.engine == "trtllm" and "trtllm" not in refused.value.way_out
    # the other modes still size it (ideal, the transformers caches, vLLM / SGLang / llama.cpp unless they refuse)
    assert refused.value.way_out.startswith("engines that size it: ideal, hf-dynamic")
    with pytest.raises(EngineRefusal):
        kvmem.plan(name, gpu="h100-sxm-80gb", context="1k", engine="trtllm")


def _transformers_causal_lm_classes() -> dict:
    """transformers 5.24's MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (model_type -> the class save_pretrained writes into a
    config's architectures), read from its source without importing transformers (or torch)."""
    root = pathlib.Path(importlib.util.find_spec("transformers").origin).parent
    for node in ast.parse((root / "models" / "auto" / "modeling_auto.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES":
            return dict(ast.literal_eval(node.value.args[0]))
    raise AssertionError("no MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")


def test_every_base_family_refused_names_the_class_its_checkpoints_name_and_the_registry_lacks():
    classes = _transformers_causal_lm_classes()
    base = sorted(t for t in trtllm.SPECS[0].refusals if not FAMILIES[t].opt_in)
    assert len(base) == 41
    for t in base:
        arch = classes[t]
        assert arch not in REGISTERED and _NO_ARCH.format(arch="") in trtllm.SPECS[0].refusals[t], t
        assert arch in trtllm.SPECS[0].refusals[t], (t, arch)
    # families whose transformers class the registry has stay sized (a sample of the base families)
    for t in ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "phi3", "gemma3_text", "starcoder2",
              "cohere2", "glm4_moe", "gpt_oss", "deepseek_v3", "nemotron", "seed_oss", "minimax_m2"):
        assert classes[t] in REGISTERED and t not in trtllm.SPECS[0].refusals, t


def test_the_legacy_builder_is_named_where_it_has_the_class_and_not_where_it_has_none():
    legacy = "legacy TensorRT engine builder (trtllm-build, then trtllm-serve --backend tensorrt) has a class for it"
    # MODEL_MAP of tensorrt_llm/models/__init__.py (trtllm@02267d3d, families.py cites the lines)
    for t in ("gpt2", "gpt_neox", "falcon", "gemma2", "deepseek_v2", "bloom", "opt", "phi", "phimoe", "gptj",
              "granite", "granitemoe", "gemma", "cohere"):
        assert legacy in trtllm.SPECS[0].refusals[t], t
    for t in ("gemma3n_text", "jamba", "olmo", "stablelm", "glm4_moe_lite"):
        assert legacy not in trtllm.SPECS[0].refusals[t], t


def test_every_preset_answers_exactly_when_its_architecture_is_registered():
    refused = set()
    for name in kvmem.list_models():
        arch = kvmem.get_model(name).facts.architectures[0]
        try:
            kvmem.estimate(name, engine="trtllm", tokens=1024)
        except EngineRefusal as exc:
            if arch not in REGISTERED:
                refused.add(name)
                assert "registers no" in exc.reason, name
            else:   # a registered architecture refused for a rule of its own: DeepSeek-V4, Kimi-Linear
                assert name in {"deepseek-v4-flash", "deepseek-v4-pro", "kimi-linear-48b-a3b"}, name
        except ValueError:
            assert arch in REGISTERED, name
        else:
            assert arch in REGISTERED, name
    assert refused == set(NEWLY_REFUSED) | REFUSED_BEFORE


def _config(model_type, arch, **extra):
    return {"model_type": model_type, "architectures": [arch] if arch else [], "num_hidden_layers": 2,
            "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "vocab_size": 1000, "intermediate_size": 100, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
            **extra}


def test_any_config_naming_an_unregistered_architecture_is_refused_whatever_its_family():
    # internlm3 is sized by model_type (transformers reads it as Llama); InternLM3's checkpoints name
    # InternLM3ForCausalLM, which TensorRT-LLM's PyTorch backend does not register
    model = kvmem.Model.from_hf_config(_config("internlm3", "InternLM3ForCausalLM"))
    assert "internlm3" not in trtllm.SPECS[0].refusals
    with pytest.raises(EngineRefusal, match=r"does not size architectures\[0\] 'InternLM3ForCausalLM' \(model_type "
                                            r"'internlm3'\): TensorRT-LLM's PyTorch backend registers no "
                                            r"InternLM3ForCausalLM \(trtllm@065ff9e9 "):
        kvmem.estimate(model, engine="trtllm", tokens=64)
    with pytest.raises(EngineRefusal):               # the module's own functions check it too
        trtllm.bytes_per_token(model)
    # the same geometry under LlamaForCausalLM: 2 layers x 2 (K, V) x 2 heads x 64 x 2 B = 1,024 B/token
    llama = kvmem.Model.from_hf_config(_config("llama", "LlamaForCausalLM"))
    assert trtllm.bytes_per_token(llama) == 2 * 2 * 2 * 64 * 2 == 1_024
    # no architecture named: left to the family rules (the same 1,024)
    assert trtllm.bytes_per_token(kvmem.Model.from_hf_config(_config("llama", None))) == 1_024


def test_an_eagle3_draft_is_looked_up_under_the_rewritten_name():
    # modeling_auto.py#L30-L33: "Eagle3" dropped; draft_vocab_size -> "EAGLE3" in front; EAGLE3LlamaForCausalLM is
    # registered (_arch_index.py#L47), EAGLE3Qwen3ForCausalLM is not
    check_architecture(kvmem.Model.from_hf_config(_config("llama", "LlamaForCausalLMEagle3", draft_vocab_size=32000)))
    check_architecture(kvmem.Model.from_hf_config(_config("llama", "LlamaForCausalLMEagle3")))
    with pytest.raises(EngineRefusal, match="registers no EAGLE3Qwen3ForCausalLM"):
        check_architecture(kvmem.Model.from_hf_config(_config("qwen3", "Qwen3ForCausalLM", draft_vocab_size=32000)))


def test_a_draft_model_the_registry_lacks_is_refused_too():
    # a two-model draft is built by the same AutoModelForCausalLM
    with pytest.raises(EngineRefusal, match="registers no GPT2LMHeadModel"):
        kvmem.estimate("llama-3.1-8b", engine="trtllm", tokens=1024, draft="gpt2")
    # a registered draft: llama-3.2-1b's cache beside the target's (the sum kvmem reported before this rule)
    assert kvmem.estimate("llama-3.1-8b", engine="trtllm", tokens=1024, draft="llama-3.2-1b").kv_bytes == 167_772_160
