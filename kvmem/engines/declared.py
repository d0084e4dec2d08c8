"""An engine option as its engine declares it, once, in the engine's own module: its name,
default, the values it accepts where they are a fixed set, and one line of help with the
engine's own flag or source. The defaults stay in the engine's option table (EngineSpec.options,
one default per name); EngineSpec.option_specs() gives every option typed, declared or not.
The app's widgets, their URL parameters and the CLI's option help are derived from it, and
kvmem.engines.with_defaults checks the names (issue 24 item 1).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Option"]


@dataclass(frozen=True)
class Option:
    """One engine option: ``kind`` says what its value is (choice, model, bool, int, float, text)."""

    name: str
    default: object = None
    choices: tuple = ()       # the values the engine accepts, where they are a fixed set
    help: str = ""            # one line: what it sets, with the engine's flag or source
    model: bool = False       # the value names a model (a preset or an HF id) and is read as one

    @property
    def kind(self) -> str:
        if self.model:
            return "model"
        if self.choices:
            return "choice"
        for kind, types in (("bool", bool), ("int", int), ("float", float)):
            if isinstance(self.default, types):
                return kind
        return "text"

    def describe(self) -> str:
        """``name=default`` and, where declared, the choices and the help: one line of CLI help."""
        text = f"{self.name}={'(engine default)' if self.default is None else self.default}"
        if self.choices:
            text += f" ({'|'.join(map(str, self.choices))})"
        return text + (f": {self.help}" if self.help else "")
