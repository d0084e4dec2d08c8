"""The errors kvmem raises beyond ValueError's own (below every module that raises them)."""

from __future__ import annotations

__all__ = ["ConfigError", "EngineRefusal"]


class ConfigError(ValueError):
    """A config.json that cannot be read: the message names the field."""


class EngineRefusal(ValueError):
    """The engine itself would not run this (its pinned release's code refuses it), as opposed to
    a gap in kvmem. ``engine``: the engine mode's name ("vllm"); ``release``: the release whose
    code refuses ("vLLM 0.33.0"); ``reason``: why, in that code's terms; ``way_out``: what runs it
    instead (other engine modes, a setting), or None. The message is the whole sentence."""

    def __init__(self, message: str, *, engine: str, release: str, reason: str, way_out: str | None = None):
        super().__init__(message)
        self.engine, self.release, self.reason, self.way_out = engine, release, reason, way_out
