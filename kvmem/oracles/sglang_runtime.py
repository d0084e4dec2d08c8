"""SGLang 0.5.23 imported for the oracles (kvmem/oracles/sglang.py, sglang_families.py), once: with an
inert torchvision stand-in (sglang.py says why) and its memory pool's log lines captured."""

from __future__ import annotations

import enum
import functools
import importlib.machinery
import json
import logging
import os
import sys
import tempfile
import types

__all__ = ["load", "config_dir"]


def _torchvision_stand_in() -> None:
    if "torchvision" in sys.modules:
        return
    import transformers.utils.import_utils as hf_imports
    hf_imports.is_torchvision_available()   # cached False before the stand-in exists

    class InterpolationMode(enum.Enum):
        NEAREST = "nearest"
        BILINEAR = "bilinear"
        BICUBIC = "bicubic"

    package = types.ModuleType("torchvision")
    package.__path__ = []
    package.__spec__ = importlib.machinery.ModuleSpec("torchvision", None)
    transforms = types.ModuleType("torchvision.transforms")
    transforms.__path__ = []
    functional = types.ModuleType("torchvision.transforms.functional")
    functional.InterpolationMode = transforms.InterpolationMode = InterpolationMode
    transforms.functional, package.transforms = functional, transforms
    sys.modules.update({"torchvision": package, "torchvision.transforms": transforms,
                        "torchvision.transforms.functional": functional})


@functools.cache
def load():
    _torchvision_stand_in()
    import sglang
    import torch
    from sglang.srt.mem_cache import memory_pool
    lines = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = logging.getLogger(memory_pool.__name__)
    logger.addHandler(Capture())
    logger.setLevel(logging.INFO)
    return types.SimpleNamespace(torch=torch, sglang=sglang, pool=memory_pool, lines=lines)


def config_dir(cfg: dict) -> str:
    """A fresh folder holding ``cfg`` as config.json (its quantization_config left out), for SGLang's model_path."""
    path = tempfile.mkdtemp(prefix="kvmem-sglang-dp-")
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({k: v for k, v in cfg.items() if k != "quantization_config"}, f)
    return path
