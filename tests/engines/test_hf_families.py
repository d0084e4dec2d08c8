"""hf modes and the families transformers 5.24.0 does (CPM-Ant's prepended prompt) or does not
(Nemotron-NAS) run: the bytes its caches hold, or its own reason for not running one."""

import pytest

import kvmem
from kvmem.errors import EngineRefusal

CPMANT = {"model_type": "cpmant", "architectures": ["CpmAntForCausalLM"], "hidden_size": 4096,
          "num_attention_heads": 32, "dim_head": 128, "num_hidden_layers": 48, "torch_dtype": "float32"}


def test_cpmant_caches_its_32_prompt_tokens_ahead_of_the_input():
    # modeling_cpmant.py CpmAntModel.forward prepends prompt_length (CpmAntConfig default 32) ids:
    # 51 tokens cache 83. 48 layers x 32 heads x 128 x 2 (K, V) x 4 B = 1,572,864 B/token x 83 = 130,547,712 B
    model = kvmem.Model.from_hf_config(CPMANT)
    for engine in ("hf-dynamic", "hf-static"):
        e = kvmem.engines.engine_estimate(model, engine=engine, tokens=51, prompt_tokens=48)
        assert e.kv_bytes == 130_547_712
        assert any("32 prompt tokens" in note for note in e.notes)


def test_cpmant_prompt_length_is_the_configs():
    # prompt_length 8: 51 + 8 = 59 tokens x 1,572,864 B = 92,798,976 B
    model = kvmem.Model.from_hf_config({**CPMANT, "prompt_length": 8})
    assert kvmem.engines.engine_estimate(model, engine="hf-dynamic", tokens=51).kv_bytes == 92_798_976


def test_cpmant_static_cache_must_hold_the_prepended_tokens():
    model = kvmem.Model.from_hf_config(CPMANT)
    with pytest.raises(ValueError, match=r"max_cache_len \(60\) must be at least tokens \(51\) and the model's 32"):
        kvmem.engines.engine_estimate(model, engine="hf-static", tokens=51, max_cache_len=60)
    # max_cache_len 83 holds it: 83 x 1,572,864 B
    assert kvmem.engines.engine_estimate(model, engine="hf-static", tokens=51,
                                         max_cache_len=83).kv_bytes == 130_547_712


@pytest.mark.parametrize("engine", ["hf-dynamic", "hf-static", "hf-quantized"])
def test_nemotron_nas_refusal_is_transformers_own(engine):
    model = kvmem.Model.from_hf_config({"model_type": "nemotron-nas", "num_hidden_layers": 2,
                                        "num_attention_heads": 8, "hidden_size": 64,
                                        "block_configs": [{"attention": {"n_heads_in_group": 4}}] * 2})
    with pytest.raises(ValueError, match=r"transformers 5.24.0 has no model class for it: 'nemotron-nas' is in "
                                         r"neither models/auto/auto_mappings.py CONFIG_MAPPING_NAMES"):
        kvmem.engines.engine_estimate(model, engine=engine, tokens=16)


@pytest.mark.parametrize("model_type", ["nemotron-nas", "mimo", "minimax_m3", "minimax_m3_text"])
def test_every_no_class_family_is_in_no_auto_mapping_of_transformers(model_type):
    # the refusals' claim, checked against the installed transformers
    pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from kvmem.engines.hf import NO_CLASS
    assert model_type in NO_CLASS
    assert model_type not in CONFIG_MAPPING_NAMES and model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


@pytest.mark.parametrize("engine", ["hf-dynamic", "hf-static", "hf-quantized"])
def test_mimo_7b_has_no_transformers_class(engine):
    # XiaomiMiMo/MiMo-7B's MiMoForCausalLM is remote code only: transformers' modes refuse it with that reason
    model = kvmem.Model.from_hf_config("tests/fixtures/configs/new/mimo-7b-base.json")
    with pytest.raises(ValueError, match=r"'mimo' is in neither models/auto/auto_mappings.py CONFIG_MAPPING_NAMES"):
        kvmem.engines.engine_estimate(model, engine=engine, tokens=16)


def test_quantized_cache_sizes_an_opt_in_family_as_any_full_attention_model():
    # cache_utils.py QuantizedCache: one QuantizedLayer per layer whatever the family, when every layer type is
    # full_attention: GPTBigCode with multi_query (one K/V head of 2,048 / 16 = 128) holds what a Llama of the
    # same K/V shapes holds
    bigcode = kvmem.Model.from_hf_config({"model_type": "gpt_bigcode", "n_layer": 2, "n_head": 16, "n_embd": 2048,
                                          "multi_query": True, "torch_dtype": "bfloat16"})
    llama = kvmem.Model.from_hf_config({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 16,
                                        "num_key_value_heads": 1, "hidden_size": 2048, "torch_dtype": "bfloat16"})
    ours, theirs = (kvmem.engines.engine_estimate(m, engine="hf-quantized", tokens=300, prompt_tokens=256)
                    for m in (bigcode, llama))
    assert ours.total_bytes == theirs.total_bytes > 0


@pytest.mark.parametrize("name, layer_type", [("deepseek-v4-flash", "compressed_sparse_attention"),
                                              ("glm-5", "indexed_attention")])
def test_quantized_cache_refuses_other_layer_types_in_transformers_words(name, layer_type):
    with pytest.raises(EngineRefusal) as refused:
        kvmem.engines.engine_estimate(name, engine="hf-quantized", tokens=64)
    assert (refused.value.engine, refused.value.release) == ("hf-quantized", "transformers 5.24.0")
    assert refused.value.reason.startswith("`QuantizedCache` is only supported for models with only full attention "
                                           "layers. We found the following invalid layer types: {")
    assert layer_type in refused.value.reason and refused.value.way_out.startswith("hf-dynamic or hf-static")


def test_deepseek_ref_is_refused_by_every_transformers_mode():
    import json
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "new" / "sgl-deepseek-v4-flash-fp8.json"
    model = kvmem.Model.from_hf_config(json.loads(path.read_text()))
    for engine in ("hf-dynamic", "hf-static", "hf-quantized"):
        with pytest.raises(ValueError, match="transformers 5.24.0 cannot load this config: 'deepseek_ref'"):
            kvmem.engines.engine_estimate(model, engine=engine, tokens=64)
