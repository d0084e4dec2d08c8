"""What a log check returns: one LineCheck per KV line kvmem can check, and the LogCheck."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..records import Record

GIB = 1 << 30


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

    @property
    def matches(self) -> bool:
        """True when at least one line was checked and every checked line matches."""
        return bool(self.checks) and all(c.matches for c in self.checks)

    def to_dict(self) -> dict:
        return {"engine": self.engine, "model": self.model, "settings": dict(self.settings),
                "checks": [c.to_dict() for c in self.checks], "notes": list(self.notes), "ignored": self.ignored,
                "matches": self.matches}


def strip_prefix(line: str, marker: str) -> str:
    """The line from ``marker`` on: timestamps, ranks and file:line prefixes dropped."""
    i = line.find(marker)
    return line[i:].rstrip() if i >= 0 else line.rstrip()
