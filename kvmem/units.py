"""Units in and out: "128k" tokens, "80GiB" bytes, and byte counts for people.

Token suffixes are binary (k = 1024, M = 1024**2), as context lengths are named:
"128k" is 131,072 tokens. Byte suffixes follow IEC 80000-13: KB/MB/GB/TB are powers
of 1000, KiB/MiB/GiB/TiB powers of 1024. Parsing is exact (decimal arithmetic), so
"1.5k" is 1536 and a value that is not a whole number of units is refused. Commas are
read only as thousands separators ("128,000"; "1,5k" is refused, not read as 15k), and a
negative value is refused as "must be positive".

Bounds, generously above every real workload, so that a hostile value cannot make a
caller loop or allocate without end: tokens and sequence counts up to MAX_COUNT = 2**40
(1.1 trillion), byte counts up to MAX_BYTES = 10**30 (a quettabyte).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from numbers import Real

__all__ = ["parse_tokens", "parse_bytes", "format_bytes", "require_positive_int", "show_value",
           "exact_bytes", "cdiv", "pad", "MAX_COUNT", "MAX_BYTES"]

MAX_COUNT = 2**40
MAX_BYTES = 10**30

_TOKEN_SUFFIXES = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_BYTE_SUFFIXES = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2,
    "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_NUMBER_WITH_SUFFIX = re.compile(
    r"^\s*([0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?|[0-9][0-9_]*(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")
_NEGATIVE = re.compile(r"^\s*-\s*[0-9.]")
_MAX_DIGITS = 40  # longest number text read at all (MAX_BYTES has 31 digits)


def show_value(value: object) -> str:
    """``repr(value)`` for an error message, short and safe for any size: a 5000-digit
    int would raise in ``str()`` (Python's int_max_str_digits) and flood the message."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"a {abs(value).bit_length():,}-bit integer (about 10**{int(abs(value).bit_length() * 0.30103)})"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"a {type(value).__name__} that cannot be shown"
    return text if len(text) <= 80 else text[:60] + f"... ({len(text):,} characters)"


def require_positive_int(name: str, value: object, maximum: int | None = None) -> int:
    """Return ``value`` if it is an int >= 1 (and <= ``maximum``), else raise a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a positive integer, got {show_value(value)}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {show_value(value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum:,}, got {show_value(value)}")
    return value


def cdiv(a: int, b: int) -> int:
    """Ceiling division of integers, exact: cdiv(17, 16) == 2 (the one spelling of it in kvmem)."""
    return -(-a // b)


def pad(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (GGML_PAD, an allocator's alignment): pad(17, 16) == 32."""
    return cdiv(n, multiple) * multiple


def _parse(field: str, value: object, suffixes: dict[str, int], examples: str, maximum: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a positive integer or a string like {examples}, got {value!r}")
    if isinstance(value, int):
        return require_positive_int(field, value, maximum)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{field} must be a finite number, got {value!r}")
        if value.is_integer():
            return require_positive_int(field, int(value), maximum)
        raise ValueError(f"{field} must be a whole number, got {value!r}")
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a positive integer or a string like {examples}, got {show_value(value)}")
    if len(value) > _MAX_DIGITS + 8:
        raise ValueError(f"{field}: a {len(value):,}-character value is too long; {field} must be at most "
                         f"{maximum:,}")
    if _NEGATIVE.match(value):
        raise ValueError(f"{field} must be positive, got {value!r}")
    match = _NUMBER_WITH_SUFFIX.match(value)
    suffix = match.group(2).lower() if match else None
    if match is None or suffix not in suffixes:
        hint = " (commas only as thousands separators: \"128,000\")" if match is None and "," in value else ""
        raise ValueError(f"{field}: cannot read {value!r}; expected a number with an optional suffix, "
                         f"like {examples}{hint}")
    try:
        number = Decimal(match.group(1).replace("_", "").replace(",", "")) * suffixes[suffix]
    except InvalidOperation:
        raise ValueError(f"{field}: cannot read {value!r} as a number") from None
    if number != number.to_integral_value():
        raise ValueError(f"{field}: {value!r} is {number}, not a whole number")
    if number > maximum:
        raise ValueError(f"{field} must be at most {maximum:,}, got {value!r}")
    return require_positive_int(field, int(number), maximum)


def parse_tokens(value: object) -> int:
    """Token count from an int or a string: "4096", "32K", "128k" (131072), "1.5k" (1536), "1M"."""
    return _parse("tokens", value, _TOKEN_SUFFIXES, '"4096", "128k" or "1M"', MAX_COUNT)


def format_tokens(n: int) -> str:
    """A token count as people type it, the inverse of parse_tokens for exact multiples:
    131072 -> "128k", 1048576 -> "1M", 40960 -> "40k", 1000 -> "1000" (k = 1024)."""
    n = require_positive_int("tokens", n)
    for suffix, size in (("G", 1024**3), ("M", 1024**2), ("k", 1024)):
        if n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def parse_bytes(value: object) -> int:
    """Byte count from an int or a string: "80GB" (80e9), "80GiB" (80 * 2**30), "512MiB"."""
    return _parse("bytes", value, _BYTE_SUFFIXES, '"80GB", "80GiB" or "512MiB"', MAX_BYTES)


def format_bytes(n: int | float, binary: bool = True, digits: int = 2) -> str:
    """``n`` bytes for people: 8_388_608_000 -> "7.81 GiB" (binary) or "8.39 GB" (decimal).

    Exact for ints of any size (decimal arithmetic: 10**400 B is "8.88e+384 PiB", never an
    overflow); NaN and infinity are refused, they are not byte counts.
    """
    if isinstance(n, bool) or not isinstance(n, Real):
        raise ValueError(f"bytes must be a number, got {show_value(n)}")
    if not isinstance(n, int):
        n = float(n)
        if n != n or n in (float("inf"), float("-inf")):
            raise ValueError(f"bytes must be a finite number, got {n!r}")
    base, units = (1024, ("B", "KiB", "MiB", "GiB", "TiB", "PiB")) if binary else (
        1000, ("B", "KB", "MB", "GB", "TB", "PB"))
    sign = "-" if n < 0 else ""
    value = Decimal(abs(n)) if isinstance(n, int) else abs(n)
    unit = 0
    while value >= base and unit < len(units) - 1:
        value /= base
        unit += 1
    if unit == 0:
        return f"{sign}{int(value) if value == int(value) else value} B"
    if value >= 10**15:
        return f"{sign}{value:.{digits}e} {units[unit]}"
    return f"{sign}{float(value):.{digits}f} {units[unit]}"


def exact_bytes(text: str) -> Decimal:
    """The byte count ``text`` names, its fractional part kept ("3.98GiB" -> 4273492459.52); the
    text must be one parse_bytes reads but for the fraction."""
    match = _NUMBER_WITH_SUFFIX.match(text)
    if match is None or match.group(2).lower() not in _BYTE_SUFFIXES:
        raise ValueError(f"not a byte count with a unit such as 80GB or 3.98GiB: {show_value(text)}")
    return Decimal(match.group(1).replace("_", "").replace(",", "")) * _BYTE_SUFFIXES[match.group(2).lower()]
