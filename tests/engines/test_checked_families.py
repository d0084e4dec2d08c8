"""Opt-in families (kvmem.configs.families, Family.opt_in) are sized only by the engine modes that
declare them (EngineSpec.families): the engines name them, kvmem.configs names no engine."""

import pytest

from kvmem.configs.families import FAMILIES
from kvmem.engines import COMPRESSED_ENGINES, ENGINES, FamilyNotChecked, check_family
from kvmem.engines.base import CheckedFamilies, EngineSpec
from kvmem.errors import EngineRefusal

OPT_IN = {t for t, family in FAMILIES.items() if family.opt_in}


class _Typed:
    def __init__(self, model_type):
        self.model_type, self.layers = model_type, []


def test_every_declared_name_is_an_opt_in_family_and_every_opt_in_family_has_an_engine():
    for name, spec in ENGINES.items():
        assert spec.families.names <= OPT_IN, name
    assert [t for t in OPT_IN if not any(spec.families.sizes(t) for spec in ENGINES.values())] == []


def test_a_family_read_before_the_opt_in_rule_is_sized_by_every_mode():
    for spec in ENGINES.values():
        check_family(spec, _Typed("llama"))


def test_an_engine_without_a_declaration_refuses_every_opt_in_family_naming_the_modes_that_size_it():
    ENGINES["toy-families"] = EngineSpec("toy-families", {}, lambda *a, **k: None, pinned="Toy 1.2")
    try:
        with pytest.raises(FamilyNotChecked, match=r"engine 'toy-families' \(Toy 1.2\): kvmem does not size model_type "
                                                   r"'gpt_neo' the way this engine does yet: kvmem has not checked "
                                                   r"this family's cache against Toy 1.2's code \(a gap in kvmem, not "
                                                   r"a refusal of the engine's\); engines that size it: ideal, "
                                                   r"hf-dynamic, hf-static, hf-quantized$") as refused:
            check_family(ENGINES["toy-families"], _Typed("gpt_neo"))
        assert (refused.value.engine, refused.value.model_type) == ("toy-families", "gpt_neo")
        assert refused.value.sizing == ("ideal", "hf-dynamic", "hf-static", "hf-quantized")
        ENGINES["toy-families"] = EngineSpec("toy-families", {}, lambda *a, **k: None,
                                             families=CheckedFamilies(frozenset({"gpt_neo"})))
        check_family(ENGINES["toy-families"], _Typed("gpt_neo"))
    finally:
        del ENGINES["toy-families"]


def test_the_engines_own_reason_is_a_plain_refusal_not_a_gap():
    why = "Toy 1.2's registry has no GPTNeoForCausalLM"
    ENGINES["toy-families"] = EngineSpec("toy-families", {}, lambda *a, **k: None, pinned="Toy 1.2",
                                         refusals={"gpt_neo": why})
    try:
        with pytest.raises(EngineRefusal) as refused:
            check_family(ENGINES["toy-families"], _Typed("gpt_neo"))
        assert not isinstance(refused.value, FamilyNotChecked) and isinstance(refused.value, ValueError)
        fields = (refused.value.engine, refused.value.release, refused.value.reason, refused.value.way_out)
        assert fields == ("toy-families", "Toy 1.2", why,
                          "engines that size it: ideal, hf-dynamic, hf-static, hf-quantized")
        assert str(refused.value) == (f"engine 'toy-families' (Toy 1.2) does not size model_type 'gpt_neo': {why}; "
                                      "engines that size it: ideal, hf-dynamic, hf-static, hf-quantized")
    finally:
        del ENGINES["toy-families"]


def test_an_engines_refusal_of_a_base_family_is_honoured_too():
    # a family read before the opt-in rule (llama) is sized by every mode, unless the engine's module refuses it
    why = "Toy 1.2's registry has no LlamaForCausalLM"
    ENGINES["toy-families"] = EngineSpec("toy-families", {}, lambda *a, **k: None, pinned="Toy 1.2",
                                         refusals={"llama": why}, families=CheckedFamilies(frozenset(), all_but=True))
    try:
        with pytest.raises(EngineRefusal) as refused:
            check_family(ENGINES["toy-families"], _Typed("llama"))
        assert not isinstance(refused.value, FamilyNotChecked)
        others = ", ".join(name for name in ENGINES if name != "toy-families")
        assert (refused.value.reason, refused.value.way_out) == (why, f"engines that size it: {others}")
        assert str(refused.value) == (f"engine 'toy-families' (Toy 1.2) does not size model_type 'llama': {why}; "
                                      f"engines that size it: {others}")
        check_family(ENGINES["toy-families"], _Typed("qwen2"))   # the others still sized
    finally:
        del ENGINES["toy-families"]
    # the real case: SGLang 0.5.23 has no Jamba model (kvmem/engines/sglang/families.py)
    with pytest.raises(EngineRefusal) as refused:
        check_family(ENGINES["sglang"], _Typed("jamba"))
    assert (refused.value.engine, refused.value.release) == ("sglang", "SGLang 0.5.23")
    assert refused.value.reason.startswith("SGLang 0.5.23 has no model file for JambaForCausalLM")
    assert refused.value.way_out == "engines that size it: ideal, hf-dynamic, hf-static, hf-quantized, vllm, " \
                                    "llama.cpp"      # trtllm's registry has no JambaForCausalLM either


def test_compressed_layers_without_a_rule_are_a_gap_naming_the_modes_with_one():
    model = _Typed("deepseek_v4")
    model.layers = [type("Layer", (), {"kind": "compressed"})()]
    ENGINES["toy-families"] = EngineSpec("toy-families", {}, lambda *a, **k: None,
                                         families=CheckedFamilies(frozenset(), all_but=True))
    try:
        with pytest.raises(FamilyNotChecked, match=r"engine 'toy-families' does not size compressed layers .* yet: "
                                                   r"kvmem has no rule for the toy-families engine's compressed rows "
                                                   r".*engines that size them: ideal, hf-dynamic") as refused:
            check_family(ENGINES["toy-families"], model)
        assert str(refused.value).endswith("engines that size them: " + ", ".join(COMPRESSED_ENGINES))
    finally:
        del ENGINES["toy-families"]


def test_all_but_declarations():
    assert CheckedFamilies(frozenset({"gpt_neo"}), all_but=True).sizes("mpt")
    assert not CheckedFamilies(frozenset({"gpt_neo"}), all_but=True).sizes("gpt_neo")
    assert not CheckedFamilies().sizes("mpt")
