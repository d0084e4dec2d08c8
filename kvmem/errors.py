"""The errors kvmem raises beyond ValueError's own (below every module that raises them)."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A config.json that cannot be read: the message names the field."""
