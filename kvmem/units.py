"""Units in and out: "128k" tokens, "80GiB" bytes, and byte counts for people.

Token suffixes are binary (k = 1024, M = 1024**2), as context lengths are named:
"128k" is 131,072 tokens. Byte suffixes follow IEC 80000-13: KB/MB/GB/TB are powers
of 1000, KiB/MiB/GiB/TiB powers of 1024. Parsing is exact (decimal arithmetic), so
"1.5k" is 1536 and a value that is not a whole number of units is refused.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["parse_tokens", "parse_bytes", "format_bytes", "require_positive_int"]

_TOKEN_SUFFIXES = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_BYTE_SUFFIXES = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2,
    "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_NUMBER_WITH_SUFFIX = re.compile(r"^\s*([0-9][0-9_,]*(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def require_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is an int >= 1, else raise a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def _parse(field: str, value: object, suffixes: dict[str, int], examples: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a positive integer or a string like {examples}, got {value!r}")
    if isinstance(value, int):
        return require_positive_int(field, value)
    if isinstance(value, float):
        if value.is_integer():
            return require_positive_int(field, int(value))
        raise ValueError(f"{field} must be a whole number, got {value!r}")
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a positive integer or a string like {examples}, got {value!r}")
    match = _NUMBER_WITH_SUFFIX.match(value)
    suffix = match.group(2).lower() if match else None
    if match is None or suffix not in suffixes:
        raise ValueError(f"{field}: cannot read {value!r}; expected a number with an optional suffix, like {examples}")
    try:
        number = Decimal(match.group(1).replace("_", "").replace(",", "")) * suffixes[suffix]
    except InvalidOperation:
        raise ValueError(f"{field}: cannot read {value!r} as a number") from None
    if number != number.to_integral_value():
        raise ValueError(f"{field}: {value!r} is {number}, not a whole number")
    return require_positive_int(field, int(number))


def parse_tokens(value: object) -> int:
    """Token count from an int or a string: "4096", "32K", "128k" (131072), "1.5k" (1536), "1M"."""
    return _parse("tokens", value, _TOKEN_SUFFIXES, '"4096", "128k" or "1M"')


def parse_bytes(value: object) -> int:
    """Byte count from an int or a string: "80GB" (80e9), "80GiB" (80 * 2**30), "512MiB"."""
    return _parse("bytes", value, _BYTE_SUFFIXES, '"80GB", "80GiB" or "512MiB"')


def format_bytes(n: int | float, binary: bool = True, digits: int = 2) -> str:
    """``n`` bytes for people: 8_388_608_000 -> "7.81 GiB" (binary) or "8.39 GB" (decimal)."""
    base, units = (1024, ("B", "KiB", "MiB", "GiB", "TiB", "PiB")) if binary else (
        1000, ("B", "KB", "MB", "GB", "TB", "PB"))
    sign = "-" if n < 0 else ""
    value = abs(n)
    unit = 0
    while value >= base and unit < len(units) - 1:
        value /= base
        unit += 1
    if unit == 0:
        return f"{sign}{int(value) if float(value).is_integer() else value} B"
    return f"{sign}{value:.{digits}f} {units[unit]}"
