"""A guard on regular expressions that come from outside (llama.cpp -ot patterns from a pasted log, --llama-args
or the Python API; a quantization config's "re:" entries): Python's matcher backtracks (llama.cpp's std::regex
too), so a pattern whose ways of matching one name multiply is refused before it is searched. The check reads the
pattern once (re's own parser) and is strict: it refuses harmless patterns rather than let a slow one through.
"""

from __future__ import annotations

import functools
import re
from re import _constants as _sre  # type: ignore[attr-defined]  # re's own parser reads the patterns
from re import _parser as _sre_parse  # type: ignore[attr-defined]

__all__ = ["MAX_PATTERN_REPEATS", "MAX_PATTERN_WAYS", "slow_pattern"]

MAX_PATTERN_REPEATS = 4          # variable repeats (?, *, +, {m,n}) in one pattern: the published -ot have 1 to 3
MAX_PATTERN_WAYS = 1_000         # alternatives that can start alike, multiplied (kvmem's --n-cpu-moe 999 rule: 444)
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT)
_ONE_CHAR = (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN)
_DIGITS = frozenset(range(48, 58))


@functools.lru_cache(maxsize=4096)
def slow_pattern(pattern: str) -> str | None:
    """Why searching a tensor name with ``pattern`` could backtrack for minutes or more, or None:
    - a group repeated more than once ("*", "+", "{m,n}", "{m}") that holds a variable repeat or an alternation:
      "(.*a)*b", "(a|a)*", "(a?){30}", "(.*){20}" take 2**n or n**k steps on an n-character name;
    - two variable repeats with nothing between them that must match a character, whose characters overlap:
      ".*.*", ".?.?", "\\d+\\d*" (each split of the text between them is tried);
    - more than MAX_PATTERN_REPEATS variable repeats ("a?" 26 times: 2**26 ways), or alternatives that can
      start with the same character, multiplied along the pattern, over MAX_PATTERN_WAYS ("(a|a)" 10 times).
    A pattern re cannot parse: None (re.compile's error says why)."""
    if _PLAIN.fullmatch(pattern) and _branches_product(pattern) <= MAX_PATTERN_WAYS:
        return None     # no repeat, and at most that many ways: the checks below find nothing (_branches_product)
    try:
        tree = _sre_parse.parse(pattern)
    except re.error:
        return None
    except RecursionError:
        return "nests its groups too deeply"
    found = {"repeats": 0, "ways": 1}
    try:
        why = _slow_seq(list(tree), bool(tree.state.flags & re.IGNORECASE), found)
    except RecursionError:
        return "nests its groups too deeply"
    if why is None and found["repeats"] > MAX_PATTERN_REPEATS:
        why = (f"has {found['repeats']} variable repeats (?, *, +, {{m,n}}), more than the {MAX_PATTERN_REPEATS} "
               "kvmem searches names with")
    if why is None and found["ways"] > MAX_PATTERN_WAYS:
        why = (f"has more than {MAX_PATTERN_WAYS:,} ways through its alternatives (|) that can start alike, the "
               "most kvmem searches names with")
    return why


# a pattern of word characters, escaped dots and groups of alternatives (kvmem's own -ot rules: blk\.(39|40|41)\.ffn_
# (up|down|gate_up|gate)_(ch|)exps, a tensor's re.escape-d name): read without re's parser (1.5 ms for fit.cpp's rules)
_PLAIN = re.compile(r"(?:[A-Za-z0-9_]|\\\.|[()|])*")
_PLAIN_DEPTH = 16


def _branches_product(pattern: str) -> int:
    """For a _PLAIN pattern: the alternatives of each group and of the whole, multiplied, at least the ways
    slow_pattern counts (each | multiplies them by at most its branches), which with no repeat are all it can refuse;
    MAX_PATTERN_WAYS + 1 where the groups do not balance (re's error then) or nest deeper than _PLAIN_DEPTH (re's
    parser recurses: slow_pattern's own answer)."""
    open_groups, product = [1], 1
    for ch in pattern:
        if ch == "(":
            if len(open_groups) > _PLAIN_DEPTH:
                return MAX_PATTERN_WAYS + 1
            open_groups.append(1)
        elif ch == "|":
            open_groups[-1] += 1
        elif ch == ")":
            if len(open_groups) == 1:
                return MAX_PATTERN_WAYS + 1
            product *= open_groups.pop()
    if len(open_groups) != 1:
        return MAX_PATTERN_WAYS + 1
    return product * open_groups[0]


def _flat(items: list) -> list:
    """A sequence with its unrepeated groups opened (their items stand side by side with the rest)."""
    out = []
    for op, av in items:
        if op == _sre.SUBPATTERN and not av[1] & re.IGNORECASE:
            out += _flat(list(av[3]))
        elif op == _sre.ATOMIC_GROUP:
            out += _flat(list(av))
        else:
            out.append((op, av))
    return out


def _slow_seq(items: list, icase: bool, found: dict) -> str | None:
    """slow_pattern's checks on one sequence (and, recursively, on what it holds); counts into ``found``."""
    open_sets: list = []                  # the characters of the variable repeats not yet closed off by a character
    for op, av in _flat(items):
        parts, inner_icase = _parts(op, av), icase or (op == _sre.SUBPATTERN and bool(av[1] & re.IGNORECASE))
        if op in _REPEATS and av[1] > 1 and _has_choice(av[2]):
            return "repeats a group that holds a repeat or an alternation"
        if op in (_sre.BRANCH, _sre.GROUPREF_EXISTS):
            found["ways"] = min(found["ways"] * _ways(parts, icase), MAX_PATTERN_WAYS + 1)
        for part in parts:
            if (why := _slow_seq(list(part), inner_icase, found)) is not None:
                return why
        variable = op in _REPEATS and av[0] != av[1]
        found["repeats"] += variable
        holds = variable or _has_choice([(op, av)], repeats_only=True)    # a repeat, or a group holding one
        chars = _chars([(op, av)], inner_icase) if holds else None
        if holds and any(_overlap(chars, seen) for seen in open_sets):
            return "has two repeats side by side that can match the same characters"
        if _min_width([(op, av)]) > 0:    # it must match a character: what comes before is closed off
            open_sets = [chars] if holds else []
        elif holds:
            open_sets.append(chars)
    return None


def _parts(op, av) -> list:
    """The sequences a compound item holds (a repeat's body, a group's, the branches of a |), else []."""
    if op in _REPEATS:
        return [av[2]]
    return {_sre.SUBPATTERN: lambda: [av[3]], _sre.ASSERT: lambda: [av[1]], _sre.ASSERT_NOT: lambda: [av[1]],
            _sre.ATOMIC_GROUP: lambda: [av], _sre.BRANCH: lambda: av[1],
            _sre.GROUPREF_EXISTS: lambda: [av[1], av[2] or []]}.get(op, list)()


def _ways(branches, icase: bool) -> int:
    """How many of ``branches`` the matcher may try at one character: the most that can start with it (a
    branch that can match nothing counts for every character)."""
    anything = 0
    per_char: dict[int, int] = {}
    for branch in branches:
        first = _first_chars(branch, icase)
        if first is None:
            anything += 1
        for c in first or ():
            per_char[c] = per_char.get(c, 0) + 1
    return anything + max(per_char.values(), default=0)


def _first_chars(items, icase: bool):
    """The characters ``items``' match can start with (a superset), or None for any (or none: it can be empty)."""
    out = set()
    for op, av in items:
        if op in (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT):
            continue
        if (chars := _chars([(op, av)], icase)) is None:
            return None
        out |= chars
        if _min_width([(op, av)]) > 0:
            return frozenset(out)
    return None


def _has_choice(items, repeats_only: bool = False) -> bool:
    """Whether ``items`` hold a variable repeat (or, unless ``repeats_only``, an alternation) at any depth."""
    for op, av in items:
        if (op in _REPEATS and av[0] != av[1]) or (not repeats_only and op in (_sre.BRANCH, _sre.GROUPREF_EXISTS)):
            return True
        if any(_has_choice(part, repeats_only) for part in _parts(op, av)):
            return True
    return False


def _chars(items, icase: bool):
    """The characters ``items`` can match, as a frozenset of code points, or None for any character."""
    out = set()
    for op, av in items:
        if op == _sre.LITERAL:
            chars = {av}
        elif op == _sre.IN:
            chars = _class_chars(av)
        elif op in (_sre.NOT_LITERAL, _sre.ANY, _sre.GROUPREF, _sre.GROUPREF_IGNORE):
            chars = None
        else:
            chars = set()
            for part in _parts(op, av):
                inner = _chars(part, icase)
                chars = None if inner is None or chars is None else chars | inner
        if chars is None:
            return None
        out |= chars
    if icase:
        out |= {ord(chr(c).lower()) for c in out} | {ord(chr(c).upper()) for c in out}
    return frozenset(out)


def _class_chars(items):
    """The characters a [...] class matches, or None for many (a negated class, a category other than \\d)."""
    out = set()
    for kind, value in items:
        if kind == _sre.NEGATE or (kind == _sre.CATEGORY and value != _sre.CATEGORY_DIGIT):
            return None
        if kind == _sre.CATEGORY:
            out |= _DIGITS                # \\d: the ASCII digits here (no other digit meets an ASCII one)
        elif kind == _sre.LITERAL:
            out.add(value)
        elif kind == _sre.RANGE:
            if value[1] - value[0] > 256:
                return None
            out |= set(range(value[0], value[1] + 1))
    return out


def _overlap(a, b) -> bool:
    return a is None or b is None or bool(a & b)


def _min_width(items) -> int:
    """The fewest characters ``items`` match."""
    width = 0
    for op, av in items:
        if op in _ONE_CHAR:
            width += 1
        elif op in _REPEATS:
            width += av[0] * _min_width(av[2])
        elif op == _sre.SUBPATTERN:
            width += _min_width(av[3])
        elif op == _sre.ATOMIC_GROUP:
            width += _min_width(av)
        elif op == _sre.BRANCH:
            width += min(_min_width(b) for b in av[1])
    return width
