"""What a strategy did to an Estimate, attached to it beside the engine's own record:
``Estimate.eviction`` (EvictionApplied), ``.shared_prefix`` (PrefixShared), ``.offload`` (Offloaded).

Each is a kvmem.records.Record, read by attribute (``est.offload.host_kv_bytes``), with
``.to_dict()`` giving the keys the dicts they replaced had.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import Record
from .eviction import Eviction

__all__ = ["EvictionApplied", "PrefixShared", "Offloaded"]


@dataclass(frozen=True)
class EvictionApplied(Record):
    """The eviction policy and the tokens each layer holds under it (at most ``tokens``); its keys
    are the policy's settings (``Eviction.to_dict()``) and ``held_tokens``."""

    policy: Eviction
    held_tokens: int

    def to_dict(self) -> dict:
        return {**self.policy.to_dict(), "held_tokens": self.held_tokens}


@dataclass(frozen=True)
class PrefixShared(Record):
    """A shared prefix of ``tokens`` tokens, ``shared_tokens`` of it stored once (whole units of
    ``unit_tokens``), saving ``saved_bytes`` on one device (0: nothing shared)."""

    tokens: int
    shared_tokens: int
    unit_tokens: int
    saved_bytes: int


@dataclass(frozen=True)
class Offloaded(Record):
    """The ``fraction`` of the KV kept in host memory: bytes on the host (one device's share and
    all devices'), and the KV left on the device."""

    fraction: float
    host_kv_bytes: int
    host_kv_bytes_all_devices: int
    device_kv_bytes: int
