"""The settings an engine prints at start-up, read off its lines without a regular expression.

Engines print their settings as Python reprs: vLLM's config line ``model='Qwen/Qwen3-8B', ...,
tensor_parallel_size=4, ...`` and its ``non-default args: {'block_size': 32, ...}``, SGLang's
``server_args=ServerArgs(tp_size=2, ...)`` (or ``server_args={'tp_size': 2, ...}`` in 0.5.x). A field
is ``name=value``, ``name = value`` (llama.cpp) or ``'name': value`` after a separator (space, comma,
bracket); its value is a quoted string, or the text up to the next comma or closing bracket, at most
MAX_VALUE_CHARS long (a longer one is not read: no setting a server prints is that long). Every
search is str.find from where the last one stopped, and a value is looked for in a window of
MAX_VALUE_CHARS, so a line is read in time linear in its length, however it is built.
"""

from __future__ import annotations

from .base import logged_number

MAX_VALUE_CHARS = 400          # the longest value read (a model path; real ones are under 200)
_BEFORE = " ,({"               # what may stand before a field's name
_ENDS = ",)}"                  # what ends an unquoted value


def field(line: str, name: str, start: int = 0) -> str | None:
    """The raw text of field ``name`` in ``line[start:]`` (quotes kept), or None."""
    for form in (f"{name}=", f"{name} = ", f"'{name}': ", f'"{name}": '):
        at = start
        while (at := line.find(form, at)) >= 0:
            if form[0] in "'\"" or at == 0 or line[at - 1] in _BEFORE:
                value = _value(line, at + len(form))
                if value is not None:
                    return value
            at += 1
    return None


def _value(line: str, at: int) -> str | None:
    window = line[at:at + MAX_VALUE_CHARS + 2]
    if window[:1] in ("'", '"'):
        end = window.find(window[0], 1)
        return window[:end + 1] if end > 0 else None
    ends = [i for i in (window.find(c) for c in _ENDS) if i >= 0]
    end = min(ends) if ends else (len(window) if len(line) - at <= MAX_VALUE_CHARS else -1)
    return window[:end].strip() if end > 0 else None


def value_of(raw: str, n: int, line: str):
    """A printed value as Python's repr wrote it: None, True/False, a whole number (bounded as every
    number in a log is, kvmem.logcheck.base.logged_number), a decimal, or text (quotes dropped)."""
    if raw in ("None", "null"):
        return None
    if raw in ("True", "true"):
        return True
    if raw in ("False", "false"):
        return False
    if raw[:1] in ("'", '"'):
        return raw[1:-1]
    if raw.isdigit():
        return logged_number(raw, n, line)
    if raw.replace(".", "", 1).isdigit():
        return logged_number(raw, n, line, float)
    return raw


def read_fields(line: str, n: int, start: int, names: dict, into: dict) -> None:
    """Each field of ``names`` (log name -> kvmem name) in ``line[start:]`` not read yet, into ``into``
    as kvmem name -> (value, line number)."""
    for log_name, name in names.items():
        if name not in into and (raw := field(line, log_name, start)) is not None:
            into[name] = (value_of(raw, n, line), n)


def after(line: str, marker: str, end: str, limit: int = 80) -> str | None:
    """The text between ``marker`` and the next ``end`` (at most ``limit`` characters), or None."""
    at = line.find(marker)
    if at < 0:
        return None
    start = at + len(marker)
    stop = line.find(end, start, start + limit + len(end))
    return line[start:stop].strip() if stop > start else None
