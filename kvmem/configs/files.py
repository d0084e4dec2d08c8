"""A config.json's text, read within bounds: size, nesting, encoding, number length.

What comes from outside is read within bounds, so that a hostile file cannot make kvmem loop
or allocate without end: regular files only, at most MAX_CONFIG_BYTES, UTF-8, JSON nested at
most MAX_NESTING deep; a number of more than 30 digits is kept as a marker (``LongNumber``)
that the field reader refuses by name.
"""

from __future__ import annotations

import json
import os
import stat

from ..errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "MAX_NESTING", "LongNumber", "load_config"]

MAX_CONFIG_BYTES = 4 * 2**20     # a config.json is a few KB; the largest real ones ~100 KB
MAX_NESTING = 32                 # JSON object/array depth (real configs: 3)
_MAX_INT_DIGITS = 30


class LongNumber:
    """A JSON number too long to read (Python refuses ints past 4300 digits): kept as a
    marker so that the field reader names the field that holds it."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"a {self.digits:,}-digit number"


def _parse_int(text: str):
    return int(text) if len(text) <= _MAX_INT_DIGITS else LongNumber(text)


def _check_nesting(data) -> None:
    """Refuse JSON nested deeper than MAX_NESTING (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ConfigError(f"config is nested deeper than {MAX_NESTING} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _read_file(path) -> str:
    """A config file's text: a regular file only, at most MAX_CONFIG_BYTES, UTF-8."""
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {name!r}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"config file {name!r} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {name!r}: {exc.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {name!r} is larger than {MAX_CONFIG_BYTES:,} bytes")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"config file {name!r} is UTF-16 text; config.json must be UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {name!r} is not UTF-8 text (byte {data[exc.start]:#04x} at "
                          f"offset {exc.start})") from None


def load_config(cfg) -> dict:
    """A config as a dict, from a dict, JSON text, or a path to a JSON file (bounded, see above)."""
    if isinstance(cfg, dict):
        _check_nesting(cfg)
        return cfg
    if isinstance(cfg, bytes):
        raise ConfigError("config must be a dict, JSON text or a path, got bytes")
    if isinstance(cfg, (str, os.PathLike)):
        text, where = str(cfg), ""
        if isinstance(cfg, os.PathLike) or not text.lstrip().startswith(("{", "[")):
            if "\x00" in text:
                raise ConfigError("config path contains a NUL character")
            where = f" {os.path.basename(text)[:100]!r}"        # a file's errors name it
            text = _read_file(cfg)
        if len(text) > MAX_CONFIG_BYTES:
            raise ConfigError(f"config text is longer than {MAX_CONFIG_BYTES:,} characters")
        try:
            data = json.loads(text, parse_int=_parse_int)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config{where} is not valid JSON: {exc.msg} at line {exc.lineno} column "
                              f"{exc.colno}") from None
        except RecursionError:
            raise ConfigError(f"config{where} is nested deeper than {MAX_NESTING} levels") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config must be a JSON object, got {type(data).__name__}")
        _check_nesting(data)
        return data
    raise ConfigError(f"config must be a dict, JSON text or a path, got {type(cfg).__name__}")
