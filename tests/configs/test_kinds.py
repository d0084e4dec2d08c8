"""kvmem.configs.kinds and .layouts: one table of layout rules (LAYOUTS), every kind a Kind member."""

import json

import pytest

import kvmem
from kvmem.configs.families import FAMILIES
from kvmem.configs.fields import Fields
from kvmem.configs.kinds import kinds_of
from kvmem.configs.layouts import LAYOUTS, layout_table
from kvmem.layer import KINDS, Kind

# layouts read by the generic rule (no entry of their own): their layer kinds come from other modules
# (kvmem.configs.layers: MLA, DeepSeek-V4's compressed layers, multi-query heads)
_GENERIC = {"dbrx", "deepseek_v4", "falcon", "mistral_large4", "mpt", "multi_query"}


def test_every_family_layout_has_a_rule_or_is_generic():
    layouts = {family.layout for family in FAMILIES.values()}
    assert layouts - set(LAYOUTS) == _GENERIC
    assert set(LAYOUTS) - layouts == set()          # no rule without a family that reads by it


def test_the_table_prints_one_line_per_layout():
    lines = layout_table().splitlines()
    assert [line.split()[0] for line in lines] == list(LAYOUTS)
    assert "configuration_bamba.py" in lines[list(LAYOUTS).index("bamba")]


@pytest.mark.parametrize("name", ["gemma-3-27b", "gemma-3n-e4b", "qwen3-next-80b-a3b", "llama-4-scout-17b-16e"])
def test_every_kind_read_is_a_kind_member(name):
    model = kvmem.get_model(name)
    cfg = model.config
    inner = cfg.get("text_config") or cfg
    family = FAMILIES[model.model_type]
    kinds = kinds_of(Fields(inner, model.model_type), family, model.num_layers)
    assert kinds and all(type(kind) is Kind for kind in kinds), kinds


def test_reader_only_kinds_are_members_but_not_layer_kinds():
    assert (Kind.HYBRID, Kind.HYBRID_SLIDING, Kind.SPARSE) == ("hybrid", "hybrid_sliding", "sparse")
    assert not {Kind.HYBRID, Kind.HYBRID_SLIDING, Kind.SPARSE} & set(KINDS)
    assert len(KINDS) == 8 and json.dumps(list(KINDS)) == \
        '["full", "sliding", "chunked", "mla", "linear", "shared", "none", "compressed"]'
    with pytest.raises(ValueError, match="layer kind must be one of"):
        kvmem.Layer("hybrid", kv_heads=1, head_dim_k=1, head_dim_v=1)


def test_the_qwen2_rule_without_a_window_is_generic():
    # windowed layouts (alternate, pattern, exaone_moe, qwen2) read the generic rule when sliding_window is null
    f = Fields({"num_hidden_layers": 4, "use_sliding_window": True, "max_window_layers": 2, "sliding_window": None},
               "qwen2")
    assert kinds_of(f, FAMILIES["qwen2"], 4) == ["full"] * 4
    f = Fields({"num_hidden_layers": 4, "use_sliding_window": True, "max_window_layers": 2, "sliding_window": 64},
               "qwen2")
    assert kinds_of(f, FAMILIES["qwen2"], 4) == ["full", "full", "sliding", "sliding"]


def test_hybrid_and_sparse_layouts_give_the_reader_kinds():
    assert kinds_of(Fields({}, "falcon_h1"), FAMILIES["falcon_h1"], 3) == [Kind.HYBRID] * 3
    f = Fields({"local_layer_ids": [0, 2]}, "inkling_text")
    assert kinds_of(f, FAMILIES["inkling_text"], 3) == [Kind.HYBRID_SLIDING, Kind.HYBRID, Kind.HYBRID_SLIDING]
    f = Fields({"sparse_attention_config": {"sparse_attention_freq": [0, 1]}}, "minimax_m3")
    assert kinds_of(f, FAMILIES["minimax_m3"], 2) == [Kind.FULL, Kind.SPARSE]
