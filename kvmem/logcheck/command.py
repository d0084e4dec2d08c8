"""The launch command pasted above a log: its flags, as settings (below what the engine itself prints).

A line that runs a server ("vllm serve", "sglang.launch_server", "llama-server" / "llama-cli",
"trtllm-serve") is split as a shell would (shlex, within MAX_COMMAND_CHARS) and the flags kvmem uses
are read under their engine's names (each engine's LogReader: runs, command_flags, command_switches,
in kvmem/engines/<engine>/logs.py, from the engine's own argument parser; a flag given many times into one
list, in order, where the reader declares it an Appends: llama.cpp's -ot / --n-cpu-moe). What the
engine prints later (its config line, server_args, llama_context lines) is what it ran with and wins
over the command (kvmem.logcheck.check_log); a flag kvmem does not use is left alone.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from .printed import value_of

MAX_COMMAND_CHARS = 8000      # a launch command; a longer line is not read as one
MAX_TRIED = 8                 # lines that look like a command and are split (shlex is slow): a log holds one or two


@dataclass(frozen=True)
class Appends:
    """A flag that may be given many times, each adding items to one list, in the command's order (llama.cpp's
    -ot, --cpu-moe, --n-cpu-moe: one list of tensor overrides): ``parse(word)`` -> the items one use adds
    (``word`` None for a flag that takes no value). A value ``parse`` refuses raises ValueError naming it."""

    name: str
    parse: Callable
    takes_value: bool = True


def read(lines: list[str], reader, unread: list | None = None) -> dict:
    """The settings of the first launch command of an engine in ``lines``, read by its LogReader ``reader``
    (kvmem.engines.base.LogReader): kvmem name -> (value, where). Where a line runs the engine but is not read
    (over MAX_COMMAND_CHARS, an unclosed quote, past MAX_TRIED) and no later one is, why goes into ``unread``."""
    tried, skipped = 0, []
    for n, line in enumerate(lines, 1):
        hits = [(at, run) for run in reader.runs if (at := line.find(run)) >= 0]
        if not hits:
            continue
        start, run = min(hits)
        if len(line) - start > MAX_COMMAND_CHARS:
            skipped.append(f"log line {n} runs {run.strip()} but is {len(line) - start:,} characters from there, more "
                           f"than the {MAX_COMMAND_CHARS:,} kvmem reads as a command")
            continue
        tried += 1
        if tried > MAX_TRIED:
            skipped.append(f"log line {n} runs {run.strip()}, past the {MAX_TRIED} command lines kvmem splits")
            break
        text = _continued(lines, n, line[start:], run)
        try:
            words = split(text, windows=_windows(text, run))
        except ValueError as exc:            # an unclosed quote: not a command kvmem reads
            skipped.append(f"log line {n} runs {run.strip()} but is not split as a shell would ({exc}: an unclosed "
                           "quote?)")
            continue
        return _flags(words, len(run.split()), reader, n, text)
    if unread is not None and skipped:
        unread.append(f"the command was not read, so no setting comes from it: {skipped[0]}")
    return {}


MAX_CONTINUED = 64           # lines one command may be continued over ("\\" at a line's end)


def _continued(lines: list[str], n: int, text: str, run: str) -> str:
    """The command that starts at log line ``n`` with ``text``, with the lines it continues over: a POSIX shell
    joins a line ending in a backslash to the next ("llama-server \\" then "    --model x.gguf \\" ..., as a
    command is pasted over several lines), within MAX_CONTINUED lines and MAX_COMMAND_CHARS. A Windows command
    (_windows) keeps its backslashes: not continued."""
    if _windows(text, run):
        return text
    parts = [text]
    at = n           # lines[at] is the line after the last one joined
    while parts[-1].rstrip().endswith("\\") and at < len(lines) and len(parts) <= MAX_CONTINUED:
        parts[-1] = parts[-1].rstrip()[:-1]
        parts.append(lines[at])
        at += 1
        if sum(map(len, parts)) > MAX_COMMAND_CHARS:
            return text
    if parts[-1].rstrip().endswith("\\"):      # continued past the log's last line (or MAX_CONTINUED): cut there
        parts[-1] = parts[-1].rstrip()[:-1]
    return " ".join(parts)


# A Windows command line (cmd.exe, PowerShell) passes a backslash as it is: "llama-server.exe -m C:\\models\\x.gguf"
_DRIVE_PATH = re.compile(r"(?:^|[\s\"'=])[A-Za-z]:\\")


def _windows(text: str, run: str) -> bool:
    """Whether ``text`` (a command from its run word on) is a Windows one: the program ends .exe, or a word starts
    with a drive letter path (C:\\...)."""
    return run.strip().endswith(".exe") or _DRIVE_PATH.search(text) is not None


def split(text: str, *, windows: bool = False) -> list[str]:
    """``text``'s words as the program receives them: POSIX shell rules (a backslash escapes), or, ``windows``, as
    cmd.exe / PowerShell pass them (a backslash is kept; a word's enclosing quotes removed)."""
    if not windows:
        return shlex.split(text)
    lexer = shlex.shlex(text, posix=False)
    lexer.whitespace_split = True
    return [w[1:-1] if len(w) >= 2 and w[0] == w[-1] and w[0] in "\"'" else w for w in lexer]


def read_flags(text: str, reader, *, max_chars: int = MAX_COMMAND_CHARS, what: str = "the flags") -> dict:
    """The flags of ``text`` alone (no command word before them: a user's "-ngl 99 -ts 3,1 ..."), read by the
    same ``reader`` as a log's command, strictly: a word that is not one of its flags, a bare word, a flag with no
    value is refused by name (ValueError), never left alone. As llama.cpp reads its own arguments (llama.cpp@0c1e57098
    common/arg.cpp#L820-L836): a "--" flag's '_' read as '-', no "--flag=value" form (its "invalid argument"), and a
    flag given twice keeps its last value (-ot and the others that add to one list: every value).
    kvmem name -> (value, where)."""
    if len(text) > max_chars:
        raise ValueError(f"{what}: {len(text):,} characters, more than the {max_chars:,} kvmem reads")
    try:
        words = shlex.split(text)
    except ValueError as exc:                # an unclosed quote
        raise ValueError(f"{what}: not split as a shell would ({exc})") from None
    return _flags(words, 0, reader, 0, text, strict=what)


def _flags(words: list[str], first: int, reader, n: int, line: str, strict: str | None = None) -> dict:
    """The flags of ``words`` from ``words[first]`` on (the words before it run the server); ``strict``: the
    words' name in a refusal (read_flags), where a word kvmem does not read is refused rather than left alone."""
    found: dict = {}
    where = strict or f"{n}, the command"
    label = strict or f"log line {n}, the command"
    flags, switches = reader.command_flags, reader.command_switches
    positional = reader.positional_model            # vllm serve MODEL, trtllm-serve MODEL
    i = first
    while i < len(words):
        word, i = words[i], i + 1
        name, _, inline = _strict_name(word, label) if strict else \
            word.partition("=") if word.startswith("--") else (word, "", "")
        if isinstance(target := flags.get(name), Appends):
            raw = (inline or (words[i] if i < len(words) else None)) if target.takes_value else None
            i += 1 if target.takes_value and not inline else 0
            if raw is None and target.takes_value:
                raise ValueError(f"{label}: {name} takes a value and has none")
            try:
                items = target.parse(raw)
            except ValueError as exc:
                raise ValueError(f"{label}: {name} {raw!r}: {exc}") from None
            found.setdefault(target.name, ([], where))[0].extend(items)
        elif name in switches and not inline:
            key, value = switches[name]
            words_for = reader.switch_values.get(key, {})      # llama.cpp's -fa on|off|auto
            if i < len(words) and words[i] in words_for:
                value, i = words_for[words[i]], i + 1
            if value is not None or strict:  # strict: the last given, None (-fa auto: left to the engine) too
                found[key] = (value, where) if strict else found.get(key, (value, where))
        elif name in flags:
            raw = inline or (words[i] if i < len(words) else None)
            i += 0 if inline else 1
            if raw is not None:
                value = value_of(raw, n, line)
                if strict:                   # llama.cpp: "only last value will be used"
                    found[flags[name]] = (value, where)
                found.setdefault(flags[name], (value, where))
            elif strict:
                raise ValueError(f"{label}: {name} takes a value and has none")
        elif positional and not word.startswith("-") and "model" not in found:
            found["model"] = (word, where)
        elif strict:
            raise ValueError(f"{label}: {word!r} is not a flag kvmem reads (it reads "
                             f"{', '.join(sorted({*flags, *switches}, key=str.lower))})")
        positional = positional and not word.startswith("-")
    return found


def _strict_name(word: str, label: str) -> tuple[str, str, str]:
    """A word as llama.cpp looks it up (llama.cpp@0c1e57098 common/arg.cpp#L820-L828): a "--" flag's '_' read as
    '-', and no "--flag=value" form (its "invalid argument"); (name, "", "") as str.partition gives it."""
    if not word.startswith("--"):
        return word, "", ""
    if "=" in word:
        raise ValueError(f"{label}: llama.cpp: error: invalid argument: {word} (no --flag=value form: give "
                         f"{word.partition('=')[0]} VALUE)")
    return word.replace("_", "-"), "", ""
