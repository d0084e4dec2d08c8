"""What a log check returns: one LineCheck per KV line kvmem can check, and the LogCheck."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..records import Record
from ..sources.bounded import QUOTE_CHARS, quote

GIB = 1 << 30
MAX_DIGITS = 24               # the longest number kvmem reads from a log (real ones: at most 12 digits)
MAX_VALUE = 1 << 40           # the largest (tokens, blocks, cells, GiB): far past any real server's


@dataclass(frozen=True)
class LineCheck(Record):
    """One logged number against kvmem's: ``matches``, or the difference and its likely cause."""

    line: int            # 1-based line number in the log
    text: str            # the line as logged (without its timestamp prefix)
    quantity: str        # what was checked ("GPU KV cache size", "KV Cache is allocated", ...)
    logged: str
    kvmem: str
    matches: bool
    cause: str = ""      # the likely cause when it does not match


@dataclass(frozen=True)
class LogCheck:
    """A startup log read by kvmem: the settings it states and every KV line checked."""

    engine: str | None
    model: str
    settings: dict                       # what the log states (max_model_len, memory, #tokens, ...)
    checks: tuple[LineCheck, ...] = ()
    notes: tuple[str, ...] = ()
    ignored: int = field(default=0)      # lines kvmem does not read (never misread)
    # the settings the check ran under, each with where it came from: name -> (value, source), the
    # source "log line N" (the engine printed it), "given" (an argument, over the log's) or "default"
    inputs: dict = field(default_factory=dict)

    @property
    def matches(self) -> bool:
        """True when at least one line was checked and every checked line matches."""
        return bool(self.checks) and all(c.matches for c in self.checks)

    def to_dict(self) -> dict:
        return {"engine": self.engine, "model": self.model, "settings": dict(self.settings),
                "checks": [c.to_dict() for c in self.checks], "notes": list(self.notes), "ignored": self.ignored,
                "inputs": {name: {"value": _plain(value), "from": source} for name, (value, source) in
                           self.inputs.items()},
                "matches": self.matches}


def _plain(value):
    """A setting as JSON holds it: a list (llama.cpp's tensor overrides) as a list, a Model given by its name, any
    other object by its text."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(getattr(value, "name", value))


def strip_prefix(line: str, marker: str) -> str:
    """The line from ``marker`` on: timestamps, ranks and file:line prefixes dropped."""
    i = line.find(marker)
    return line[i:].rstrip() if i >= 0 else line.rstrip()


def logged_number(text: str, n: int, line: str, kind=int):
    """The number ``text`` that log line ``n`` (``line``) prints, as ``kind`` (int: thousands
    separators dropped; float): refused naming the line when it is not one, longer than
    MAX_DIGITS or past MAX_VALUE, so that nothing later meets a number no server prints."""
    digits = text.replace(",", "") if kind is int else text
    where = f"log line {n} ({quote(line.strip(), QUOTE_CHARS)})"
    if len(digits) > MAX_DIGITS:
        raise ValueError(f"{where}: a {len(digits):,}-character number; kvmem reads numbers of at most {MAX_DIGITS} "
                         "digits from a log")
    try:
        value = kind(digits)
    except ValueError:
        raise ValueError(f"{where}: {quote(text, 40)} is not {'a whole number' if kind is int else 'a number'}") \
            from None
    if not 0 <= value <= MAX_VALUE:
        raise ValueError(f"{where}: {quote(text, 40)} is past {MAX_VALUE:,}, the largest number kvmem reads from a log")
    return value
