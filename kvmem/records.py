"""Frozen results that read like the dicts they replaced: ``result["kv"]``, ``.items()``, ``.to_dict()``.

A subclass is a frozen dataclass whose fields carry units in their names (``kv_bytes``) and
whose ``KEYS`` maps each plain-data key (``"kv"``) to its field; ``to_dict()`` gives those keys,
in that order, so JSON and tables keep the names they had. Without ``KEYS`` the keys are the
field names. A field named in ``OPTIONAL`` is a key only while it is not None (a dict that
had the key only sometimes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

__all__ = ["Record"]


class Record(Mapping):
    """Read access by the plain-data keys of ``KEYS`` (key -> field name)."""

    KEYS: dict[str, str] = {}
    OPTIONAL: tuple[str, ...] = ()

    def _keys(self) -> dict[str, str]:
        keys = self.KEYS or {f.name: f.name for f in fields(self)}
        return {k: name for k, name in keys.items() if name not in self.OPTIONAL or getattr(self, name) is not None}

    def __getitem__(self, key: str):
        keys = self._keys()
        try:
            return getattr(self, keys[key])
        except KeyError:
            raise KeyError(f"{type(self).__name__} has no {key!r}; keys: {', '.join(keys)}") from None

    def __iter__(self):
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def to_dict(self) -> dict:
        return {key: getattr(self, name) for key, name in self._keys().items()}
