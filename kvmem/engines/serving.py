"""What an engine declares for its server, beside its sizing rules (EngineSpec.launch and
EngineSpec.log_reader): how kvmem.plan writes its launch command (Launcher, in the engine's
launch.py) and how kvmem.check_log reads its startup log (LogReader, in its logs.py). The
machinery that asks them is engine-blind: kvmem/launch and kvmem/logcheck."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Launcher", "LogReader"]


@dataclass(frozen=True)
class Launcher:
    """How kvmem.plan writes an engine's server command (its package's launch.py).

    ``flags(inputs) -> tuple[Flag, ...]`` and ``files(inputs) -> {name: text}`` take a
    kvmem.launch.base.Inputs; ``batch_option``: the engine option that caps the sequences per
    replica, which plan sets to the batch it planned when it is not given (None: no such option);
    ``roles``: its disaggregated prefill/decode roles (kvmem.disagg)."""

    release: str                     # the release whose argument names the command uses
    program: tuple[str, ...]         # the words that run the server
    flags: Callable
    files: Callable | None = None    # files written beside the command (None: none)
    batch_option: str | None = None
    # disaggregated prefill/decode (kvmem.disagg): roles(role, model, prompt_tokens, options) -> (flags, notes),
    # the words the role's command adds and what the role holds beyond the plan (None: no disaggregated serving)
    roles: Callable | None = None


@dataclass(frozen=True)
class LogReader:
    """How kvmem.check_log reads an engine's startup log (its package's logs.py).

    read(lines) -> found                 the number lines it checks, by their text
    claims(found) -> bool                ``found`` holds lines of this engine (its log is this one)
    printed(lines) -> {name: (value, line)}  the settings it prints
    check(model, found, kv_dtype=, tp=, pp=, info=, **options) -> (settings, checks, notes)
    check_options                        what ``check`` takes beyond the engine's options
    runs                                 text that starts its launch command in a log ("vllm serve ")
    command_flags, command_switches      that command's flags: flag -> kvmem name; switch ->
                                         (kvmem name, value)
    switch_values                        kvmem name -> {word: value} for a switch that may take one
                                         (None: left to the engine)
    positional_model                     the command's first bare word is the model
    generic                              its lines may appear in other engines' logs: it claims
                                         a log only when no other reader does
    lines                                what it reads, for the note on a log with nothing to check
    """

    read: Callable
    claims: Callable
    printed: Callable
    check: Callable
    lines: str
    check_options: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    command_flags: dict = field(default_factory=dict)
    command_switches: dict = field(default_factory=dict)
    switch_values: dict = field(default_factory=dict)
    positional_model: bool = False
    generic: bool = False
