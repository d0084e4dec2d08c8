"""The package's data files, kvmem/data/: the model presets, the GPU catalog, transformers'
config defaults and the other tables, each read by its name from the folder beside this module.

Plain paths rather than importlib.resources: kvmem is installed as files (never zipped), and
importlib.resources imports zipfile, tempfile and shutil, a few milliseconds of every command
(bench/cli_startup.py).
"""

from __future__ import annotations

import json
import os

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def read_json(name: str):
    """The JSON file kvmem/data/``name`` ("gpus.json", "models/llama-3.1-8b.json")."""
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return json.load(f)


def json_names(folder: str) -> list[str]:
    """The .json files in kvmem/data/``folder``, sorted, without their suffix."""
    return sorted(name[:-5] for name in os.listdir(os.path.join(DATA, folder)) if name.endswith(".json"))


def has_json(name: str) -> bool:
    """Whether kvmem/data/``name`` is a file."""
    return os.path.isfile(os.path.join(DATA, name))
