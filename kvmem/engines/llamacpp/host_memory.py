"""Host memory bandwidth for llama.cpp's decode bound (kvmem.engines.llamacpp.offload): the presets of
data/host_memory.json and the values a user gives."""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["host_memory_presets", "host_bandwidth"]


def host_memory_presets() -> dict:
    """name -> {"bandwidth_bytes_per_s", "source"} (data/host_memory.json)."""
    text = resources.files("kvmem").joinpath("data/host_memory.json").read_text(encoding="utf-8")
    return {e["name"]: e for e in json.loads(text)["presets"]}


def host_bandwidth(value) -> int | None:
    """A host bandwidth: a preset name, bytes/s (int), or "89.6GB/s" text."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    presets = host_memory_presets()
    if isinstance(value, str) and value in presets:
        return presets[value]["bandwidth_bytes_per_s"]
    if isinstance(value, str) and value.strip().lower().endswith("/s"):
        from ...units import parse_bytes
        return parse_bytes(value.strip()[:-2])
    raise ValueError(f"host_bandwidth must be a preset ({', '.join(presets)}), bytes per second or 'NGB/s', "
                     f"got {value!r}")
