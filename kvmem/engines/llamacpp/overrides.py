"""llama.cpp's tensor overrides (-ot PATTERN=DEVICE, --cpu-moe, --n-cpu-moe N) as create_tensor
applies them: the first pattern that regex_search-es a tensor's name wins
(src/llama-model-loader.cpp create_tensor, tensor_buft_overrides loop; common/arg.cpp builds the
--cpu-moe / --n-cpu-moe patterns). kvmem.engines.llamacpp.placement places tensors with them.
"""

from __future__ import annotations

import functools
import re

from ...regex_guard import slow_pattern

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


def check_pattern(pattern: str, option: str = "override_tensor") -> str:
    """``pattern`` itself, or ValueError naming it (and ``option``, the option that gave it) where slow_pattern
    refuses it."""
    if (slow := slow_pattern(pattern)) is not None:
        raise ValueError(f"{option} pattern {pattern[:100]!r} {slow}: its backtracking can take hours on a tensor "
                         "name, and kvmem does not search names with it; write it more simply")
    return pattern
