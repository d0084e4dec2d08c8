"""kvmem.regex_guard: the quick reading of plain patterns (word characters, escaped dots, groups of alternatives) gives
slow_pattern's own answer, on seeded random plain patterns, deep and wide ones among them."""

from __future__ import annotations

import random
import re

import pytest

from kvmem import regex_guard
from kvmem.regex_guard import MAX_PATTERN_WAYS, slow_pattern

_PIECES = ("a", "b", "1", "2", "_", r"\.", "(", "|", ")", "(", "|", ")")


def _parsed_answer(pattern: str, monkeypatch) -> str | None:
    """slow_pattern read by re's parser alone (the quick reading turned off)."""
    with monkeypatch.context() as m:
        m.setattr(regex_guard, "_PLAIN", re.compile(r"(?!)"))
        return slow_pattern.__wrapped__(pattern)


def _wide(rng: random.Random) -> str:
    """blk\\.(n|n|...)\\.ffn_(...)_(ch|)exps with a random count of alternatives, about MAX_PATTERN_WAYS in all."""
    layers = "|".join(str(i) for i in rng.sample(range(200), rng.randint(1, 200)))
    kinds = "|".join(rng.sample(["up", "down", "gate_up", "gate", "norm", "gate_inp"], rng.randint(1, 6)))
    return rf"blk\.({layers})\.ffn_({kinds})_(ch|)exps"


def test_the_quick_reading_answers_as_the_parser(monkeypatch):
    rng = random.Random(34)
    patterns = ["".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 40))) for _ in range(1500)]
    patterns += [_wide(rng) for _ in range(300)]
    patterns += ["(" * k + "a" + ")" * k for k in (15, 16, 17, 40, 400)]
    patterns += ["(a|b)" * k for k in (9, 10, 11)]              # 512, 1,024 and 2,048 ways
    quick = 0
    for pattern in patterns:
        assert slow_pattern(pattern) == _parsed_answer(pattern, monkeypatch), pattern
        quick += bool(regex_guard._PLAIN.fullmatch(pattern)) and \
            regex_guard._branches_product(pattern) <= MAX_PATTERN_WAYS
    assert quick >= 300         # the quick reading answered these itself (374 with this seed)


@pytest.mark.parametrize("pattern, refused", [
    (r"blk\.(39|40|41|42|43)\.ffn_(up|down|gate_up|gate)_(ch|)exps", False),
    ("(" * 400 + "a" + ")" * 400, False),          # deeper than the quick reading goes: re's parser reads it
    ("(a|a)" * 11, True),                           # 2,048 ways that start alike
])
def test_plain_patterns(pattern, refused):
    assert (slow_pattern(pattern) is not None) == refused
