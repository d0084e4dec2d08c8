"""Where a model comes from besides the presets: the Hugging Face Hub and its cache, GGUF files,
safetensors checkpoints.

    hub.py          config.json from the local Hugging Face cache, else the Hub (HF_ENDPOINT,
                    HF_TOKEN, HF_HUB_OFFLINE, a revision); safetensors headers; GGUF headers by
                    HTTP range requests. Never weights, never code, never trust_remote_code.
    bounded.py      the one bounded reader: byte budgets, counts checked before allocation,
                    deadlines, file names confined to their snapshot or folder (issue 20)
    http.py         kvmem's own HTTP GET for the Hub: timeouts, a deadline, verified ranges,
                    bounded inflation (docs/sources.md lists every limit)
    gguf.py         the llama.cpp project's ``gguf`` reader, header only: tensor infos -> exact
                    bytes; gguf_config.py maps its metadata to a config.json-shaped dict that
                    kvmem.configs reads like any other
    safetensors.py  the 8-byte length + JSON header of each shard -> exact bytes per tensor

This package's ``__init__`` is standard library only (the typed results below); the modules
that import huggingface_hub or gguf are imported where they are used.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

__all__ = ["SourceError", "DeadlineExceeded", "Tensor", "Checkpoint", "is_gguf", "is_model_folder", "load_checkpoint"]


class SourceError(ValueError):
    """A model that cannot be fetched or read; the message says which case and what to do."""


class DeadlineExceeded(SourceError):
    """An operation ran past its deadline (kvmem.sources.bounded.Deadline): nothing, or not all of
    it, arrived in time. ``what``: the operation, as the message names it."""

    def __init__(self, message: str, *, what: str):
        super().__init__(message)
        self.what = what


@dataclass(frozen=True)
class Tensor:
    """One stored tensor: its name, storage type as the file names it, shape and exact bytes."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def elements(self) -> int:
        n = 1
        for dim in self.shape:
            n *= dim
        return n


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's tensors as its headers list them (safetensors or GGUF): exact weight bytes.

    ``format`` is "safetensors" or "gguf"; ``source`` says where the headers were read.
    """

    format: str
    source: str
    tensors: tuple[Tensor, ...]

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def elements(self) -> int:
        return sum(t.elements for t in self.tensors)

    def bytes_by_dtype(self) -> dict[str, int]:
        """Bytes per storage type, largest first (a q4_K_M GGUF mixes Q4_K, Q6_K and F32)."""
        totals: Counter[str] = Counter()
        for t in self.tensors:
            totals[t.dtype] += t.nbytes
        return dict(totals.most_common())

    def describe(self) -> str:
        kinds = ", ".join(f"{name} {n:,} B" for name, n in self.bytes_by_dtype().items())
        return f"{len(self.tensors)} tensors, {self.total_bytes:,} B ({kinds}) from {self.source}"


def is_gguf(spec) -> bool:
    """True for a path (or remote "org/name/file") ending in .gguf."""
    return isinstance(spec, (str, os.PathLike)) and str(spec).lower().endswith(".gguf")


def is_model_folder(spec) -> bool:
    """True for a local folder holding a config.json (a downloaded or saved model)."""
    return isinstance(spec, (str, os.PathLike)) and os.path.isfile(os.path.join(str(spec), "config.json"))


def load_checkpoint(model) -> tuple[Checkpoint | None, str]:
    """(the model's checkpoint, "") or (None, why not): a Checkpoint it carries, or one deferred
    until asked for (a Hub model's safetensors headers: kvmem.sources.hub.HubCheckpoint)."""
    held = getattr(model, "checkpoint", None)
    if held is None:
        return None, ""
    if isinstance(held, Checkpoint):
        return held, ""
    return held.load()
