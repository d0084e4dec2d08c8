"""llama.cpp's tensor overrides (-ot PATTERN=DEVICE, --cpu-moe, --n-cpu-moe N) as create_tensor
applies them: the first pattern that regex_search-es a tensor's name wins
(src/llama-model-loader.cpp create_tensor, tensor_buft_overrides loop; common/arg.cpp builds the
--cpu-moe / --n-cpu-moe patterns). kvmem.engines.llamacpp.placement places tensors with them.
"""

from __future__ import annotations

import functools
import re
from re import _constants as _sre  # re's own parser reads -ot patterns (slow_pattern)
from re import _parser as _sre_parse

__all__ = ["CPU", "EXPS_REGEX", "Rules", "check_pattern", "compile_rules", "layer_rest", "override_rules",
           "slow_pattern"]

CPU = "CPU"
# common/arg.cpp LLM_FFN_EXPS_REGEX (--cpu-moe), and per layer for --n-cpu-moe
EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_LAYER = re.compile(r"^blk\.(\d+)\.")


def override_rules(n_cpu_moe: int, cpu_moe: bool, override_tensor) -> Rules:
    """The rules -ot, --cpu-moe and --n-cpu-moe make, in create_tensor's order."""
    return _rules(n_cpu_moe, cpu_moe, tuple(tuple(rule) for rule in override_tensor or ()))


@functools.lru_cache(maxsize=256)
def _rules(n_cpu_moe: int, cpu_moe: bool, override_tensor: tuple) -> Rules:
    return Rules(compile_rules(n_cpu_moe, cpu_moe, override_tensor))


# a pattern's leading blk\.N\. or blk\.(N|M|...)\.
_RULE_LAYERS = re.compile(r"blk\\\.(?:(\d+)|\((?:\?:)?((?:\d+\|)*\d+)\))\\\.")


def _top_level_or(pattern: str) -> bool:
    """Whether ``pattern`` has a | outside parentheses (then a blk prefix binds only its first branch)."""
    depth, escaped = 0, False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "|" and depth == 0:
            return True
    return False


class Rules:
    r"""The override rules, asked per tensor name for the first that matches (create_tensor's loop). A
    rule whose pattern starts with blk\.N\. (or blk\.(N|M|...)\.) can match only names of those layers
    (a name holds one blk.L. at its start), so it is tried only for them; order is kept. Where every rule
    tried on blk.L.REST starts so and the rest of its pattern (its "tail") looks at REST alone (no anchor,
    lookbehind, word boundary, backreference or inline flag), the first match is decided by the tails
    matched at REST's start: cached by value (_first_tail), the same for every layer that tries the same
    rules, so a placement search's new -ot pattern costs a few regex matches, not one per tensor."""

    def __init__(self, rules):
        self.rules, self.layers, self.tails, self.per_layer, self.seen = rules, [], [], {}, {}
        self.by_order: dict = {}        # the rules tried (indices) -> _order's answer: most layers try the same
        for pattern, _ in rules:
            text = pattern.pattern
            m = _RULE_LAYERS.match(text)
            if m is None or text[m.end():m.end() + 1] in ("*", "?", "+", "{") or _top_level_or(text):
                self.layers.append(None)        # anything else is tried on every name
                self.tails.append(None)
            else:
                numbers = (m.group(1) or m.group(2)).split("|")
                self.layers.append({int(x) for x in numbers})
                tail = text[m.end():]
                plain = all(x == str(int(x)) for x in numbers) and not _NOT_PLAIN_TAIL.search(tail)
                self.tails.append(tail if plain else None)
        # the rules tried on every name, and per layer those tried on its names alone
        self.general = tuple(i for i, layers in enumerate(self.layers) if layers is None)
        self.specific: dict = {}
        for i, layers in enumerate(self.layers):
            for layer in layers or ():
                self.specific.setdefault(layer, []).append(i)

    def target(self, name: str):
        try:
            return self.seen[name]
        except KeyError:
            self.seen[name] = found = self._first(name)
            return found

    def layer_targets(self, layer: int, names: tuple, rests: tuple) -> tuple:
        """The target of each of ``names``, names of ``layer`` whose RESTs are ``rests`` (layer_rest's): decided
        together by the tails where they decide, the same for every layer that tries the same rules."""
        _, tails, targets = self._order(layer)
        if tails is None or None in rests:
            return tuple(self.target(name) for name in names)
        return _tail_targets(tails, targets, rests)

    def _order(self, layer) -> tuple:
        """(the rules tried on names of ``layer``, their tails where every one has a tail, else None, their
        targets)."""
        found = self.per_layer.get(layer)
        if found is None:
            only = self.specific.get(layer)
            order = tuple(sorted(self.general + tuple(only))) if only else self.general
            found = self.by_order.get((order, layer is None))
            if found is None:
                tails = tuple(self.tails[i] for i in order)
                found = self.by_order[order, layer is None] = (
                    order, None if layer is None or None in tails else tails, tuple(self.rules[i][1] for i in order))
            self.per_layer[layer] = found
        return found

    def _first(self, name: str):
        layer, rest = layer_rest(name)
        order, tails, _ = self._order(layer)
        if tails is not None and rest is not None:
            hit = _first_tail(tails, rest)
            return None if hit is None else self.rules[order[hit]][1]
        for i in order:
            pattern, target = self.rules[i]
            if pattern.search(name):
                return target
        return None


@functools.lru_cache(maxsize=1024)
def _tail_targets(tails: tuple, targets: tuple, rests: tuple) -> tuple:
    """Per REST, the target of the first tail that matches it (None: no rule)."""
    hits = (_first_tail(tails, rest) for rest in rests)
    return tuple(None if hit is None else targets[hit] for hit in hits)


@functools.lru_cache(maxsize=8192)
def layer_rest(name: str) -> tuple:
    """(L, REST) of blk.L.REST (REST None where L is not written as str(L) or REST holds another blk.),
    (None, None) for other names."""
    m = _LAYER.match(name)
    if m is None:
        return None, None
    layer, rest = int(m.group(1)), name[m.end():]
    return layer, rest if m.group(1) == str(layer) and "blk." not in rest else None


# a tail that may look past REST's start, or whose meaning changes once the blk prefix is cut off
_NOT_PLAIN_TAIL = re.compile(r"\^|\\[AbBZ1-9]|\(\?(?!:)")


@functools.lru_cache(maxsize=4096)
def _first_tail(tails: tuple, rest: str) -> int | None:
    r"""The index of the first tail that re.match-es ``rest`` (what blk\.N\.TAIL searched in blk.N.REST
    finds, for a name with one blk.N. at its start), or None."""
    for i, tail in enumerate(tails):
        if re.match(tail, rest):
            return i
    return None


@functools.lru_cache(maxsize=256)
def compile_rules(n_cpu_moe: int, cpu_moe: bool, override_tensor: tuple) -> list[tuple[re.Pattern, str]]:
    """The override rules in order; --n-cpu-moe N's N rules (blk.il + the experts' pattern, each to CPU)
    as one alternation, which matches exactly the names one of them matches (a dot follows the layer)."""
    rules = [(re.compile(check_pattern(pattern)), target) for pattern, target in override_tensor]
    if cpu_moe:
        rules.append((re.compile(EXPS_REGEX), CPU))
    if n_cpu_moe:
        layers = "|".join(str(il) for il in range(n_cpu_moe))
        rules.append((re.compile(rf"blk\.(?:{layers}){EXPS_REGEX}"), CPU))
    return rules


# A user's -ot pattern is searched in every tensor name by Python's backtracking matcher (llama.cpp's std::regex
# backtracks too), and an -ot comes from outside (a pasted log, --llama-args, the Python API): a pattern whose
# ways of matching one name multiply is refused before it is searched. The check reads the pattern once
# (re's own parser) and is strict: it refuses harmless patterns rather than let a slow one through.
MAX_PATTERN_REPEATS = 4          # variable repeats (?, *, +, {m,n}) in one pattern: the published -ot have 1 to 3
MAX_PATTERN_WAYS = 1_000         # alternatives that can start alike, multiplied (kvmem's --n-cpu-moe 999 rule: 444)
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT)
_ONE_CHAR = (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN)
_DIGITS = frozenset(range(48, 58))


def check_pattern(pattern: str) -> str:
    """``pattern`` itself, or ValueError naming it where slow_pattern refuses it."""
    if (slow := slow_pattern(pattern)) is not None:
        raise ValueError(f"override_tensor pattern {pattern!r} {slow}: its backtracking can take hours on a tensor "
                         "name, and kvmem does not search names with it; write it more simply")
    return pattern


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
    open_sets = []                        # the characters of the variable repeats not yet closed off by a character
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
    anything, per_char = 0, {}
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
