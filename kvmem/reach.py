"""How far kvmem reaches over a folder of real configs: for every config.json under it (or an HF
cache snapshot's), what the reader made of it, and for every engine mode whether that mode sizes
it, the engine itself does not run it (its reason), or kvmem does not size it yet (a gap in kvmem:
kvmem.engines.FamilyNotChecked, or the reader's refusal). And which engine modes size which
families, from the engines' declarations (EngineSpec.families, EngineSpec.refusals).

``kvmem validate --reach DIR`` prints ``reach(DIR)``; docs/families.md is ``families_markdown()``.

The walk is bounded: at most MAX_FILES configs and MAX_ENTRIES folder entries looked at,
MAX_DEPTH folders down; a symlinked folder is not entered, and a linked file is read only where
it resolves inside DIR (or in an HF cache's blobs beside the snapshot; kvmem.sources.bounded
.confined). Each file is read as ``kvmem estimate FILE`` reads it (kvmem.configs.load_config: a
regular file of at most 4 MiB, UTF-8, nesting bounded). Standard library only.
"""

from __future__ import annotations

import fnmatch
import os
import pathlib
from collections import Counter
from dataclasses import dataclass, field

from .configs import load_config
from .sources import SourceError
from .sources.bounded import confined, quote

__all__ = ["SIZED", "REFUSED", "NOT_YET", "TOKENS", "MAX_FILES", "MAX_ENTRIES", "MAX_DEPTH", "ReachEntry",
           "ReachReport", "find_configs", "reach_config", "reach", "family_reach", "families_markdown"]

SIZED, REFUSED, NOT_YET = "sized", "refused", "not yet"
MAX_FILES = 5_000          # configs one run reads (an HF cache of 5,000 models is past any real one)
MAX_ENTRIES = 200_000      # folder entries one walk looks at
MAX_DEPTH = 8              # folders below DIR (~/.cache/huggingface/hub/models--o--n/snapshots/REV/config.json: 4)
TOKENS = 32_768            # the context each engine mode sizes


@dataclass(frozen=True)
class ReachEntry:
    """One config: where it is, what the reader made of it (``model_type`` and ``layers`` by kind, or
    its ``refusal``), and per engine mode {"status": sized | refused | not yet, ...}: sized carries
    ``total_bytes`` for one sequence of ``tokens`` tokens (KV and state) and ``start_refusal`` (why the
    engine itself would not start at that context, e.g. past max_position_embeddings, or None); the
    others ``reason``."""

    path: str
    model: str | None
    model_type: str | None
    layers: dict = field(default_factory=dict)
    refusal: str | None = None
    engines: dict = field(default_factory=dict)
    tokens: int = TOKENS

    def to_dict(self) -> dict:
        return {"path": self.path, "model": self.model, "model_type": self.model_type, "layers": dict(self.layers),
                "reader_refusal": self.refusal, "tokens": self.tokens, "engines": dict(self.engines)}


@dataclass(frozen=True)
class ReachReport:
    """Every config found under ``root``, and the counts per engine mode and status."""

    root: str
    entries: tuple[ReachEntry, ...]
    engines: tuple[str, ...]

    def counts(self) -> dict:
        """{engine: {sized: n, refused: n, not yet: n}} (a config the reader refuses is "not yet" everywhere)."""
        out = {engine: Counter({SIZED: 0, REFUSED: 0, NOT_YET: 0}) for engine in self.engines}
        for entry in self.entries:
            for engine in self.engines:
                out[engine][entry.engines[engine]["status"]] += 1
        return {engine: dict(counter) for engine, counter in out.items()}

    @property
    def gaps(self) -> int:
        """Configs the reader refuses plus (config, engine) pairs kvmem does not size yet."""
        return sum(entry.refusal is not None for entry in self.entries) + sum(
            1 for entry in self.entries if entry.refusal is None
            for result in entry.engines.values() if result["status"] == NOT_YET)

    def to_dict(self) -> dict:
        return {"root": self.root, "tokens": self.entries[0].tokens if self.entries else TOKENS,
                "engines": list(self.engines), "counts": self.counts(), "gaps": self.gaps,
                "configs": [entry.to_dict() for entry in self.entries]}

    def lines(self) -> list[str]:
        """A table (one row per config: bytes per token at the context, "no" where the engine refuses,
        "NOT YET" where kvmem does not size it), the counts, then each reason once with its configs."""
        tokens = self.entries[0].tokens if self.entries else TOKENS
        width = max([len("config")] + [len(e.path) for e in self.entries])
        head = f"{'config':<{width}}  {'model_type':<20} {'layers':<28}" + "".join(
            f" {engine:>12}" for engine in self.engines)
        rows = [f"bytes per token at {tokens:,} tokens, one sequence, KV and state (no: the engine does not run "
                "it; NOT YET: kvmem does not size it yet)", head]
        reasons: dict[str, list[str]] = {}
        for entry in self.entries:
            if entry.refusal is not None:
                rows.append(f"{entry.path:<{width}}  reader refuses: {entry.refusal}")
                continue
            layers = ", ".join(f"{count} {kind}" for kind, count in entry.layers.items())
            cells = []
            for engine in self.engines:
                result = entry.engines[engine]
                if result["status"] == SIZED:
                    cells.append(f"{result['total_bytes'] / tokens:,.1f}" + ("*" if result["start_refusal"] else ""))
                    if result["start_refusal"]:
                        reasons.setdefault(f"{engine} (*: sized, but the engine would not start at {tokens:,} "
                                           f"tokens): {result['start_refusal']}", []).append(entry.path)
                else:
                    cells.append("no" if result["status"] == REFUSED else "NOT YET")
                    reasons.setdefault(f"{engine}: {result['reason']}", []).append(entry.path)
            rows.append(f"{entry.path:<{width}}  {entry.model_type or '':<20} {layers:<28}"
                        + "".join(f" {cell:>12}" for cell in cells))
        counts = self.counts()
        rows.append("")
        rows.append(f"{len(self.entries)} configs under {self.root}; "
                    f"{sum(e.refusal is not None for e in self.entries)} refused by the reader")
        for engine in self.engines:
            c = counts[engine]
            rows.append(f"  {engine:<12} {c[SIZED]:>4} sized  {c[REFUSED]:>4} the engine does not run it  "
                        f"{c[NOT_YET]:>4} kvmem does not size it yet")
        for reason, paths in reasons.items():
            rows.append(f"- {reason} [{len(paths)}: {', '.join(paths[:3])}{', ...' if len(paths) > 3 else ''}]")
        return rows


def find_configs(root, *, pattern: str = "config.json", max_files: int = MAX_FILES, max_entries: int = MAX_ENTRIES,
                 max_depth: int = MAX_DEPTH) -> list[tuple[str, str]]:
    """(path relative to ``root``, path to open) of every file named like ``pattern`` under the folder
    ``root`` (or ``root`` itself when it is a file), sorted; bounded as the module says. A linked
    file that leads outside ``root`` is listed (its read refuses it, naming the link)."""
    root = os.fspath(root)
    if os.path.isfile(root):
        return [(os.path.basename(root), root)]
    if not os.path.isdir(root):
        raise ValueError(f"--reach {quote(root)}: no such folder or file")
    found: list[tuple[str, str]] = []
    seen = 0
    stack = [("", 0)]
    while stack:
        relative, depth = stack.pop()
        try:
            with os.scandir(os.path.join(root, relative) if relative else root) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            raise ValueError(f"cannot list {quote(os.path.join(root, relative))}: {exc.strerror}") from None
        seen += len(entries)
        if seen > max_entries:
            raise ValueError(f"{quote(root)} holds more than {max_entries:,} entries, the most one reach walk looks "
                             "at: point --reach at a narrower folder")
        folders = []
        for entry in entries:
            name = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 <= max_depth:
                    folders.append((name, depth + 1))
            elif fnmatch.fnmatch(entry.name, pattern) and (entry.is_file() or entry.is_symlink()):
                found.append((name, os.path.join(root, *name.split("/"))))
                if len(found) > max_files:
                    raise ValueError(f"{quote(root)} holds more than {max_files:,} files named {pattern}, the most "
                                     "one reach reads: point --reach at a narrower folder")
        stack.extend(reversed(folders))
    return sorted(found)


def _name(relative: str) -> str:
    """The model's name for a path: org/name for an HF cache snapshot (models--org--name/snapshots/REV/...)."""
    parts = relative.split("/")
    for i, part in enumerate(parts):
        if part.startswith("models--") and i + 2 < len(parts) and parts[i + 1] == "snapshots":
            return part[len("models--"):].replace("--", "/", 1)
    return parts[-2] if len(parts) > 1 and parts[-1] == "config.json" else os.path.splitext(parts[-1])[0]


def reach_config(config: dict, *, path: str = "", name: str | None = None, engines=None,
                 tokens: int = TOKENS) -> ReachEntry:
    """What the reader makes of one config (a dict) and what every engine mode does with it."""
    from .engines import ENGINES, FamilyNotChecked, engine_estimate
    from .model import Model
    names = tuple(engines or ENGINES)
    try:
        model = Model.from_hf_config(config, name=name)
    except ValueError as exc:                  # ConfigError: the reader's refusal, naming the field
        refusal = str(exc)
        return ReachEntry(path, name, config.get("model_type") if isinstance(config, dict) else None,
                          refusal=refusal, tokens=tokens,
                          engines={e: {"status": NOT_YET, "reason": f"the reader refuses the config: {refusal}"}
                                   for e in names})
    layers = dict(sorted(Counter(str(getattr(layer.kind, "value", layer.kind)) for layer in model.layers).items()))
    results: dict[str, dict] = {}
    for engine in names:
        try:
            estimate = engine_estimate(model, engine=engine, tokens=tokens)
        except FamilyNotChecked as exc:
            results[engine] = {"status": NOT_YET, "reason": str(exc)}
        except ValueError as exc:
            results[engine] = {"status": REFUSED, "reason": str(exc)}
        else:
            results[engine] = {"status": SIZED, "kv_bytes": estimate.kv_bytes, "state_bytes": estimate.state_bytes,
                               "total_bytes": estimate.total_bytes,
                               "start_refusal": estimate.refusal.reason if estimate.refusal else None}
    return ReachEntry(path, model.name, model.model_type, layers, None, results, tokens)


def _read(root: str, relative: str, path: str):
    """One found file's config, read as kvmem estimate reads it; a link is followed only inside
    ``root``, or from an HF cache snapshot (snapshots/REV/) to its own repository's blobs."""
    if not os.path.isdir(root):
        return load_config(pathlib.Path(path))
    try:
        confined(root, relative, relative)
    except SourceError:
        folder, _, base = relative.rpartition("/")
        if folder.rpartition("/")[0].rpartition("/")[2] != "snapshots":
            raise
        confined(os.path.join(root, *folder.split("/")), base, relative)
    return load_config(pathlib.Path(path))


def _refused(relative: str, name: str, error: str, engines, tokens: int) -> ReachEntry:
    return ReachEntry(relative, name, None, refusal=error, tokens=tokens,
                      engines={e: {"status": NOT_YET, "reason": f"the reader refuses the config: {error}"}
                               for e in engines})


def reach(root, *, pattern: str = "config.json", engines=None, tokens: int = TOKENS) -> ReachReport:
    """Every config under ``root`` (find_configs), each through the reader and every engine mode."""
    from .engines import ENGINES, engine_spec
    names = tuple(engine_spec(engine).name for engine in engines) if engines else tuple(ENGINES)
    root = os.fspath(root)
    entries = []
    for relative, path in find_configs(root, pattern=pattern):
        name = _name(relative)
        try:
            config = _read(root, relative, path)
        except ValueError as exc:            # ConfigError, SourceError: named by the reader
            entries.append(_refused(relative, name, str(exc), names, tokens))
            continue
        entries.append(reach_config(config, path=relative, name=name, engines=names, tokens=tokens))
    return ReachReport(root, tuple(entries), names)


def family_reach() -> dict[str, dict[str, tuple[str, str]]]:
    """{model_type: {engine: (status, reason)}} for every family the reader knows (kvmem.configs.FAMILIES),
    from the engines' declarations alone (kvmem.engines.check_family): sized, refused with the engine's
    own reason (EngineSpec.refusals), or not yet (FamilyNotChecked)."""
    from .configs.families import FAMILIES
    from .engines import ENGINES, FamilyNotChecked, check_family

    class _Typed:                       # check_family reads model_type and the layers' kinds
        layers = ()

        def __init__(self, model_type):
            self.model_type = model_type

    table: dict[str, dict[str, tuple[str, str]]] = {}
    for model_type in sorted(FAMILIES):
        row = {}
        for engine, spec in ENGINES.items():
            try:
                check_family(spec, _Typed(model_type))
            except FamilyNotChecked as exc:
                row[engine] = (NOT_YET, str(exc))
            except ValueError as exc:
                row[engine] = (REFUSED, spec.refusals.get(model_type) or str(exc))
            else:
                row[engine] = (SIZED, "")
        table[model_type] = row
    return table


def families_markdown() -> str:
    """docs/families.md: which engine modes size which families, generated from the declarations."""
    from .engines import ENGINES
    table = family_reach()
    engines = list(ENGINES)
    symbol = {SIZED: "yes", REFUSED: "no", NOT_YET: "not yet"}
    everywhere = [t for t, row in table.items() if all(status == SIZED for status, _ in row.values())]
    rest = {t: row for t, row in table.items() if t not in everywhere}
    lines = ["# Which engine modes size which families", "",
             "Generated by `kvmem.reach.families_markdown()` (`python -m kvmem.reach > docs/families.md`) from each "
             "engine mode's declarations: the opt-in families it sizes (`EngineSpec.families`) and those its pinned "
             "engine does not run, with the engine's reason (`EngineSpec.refusals`); "
             "tests/engines/test_family_reach.py checks that this file is what the code generates. "
             "Whether one checkpoint's own config is read and sized: `kvmem validate --reach DIR`.", "",
             "**yes**: the mode sizes the family; **no**: the pinned engine does not run it (its reason below); "
             "**not yet**: kvmem has not checked the family against that engine's code, and refuses it saying so "
             "(kvmem.engines.FamilyNotChecked).", "",
             f"Sized by every engine mode ({len(everywhere)} families): "
             + ", ".join(f"`{t}`" for t in everywhere) + ".", "",
             f"The other {len(rest)}:", "",
             "| model_type | " + " | ".join(engines) + " |", "|---|" + "---|" * len(engines)]
    for model_type, row in rest.items():
        lines.append(f"| {model_type} | " + " | ".join(symbol[row[e][0]] for e in engines) + " |")
    totals = {e: Counter(row[e][0] for row in table.values()) for e in engines}
    lines += ["", "| of all " + str(len(table)) + " | " + " | ".join(engines) + " |", "|---|" + "---|" * len(engines)]
    for status in (SIZED, REFUSED, NOT_YET):
        lines.append(f"| {symbol[status]} | " + " | ".join(str(totals[e][status]) for e in engines) + " |")
    lines += ["", "## The engines' pins", ""] + [f"- {e}: {ENGINES[e].pinned}" for e in engines if ENGINES[e].pinned]
    lines += ["", "## The engines' own reasons", ""]
    for model_type, row in rest.items():
        for engine in engines:
            status, reason = row[engine]
            if status == REFUSED:
                lines.append(f"- {model_type}, {engine}: {' '.join(reason.split())}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys
    sys.stdout.write(families_markdown())
