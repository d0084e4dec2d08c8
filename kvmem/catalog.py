"""Model presets from kvmem/data/models/*.json: real config.json files, each with its source.

A preset file holds ``name``, ``hf_id``, ``aliases``, ``source`` (where the config was
read), the ``config`` as published, and ``published`` facts (parameter counts,
checkpoint sizes) with their own sources. Names and HF ids match case-insensitively.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from importlib import resources

from .configs import model_from_config
from .model import Model
from .units import show_value

__all__ = ["list_models", "get_model", "preset", "presets", "as_model"]


@lru_cache(maxsize=1)
def presets() -> dict[str, dict]:
    """Every preset's data, by preset name."""
    folder = resources.files("kvmem").joinpath("data/models")
    entries = {}
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".json"):
            data = json.loads(item.read_text(encoding="utf-8"))
            entries[data["name"]] = data
    return entries


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    index = {}
    for name, data in presets().items():
        for key in [name, data.get("hf_id") or "", *data.get("aliases", [])]:
            if key:
                index[key.lower()] = name
                index[key.lower().rsplit("/", 1)[-1]] = index.get(key.lower().rsplit("/", 1)[-1], name)
    return index


def list_models() -> list[str]:
    """Preset names, sorted."""
    return sorted(presets())


def preset(name: str) -> dict:
    """The raw preset data for a preset name or HF id."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    key = _index().get(name.strip().lower())
    if key is None:
        close = (difflib.get_close_matches(name.strip().lower(), list(presets()), n=5, cutoff=0.5)
                 if len(name) <= 200 else [])
        hint = f"; did you mean {', '.join(close)}?" if close else "; see kvmem.list_models()"
        raise ValueError(f"unknown model {show_value(name)}{hint}")
    return presets()[key]


def get_model(name: str) -> Model:
    """A preset Model by preset name ("llama-3.1-8b") or HF id ("meta-llama/Llama-3.1-8B-Instruct")."""
    if not isinstance(name, str):  # (before the cache, which would raise TypeError on a list)
        raise ValueError(f"model name must be a non-empty string, got {type(name).__name__}")
    return _preset_model(name)


@lru_cache(maxsize=None)
def _preset_model(name: str) -> Model:
    data = preset(name)
    return model_from_config(data["config"], name=data["name"], hf_id=data.get("hf_id"),
                             source=data.get("source"))


def as_model(model) -> Model:
    """A Model from a Model, a preset name / HF id, or a config dict (what every entry point accepts)."""
    if isinstance(model, Model):
        return model
    if isinstance(model, str):
        return get_model(model)
    if isinstance(model, dict):
        return Model.from_hf_config(model)
    raise ValueError(f"model must be a kvmem.Model, a preset name or a config dict, got {type(model).__name__}")
