"""Model presets from kvmem/data/models/*.json: real config.json files, each with its source;
and where any other model comes from (kvmem.sources).

Resolution of a name (get_model): a preset (name, HF id or alias); else an "org/name" id from
the local Hugging Face cache, else from the Hub (kvmem.sources.hub: config.json only). as_model
also takes a Model, a config dict, a path to a config.json, a local model folder (config.json +
safetensors headers), a .gguf file, or "org/name/FILE.gguf" on the Hub (header by range requests).

A preset file holds ``name``, ``hf_id``, ``aliases``, ``source`` (where the config was
read), the ``config`` as published, and ``published`` facts (parameter counts,
checkpoint sizes) with their own sources. Names and HF ids match case-insensitively.
"""

from __future__ import annotations

import os
from functools import lru_cache

from .configs import load_config
from .datafiles import has_json, json_names, read_json
from .model import Model
from .units import show_value

__all__ = ["list_models", "get_model", "preset", "presets", "as_model"]


@lru_cache(maxsize=1)
def presets() -> dict[str, dict]:
    """Every preset's data, by preset name."""
    return {name: _preset_file(name) for name in json_names("models")}


@lru_cache(maxsize=None)
def _preset_file(name: str) -> dict:
    """kvmem/data/models/NAME.json: a preset's file is named after its ``name`` (a test checks)."""
    return read_json(f"models/{name}.json")


def _preset_key(name: str) -> str | None:
    """The preset a name, HF id or alias means (any case), or None. A preset's own name is
    looked up by its file, without reading every preset (what one command needs)."""
    lowered = name.strip().lower()
    if lowered and "/" not in lowered and not lowered.startswith(".") and has_json(f"models/{lowered}.json"):
        return lowered
    return _index().get(lowered)


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
    key = _preset_key(name)
    if key is None:
        import difflib
        close = (difflib.get_close_matches(name.strip().lower(), list(presets()), n=5, cutoff=0.5)
                 if len(name) <= 200 else [])
        hint = f"; did you mean {', '.join(close)}?" if close else "; see kvmem.list_models()"
        raise ValueError(f"unknown model {show_value(name)}{hint}")
    return _preset_file(key)


@lru_cache(maxsize=None)
def _preset_model(key: str) -> Model:
    data = _preset_file(key)
    return Model.from_hf_config(data["config"], name=data["name"], hf_id=data.get("hf_id"),
                                source=data.get("source"))


def get_model(name: str, *, revision: str | None = None) -> Model:
    """A Model by preset name ("llama-3.1-8b") or HF id ("meta-llama/Llama-3.1-8B-Instruct"):
    a preset first, else the id from the local Hugging Face cache, else the Hub (``revision``:
    a branch, tag or commit). Needs huggingface_hub (kvmem[sources]) for ids that are not presets."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    key = _preset_key(name)
    if key is not None and revision is None:
        return _preset_model(key)
    from .sources.hub import is_repo_id
    if not is_repo_id(name):
        if key is not None:
            raise ValueError(f"revision={revision!r} applies to a Hugging Face id (org/name), not to the preset "
                             f"name {name!r}")
        preset(name)              # raises "unknown model ..." with the closest preset names
    from .sources.hub import model_from_hub
    return model_from_hub(name.strip(), revision=revision)


def as_model(model, *, revision: str | None = None) -> Model:
    """A Model from what every entry point accepts: a Model, a preset name or HF id, a config dict,
    a path to a config.json, a local model folder, a .gguf file or "org/name/FILE.gguf"."""
    if isinstance(model, Model):
        return model
    if isinstance(model, dict):
        return Model.from_hf_config(model)
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if isinstance(model, str):
        key = _preset_key(model)
        if key is not None and revision is None:
            return _preset_model(key)
        from .sources import is_gguf, is_model_folder
        if is_gguf(model):
            if os.path.exists(model):
                return Model.from_gguf(model)
            from .sources.hub import model_from_remote_gguf, split_gguf_spec
            remote = split_gguf_spec(model)
            if remote is None:
                raise ValueError(f"GGUF file {model!r} does not exist (a Hub GGUF is org/name/FILE.gguf)")
            return model_from_remote_gguf(*remote, revision=revision)
        if is_model_folder(model):
            from .sources.safetensors import model_from_folder
            return model_from_folder(model)
        if model.endswith(".json"):
            # named by its _name_or_path, else a config.json by its folder and any other file by its own name
            cfg = load_config(model)
            path = os.path.abspath(model)
            own = os.path.splitext(os.path.basename(path))[0]
            name = (os.path.basename(os.path.dirname(path)) or own) if own == "config" else own
            return Model.from_hf_config(cfg, name=None if cfg.get("_name_or_path") else name)
        return get_model(model, revision=revision)
    raise ValueError(f"model must be a kvmem.Model, a preset name or a config dict, got {type(model).__name__} "
                     "(a name may also be an HF id, a path to a config.json, a model folder or a .gguf file)")
