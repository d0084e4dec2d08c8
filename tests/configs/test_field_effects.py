"""The judge of unread fields (kvmem.oracles.field_effects): transformers builds the model with the
field changed and the cache bytes decide. A fixed sample runs here (seconds); the full sweep is
tools/field_effects.py, its output kept in tests/configs/field_effects_sweep.json and
docs/research/new_families_c.md."""

import json
from pathlib import Path

import pytest

from kvmem.configs import FAMILIES
from kvmem.configs.wrappers import TEXT_MODEL_TYPES

SWEEP = json.loads((Path(__file__).parent / "field_effects_sweep.json").read_text())


def _family(model_type):
    return FAMILIES[TEXT_MODEL_TYPES.get(model_type, model_type)]


def test_every_ignored_field_was_judged_without_effect():
    # each (family, field) kvmem lets pass that the sweep ran changed no byte; two rest on the modeling code
    # instead: gpt_neo's nested attention_types has no value to try (modeling_gpt_neo.py caches every layer
    # whole), and transformers cannot build step3p7's default config (its sliding_window is unset;
    # num_sliding_attention_heads are query heads in modeling_step3p7.py and vLLM's step3p5.py)
    by_code = {("gpt_neo", "attention_types"), ("step3p7", "num_sliding_attention_heads")}
    judged = {(row["model_type"], row["field"]): row["outcome"] for row in SWEEP["pairs"]}
    for (model_type, field), outcome in judged.items():
        if field in _family(model_type).ignored_fields:
            assert outcome == "no-effect" or (model_type, field) in by_code, (model_type, field, outcome)
    assert judged["gemma2", "sliding_window_size"] == judged["minimax_m2", "attn_type_list"] == "no-effect"
    assert judged["nemotron_h", "time_step_rank"] == judged["gemma", "use_bidirectional_attention"] == "no-effect"


def test_every_judged_ignore_comes_from_a_no_effect_row():
    from kvmem.configs.judged import JUDGED
    no_effect = {(TEXT_MODEL_TYPES.get(row["model_type"], row["model_type"]), row["field"])
                 for row in SWEEP["pairs"] if row["outcome"] == "no-effect"}
    assert sum(map(len, JUDGED.values())) == 33
    for family, fields in JUDGED.items():
        for field in fields:
            assert (family, field) in no_effect, (family, field)


def test_every_field_that_changes_the_bytes_stays_refused():
    from kvmem.configs.reads import reads
    for row in SWEEP["pairs"]:
        if row["outcome"] == "changes":
            assert row["field"] not in reads(_family(row["model_type"])), row


@pytest.mark.parametrize("model_type, field, outcome", [
    ("gemma2", "sliding_window_size", "no-effect"),          # a legacy duplicate: the cache reads sliding_window
    ("gemma3", "use_bidirectional_attention", "changes"),    # Gemma3TextConfig halves the window for it
])
def test_the_judge_on_a_fixed_sample(model_type, field, outcome):
    pytest.importorskip("torch")
    from kvmem.oracles.field_effects import run_pairs
    (result,) = run_pairs([(model_type, field)])
    assert result.outcome == outcome, result.line()
    assert result.base and all(isinstance(bytes_, tuple) for _, bytes_ in result.tried)
