"""An engine option as its engine declares it, once, in the engine's own module: its name,
default, the values it accepts where they are a fixed set, and one line of help with the
engine's own flag or source. The defaults stay in the engine's option table (EngineSpec.options,
one default per name); EngineSpec.option_specs() gives every option typed, declared or not.
The app's widgets, their URL parameters, the CLI's option help and docs/engine_options.md
(options_markdown, REGENERATE) are derived from it, and kvmem.engines.with_defaults checks the names (issue 24 item 1).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Option", "options_markdown"]


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


REGENERATE = ("python -c \"import kvmem.engines as e; print(e.declared.options_markdown(e.ENGINES.values()), "
              "end='')\" > docs/engine_options.md")


def _cell(value) -> str:
    return str(value).replace("|", "\\|")


def options_markdown(specs) -> str:
    """docs/engine_options.md: per engine (kvmem.engines.base.EngineSpec), a table of its options as
    declared, then the options fit takes beside them (SizingRules.options)."""
    lines = ["# Engine options", "",
             "Generated from each engine's own declarations (`EngineSpec.option_specs()`, "
             "`SizingRules.options`); do not edit by hand: `" + REGENERATE + "`. Pass them as keyword "
             "arguments (`kvmem.estimate(..., name=value)`), "
             "`-o name=value` on the command line, or in the app's engine options.", ""]
    for spec in specs:
        lines += [f"## {spec.name}" + (f" ({spec.pinned})" if spec.pinned else ""), ""]
        options = spec.option_specs()
        if options:
            lines += ["| option | default | values | what it sets |", "|---|---|---|---|"]
            lines += [f"| `{o.name}` | {_cell('(engine default)' if o.default is None else o.default)} | "
                      f"{_cell(', '.join(map(str, o.choices)) or o.kind)} | {_cell(o.help)} |" for o in options]
        else:
            lines.append("No options.")
        sizing = spec.sizing.options if spec.sizing else {}
        if sizing:
            lines += ["", "Options fit takes beside them: " + ", ".join(f"`{name}`" for name in sizing) + "."]
        lines.append("")
    return "\n".join(lines)

