"""What an oracle run found: each compared quantity, kvmem's value beside the engine's.

Plain frozen data; ``OracleReport.lines()`` is what ``kvmem validate --engine`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Check", "OracleReport"]


@dataclass(frozen=True)
class Check:
    """One quantity of one case: kvmem's value and the engine's own (bytes, tokens, text)."""

    case: str
    quantity: str
    kvmem: object
    engine: object

    @property
    def matches(self) -> bool:
        return self.kvmem == self.engine

    def to_dict(self) -> dict:
        return {"case": self.case, "quantity": self.quantity, "kvmem": self.kvmem,
                "engine": self.engine, "matches": self.matches}


@dataclass(frozen=True)
class OracleReport:
    """Every check of one run against one installed engine."""

    engine: str
    version: str
    seed: int
    directed_cases: int
    random_cases: int
    checks: tuple[Check, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def mismatches(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if not check.matches)

    @property
    def passed(self) -> bool:
        return not self.mismatches

    def to_dict(self) -> dict:
        return {"engine": self.engine, "version": self.version, "seed": self.seed,
                "directed_cases": self.directed_cases, "random_cases": self.random_cases,
                "checks": len(self.checks), "mismatches": [c.to_dict() for c in self.mismatches],
                "passed": self.passed, "notes": list(self.notes)}

    def lines(self) -> list[str]:
        cases = {check.case for check in self.checks}
        out = [f"kvmem against {self.engine} {self.version} (its own code, on this machine): "
               f"{self.directed_cases} directed + {self.random_cases} random cases (seed {self.seed}), "
               f"{len(self.checks)} checks over {len(cases)} cases, {len(self.mismatches)} mismatches"]
        for check in self.mismatches:
            out.append(f"MISMATCH {check.case}: {check.quantity}: kvmem {check.kvmem!r}, "
                       f"{self.engine} {check.engine!r}")
        out.extend(f"note: {note}" for note in self.notes)
        return out
