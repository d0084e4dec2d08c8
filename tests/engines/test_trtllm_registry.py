"""kvmem's trtllm mode answers only for architectures the pinned PyTorch backend registers.

The command kvmem prints is `trtllm-serve --backend pytorch`; that backend builds the model through
AutoModelForCausalLM, which looks the config's architectures[0] up in the registry
(trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118, MODEL_ARCH_TO_MODULE, 81 names) and raises
"Unknown architecture" for any other (trtllm@01bffee1 tensorrt_llm/_torch/models/modeling_auto.py#L51-L55).
"""

import ast
import importlib.util
import pathlib
import re

import pytest

import kvmem
from kvmem.configs.families import FAMILIES
from kvmem.engines import trtllm
from kvmem.engines.trtllm.families import PUBLISHED, REGISTERED, check_architecture
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


# The pinned index, line by line (tests/fixtures/trtllm/arch_index_065ff9e9.tsv: <line>, <architecture>, <module>,
# typed from the source file at 065ff9e93780bc0bdbfdbc7156a306ca14f5850c, not from REGISTERED)
_FIXTURE = pathlib.Path(__file__).parent.parent / "fixtures" / "trtllm" / "arch_index_065ff9e9.tsv"
_TRTLLM_DIR = pathlib.Path(trtllm.__file__).parent


def _index_lines() -> dict:
    rows = [line.split("\t") for line in _FIXTURE.read_text().splitlines() if not line.startswith("#")]
    return {int(row[0]): row[1:] for row in rows}


def test_the_registry_is_the_pinned_index_one_name_a_line():
    index = _index_lines()
    entries = {n: row[0] for n, row in index.items() if len(row) == 2}
    assert "065ff9e93780bc0bdbfdbc7156a306ca14f5850c" in _FIXTURE.read_text().splitlines()[0]
    assert index[36] == ["MODEL_ARCH_TO_MODULE = {"] and index[118] == ["}"] and "_resolve_class" in index[35][0]
    assert sorted(entries) == list(range(37, 118))          # #L37-L117: 81 entries
    assert tuple(entries[n] for n in range(37, 118)) == REGISTERED
    # the lines families.py / minimax.py cite, against the file's own lines
    assert entries[37] == "AfmoeForCausalLM" and entries[39] == "BertForSequenceClassification"
    assert entries[43] == "DeciLMForCausalLM" and entries[46] == "DeepseekV4ForCausalLM"
    assert entries[48] == "Eagle3DeepSeekV3ForCausalLM"
    assert (entries[49], entries[50], entries[51]) == ("Exaone4ForCausalLM", "Exaone4_5_ForConditionalGeneration",
                                                       "ExaoneMoEForCausalLM")
    assert (entries[55], entries[57]) == ("Gemma4ForCausalLM", "Gemma4UnifiedForConditionalGeneration")
    assert entries[58] == "Glm4MoeForCausalLM" and entries[59] == "GlmMoeDsaForCausalLM"
    assert (entries[67], entries[68]) == ("KimiLinearForCausalLM", "LagunaForCausalLM")
    assert (entries[77], entries[78]) == ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")
    assert (entries[98], entries[99]) == ("Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration")
    assert (entries[114], entries[117]) == ("Step3p5ForCausalLM", "WhisperForConditionalGeneration")
    for absent in ("GPT2LMHeadModel", "GPTNeoXForCausalLM", "FalconForCausalLM", "RWForCausalLM", "Gemma2ForCausalLM",
                   "GemmaForCausalLM", "DeepseekV2ForCausalLM", "JambaForCausalLM", "Gemma3nForConditionalGeneration"):
        assert absent not in REGISTERED


def test_every_single_line_citation_of_the_index_names_the_architecture_on_that_line():
    entries = {n: row[0] for n, row in _index_lines().items() if len(row) == 2}
    cited = 0
    for path in sorted(_TRTLLM_DIR.glob("*.py")):
        for line in path.read_text().splitlines():
            for m in re.finditer(r"_arch_index\.py#L(\d+)(?!\d|-L)", line):
                n = int(m.group(1))
                assert n in entries and entries[n] in line, (path.name, line)
                cited += 1
    assert cited >= 11


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


def _transformers_mapping(name: str) -> dict:
    """One of transformers 5.24's *_MAPPING_NAMES tables (model_type -> class), read from its source without
    importing transformers (or torch)."""
    root = pathlib.Path(importlib.util.find_spec("transformers").origin).parent
    for node in ast.parse((root / "models" / "auto" / "modeling_auto.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            return dict(ast.literal_eval(node.value.args[0]))
    raise AssertionError(f"no {name}")


def _published_classes() -> dict:
    """model_type -> the class a published config.json names: PUBLISHED's where the checkpoints name another than
    transformers', else MODEL_FOR_CAUSAL_LM_MAPPING_NAMES' (what save_pretrained writes), else, for a multimodal
    model's text config (qwen3_vl_text, glm4v_text, blip_text_model ...), the outer model's
    MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES class."""
    causal = _transformers_mapping("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")
    outer = _transformers_mapping("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES")
    classes = {}
    for t in FAMILIES:
        if t in PUBLISHED:
            classes[t] = PUBLISHED[t]
        elif t in causal:
            classes[t] = causal[t]
        else:
            parent = re.sub(r"_text(_model)?$", "", t)
            if parent in outer:
                classes[t] = outer[parent]
    return classes


def test_the_published_classes_differ_from_transformers_only_where_listed():
    causal = _transformers_mapping("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")
    # transformers reads these model_types with a registered class, their checkpoints name their own
    assert {t: causal[t] for t in ("exaone", "internlm3", "iquestcoder", "sarvam_moe")} == {
        "exaone": "LlamaForCausalLM", "internlm3": "LlamaForCausalLM", "iquestcoder": "LlamaForCausalLM",
        "sarvam_moe": "Glm4MoeForCausalLM"}
    # published under a multimodal wrapper the registry has (_arch_index.py#L79, #L69)
    assert (causal["ministral3"], causal["llama4_text"]) == ("Ministral3ForCausalLM", "Llama4ForCausalLM")
    assert "Ministral3ForCausalLM" not in REGISTERED and "Llama4ForCausalLM" not in REGISTERED
    assert {t: PUBLISHED[t] in REGISTERED for t in PUBLISHED if PUBLISHED[t] and not FAMILIES[t].opt_in} == {
        "exaone": False, "internlm3": False, "iquestcoder": False, "sarvam_moe": False, "ministral3": True,
        "llama4_text": True}


def test_every_base_family_refused_names_the_class_its_checkpoints_name_and_the_registry_lacks():
    classes = _published_classes()
    refusals = trtllm.SPECS[0].refusals
    base = sorted(t for t in refusals if not FAMILIES[t].opt_in)
    # 41 (the 12 presets' 7 families and 34 more), 44 found since: 22 by their transformers class, 18 multimodal
    # text configs by their model's class, internlm3 / iquestcoder / sarvam_moe / exaone by the checkpoints' class
    assert len(base) == 85
    for t in base:
        arch = classes[t]
        assert arch not in REGISTERED and _NO_ARCH.format(arch="") in refusals[t], t
        assert arch in refusals[t], (t, arch)


def test_every_base_family_left_sized_names_a_registered_class():
    # the converse: a base family trtllm sizes is published under a class the pinned registry has, or names none
    classes = _published_classes()
    sized = sorted(t for t, f in FAMILIES.items() if not f.opt_in and t not in trtllm.SPECS[0].refusals)
    assert len(sized) == 115 - 85 == 30
    unnamed = {t for t in sized if PUBLISHED.get(t, "") is None}
    assert unnamed == {"custom", "custom_mla"}              # kvmem's own configs (kvmem.configs.custom_config)
    for t in sorted(set(sized) - unnamed):
        assert classes.get(t) in REGISTERED, (t, classes.get(t))
    # the opt-in families trtllm sizes too (FAMILIES), exaone_moe through K-EXAONE's ExaoneMoEForCausalLM (#L51),
    # where transformers writes ExaoneMoeForCausalLM
    opt_in = sorted(t for t, f in FAMILIES.items() if f.opt_in and trtllm.SPECS[0].families.sizes(t))
    assert len(opt_in) == 17 and all(classes.get(t) in REGISTERED for t in opt_in), opt_in
    assert _transformers_mapping("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")["exaone_moe"] == "ExaoneMoeForCausalLM"
    assert classes["exaone_moe"] == "ExaoneMoEForCausalLM"
    # multimodal text configs sized through their model's registered class
    assert (classes["qwen3_vl_text"], classes["qwen3_vl_moe_text"]) == (
        "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration")


def test_the_legacy_builder_is_named_where_it_has_the_class_and_not_where_it_has_none():
    legacy = "legacy TensorRT engine builder (trtllm-build, then trtllm-serve --backend tensorrt) has a class for it"
    # MODEL_MAP of tensorrt_llm/models/__init__.py (trtllm@02267d3d, families.py cites the lines)
    for t in ("gpt2", "gpt_neox", "falcon", "gemma2", "deepseek_v2", "bloom", "opt", "phi", "phimoe", "gptj",
              "granite", "granitemoe", "gemma", "cohere", "exaone"):
        assert legacy in trtllm.SPECS[0].refusals[t], t
    for t in ("gemma3n_text", "jamba", "olmo", "stablelm", "glm4_moe_lite", "internlm3", "apertus", "glm4v_text"):
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
    # a llama config (a family trtllm sizes) naming InternLM3ForCausalLM, which the PyTorch backend does not register
    model = kvmem.Model.from_hf_config(_config("llama", "InternLM3ForCausalLM"))
    assert "llama" not in trtllm.SPECS[0].refusals
    with pytest.raises(EngineRefusal, match=r"does not size architectures\[0\] 'InternLM3ForCausalLM' \(model_type "
                                            r"'llama'\): TensorRT-LLM's PyTorch backend registers no "
                                            r"InternLM3ForCausalLM \(trtllm@065ff9e9 "):
        kvmem.estimate(model, engine="trtllm", tokens=64)
    with pytest.raises(EngineRefusal):               # the module's own functions check it too
        trtllm.bytes_per_token(model)
    # the same geometry under LlamaForCausalLM: 2 layers x 2 (K, V) x 2 heads x 64 x 2 B = 1,024 B/token
    llama = kvmem.Model.from_hf_config(_config("llama", "LlamaForCausalLM"))
    assert trtllm.bytes_per_token(llama) == 2 * 2 * 2 * 64 * 2 == 1_024
    # no architecture named: left to the family rules (the same 1,024)
    assert trtllm.bytes_per_token(kvmem.Model.from_hf_config(_config("llama", None))) == 1_024
    # internlm3 itself is refused by family, whatever its file names (its checkpoints name InternLM3ForCausalLM)
    with pytest.raises(EngineRefusal, match="registers no InternLM3ForCausalLM"):
        kvmem.estimate(kvmem.Model.from_hf_config(_config("internlm3", None)), engine="trtllm", tokens=64)


def test_an_eagle3_draft_is_looked_up_under_the_name_resolve_class_makes():
    # modeling_auto.py@01bffee1 #L31-L34: only with draft_vocab_size is "Eagle3" dropped and "EAGLE3" put in front
    # (EAGLE3LlamaForCausalLM, _arch_index.py#L47); every other name is looked up as written
    check_architecture(kvmem.Model.from_hf_config(_config("llama", "LlamaForCausalLMEagle3", draft_vocab_size=32000)))
    check_architecture(kvmem.Model.from_hf_config(_config("llama", "LlamaForCausalLM", draft_vocab_size=32000)))
    with pytest.raises(EngineRefusal, match="registers no EAGLE3Qwen3ForCausalLM"):
        check_architecture(kvmem.Model.from_hf_config(_config("qwen3", "Qwen3ForCausalLM", draft_vocab_size=32000)))
    # without draft_vocab_size the name stays: LlamaForCausalLMEagle3 is not registered (the older 5d4a661c rule
    # dropped "Eagle3" here and answered for it) ...
    with pytest.raises(EngineRefusal, match="registers no LlamaForCausalLMEagle3"):
        check_architecture(kvmem.Model.from_hf_config(_config("llama", "LlamaForCausalLMEagle3")))
    # ... and Eagle3DeepSeekV3ForCausalLM (_arch_index.py#L48) is reached as written (5d4a661c made it
    # DeepSeekV3ForCausalLM, which is not registered)
    check_architecture(kvmem.Model.from_hf_config(_config("deepseek_v3", "Eagle3DeepSeekV3ForCausalLM")))
    with pytest.raises(EngineRefusal, match="registers no EAGLE3DeepSeekV3ForCausalLM"):
        check_architecture(kvmem.Model.from_hf_config(_config("deepseek_v3", "Eagle3DeepSeekV3ForCausalLM",
                                                              draft_vocab_size=32000)))


def test_a_draft_model_the_registry_lacks_is_refused_too():
    # a two-model draft is built by the same AutoModelForCausalLM
    with pytest.raises(EngineRefusal, match="registers no GPT2LMHeadModel"):
        kvmem.estimate("llama-3.1-8b", engine="trtllm", tokens=1024, draft="gpt2")
    # a registered draft: llama-3.2-1b's cache beside the target's (the sum kvmem reported before this rule)
    assert kvmem.estimate("llama-3.1-8b", engine="trtllm", tokens=1024, draft="llama-3.2-1b").kv_bytes == 167_772_160
