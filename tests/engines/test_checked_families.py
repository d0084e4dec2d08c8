"""Opt-in families (kvmem.configs.families, Family.opt_in) are sized only by the engine modes that
declare them (EngineSpec.families): the engines name them, kvmem.configs names no engine."""

import pytest

from kvmem.configs.families import FAMILIES
from kvmem.engines import ENGINES, check_family
from kvmem.engines.base import CheckedFamilies, EngineSpec

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
    ENGINES["toy-families"] = EngineSpec("toy-families", {}, lambda *a, **k: None)
    try:
        with pytest.raises(ValueError, match=r"engine 'toy-families': kvmem does not size model_type 'gpt_neo' .*"
                                             r"engines that size it: hf-dynamic, hf-static$"):
            check_family(ENGINES["toy-families"], _Typed("gpt_neo"))
        ENGINES["toy-families"] = EngineSpec("toy-families", {}, lambda *a, **k: None,
                                             families=CheckedFamilies(frozenset({"gpt_neo"})))
        check_family(ENGINES["toy-families"], _Typed("gpt_neo"))
    finally:
        del ENGINES["toy-families"]


def test_all_but_declarations():
    assert CheckedFamilies(frozenset({"gpt_neo"}), all_but=True).sizes("mpt")
    assert not CheckedFamilies(frozenset({"gpt_neo"}), all_but=True).sizes("gpt_neo")
    assert not CheckedFamilies().sizes("mpt")
