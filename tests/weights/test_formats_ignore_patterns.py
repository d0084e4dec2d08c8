"""A quantization config's "re:" ignore entries come from outside (a config.json): a pattern whose backtracking can
blow up is refused by name before it is searched (kvmem.regex_guard), a plain one still matches."""

import time

import pytest

from kvmem.weights.formats import _ignored


def test_a_hostile_ignore_pattern_is_refused_at_once():
    hostile = "re:" + ".?" * 26 + "X"          # 2**26 ways to split a 40-character name: minutes in re.match
    start = time.process_time()
    with pytest.raises(ValueError, match="quantization_config ignore entry 're:.*backtracking"):
        _ignored([hostile], "model.layers.1.block_sparse_moe.experts.0.w2")
    assert time.process_time() - start < 1.0


def test_plain_ignore_entries_still_match():
    assert _ignored(["re:.*mlp\\.gate$"], "model.layers.3.mlp.gate")
    assert _ignored(["lm_head"], "lm_head") and not _ignored(["re:.*self_attn.*"], "model.layers.0.mlp.gate")
