"""Frozen results read by attribute (``result.kv_bytes``), with ``to_dict()`` for plain data.

A subclass is a frozen dataclass whose fields carry units in their names (``kv_bytes``) and
whose ``KEYS`` maps each plain-data key (``"kv"``) to its field; ``to_dict()`` gives those keys,
in that order, so JSON and tables keep the names they had. Without ``KEYS`` the keys are the
field names. A field named in ``OPTIONAL`` is a key only while it is not None (a dict that
had the key only sometimes). A Record is not a mapping: one spelling per field, the attribute.
DictRecord is the exception the API contract asks for: a Record that is also a read-only dict.
"""

from __future__ import annotations

from dataclasses import fields

__all__ = ["Record", "DictRecord"]


class Record:
    """A frozen result with ``to_dict()``: its fields by the plain-data keys of ``KEYS`` (key -> field name)."""

    KEYS: dict[str, str] = {}
    OPTIONAL: tuple[str, ...] = ()

    def _keys(self) -> dict[str, str]:
        keys = self.KEYS or {f.name: f.name for f in fields(self)}  # type: ignore[arg-type]  # subclasses: dataclasses
        return {k: name for k, name in keys.items() if name not in self.OPTIONAL or getattr(self, name) is not None}

    def to_dict(self) -> dict:
        return {key: getattr(self, name) for key, name in self._keys().items()}


class DictRecord(Record, dict):
    """A Record that is also a read-only ``dict`` of its keys, for the results the API contract
    (docs/api.md) promises as dicts: ``result["bytes"]``, ``json.dumps`` and ``isinstance(result, dict)``
    keep working. The dict holds what ``Record.to_dict`` gives (nested records stay records, dicts
    themselves); writing to it raises TypeError, and copies and pickles rebuild the record from its fields."""

    def __post_init__(self):
        dict.update(self, Record.to_dict(self))

    def __missing__(self, key):
        raise KeyError(f"{type(self).__name__} has no {key!r}; keys: {', '.join(self)}")

    def _read_only(self, *_args, **_kwargs):
        raise TypeError(f"{type(self).__name__} is read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self):
        return type(self), tuple(getattr(self, f.name) for f in fields(self))
