"""Exact weight bytes from safetensors headers, without reading a tensor.

The format (https://huggingface.co/docs/safetensors/index#format): 8 bytes, a little-endian
u64 N, then N bytes of JSON: ``{"name": {"dtype": "BF16", "shape": [...], "data_offsets":
[begin, end]}, ..., "__metadata__": {...}}``. A tensor's bytes are ``end - begin`` exactly,
whatever its dtype (sub-byte and packed formats included: AWQ/GPTQ store I32 qweights and F16
scales, fp8 checkpoints F8_E4M3 with F32 scales, MXFP4 U8 blocks and scales). A sharded
checkpoint lists its shards in ``model.safetensors.index.json`` ("weight_map": tensor -> file).

Standard library only: the header is read with ``struct`` and ``json``; the ``safetensors``
package writes the test fixtures.
"""

from __future__ import annotations

import json
import os
import struct

from . import Checkpoint, SourceError, Tensor

__all__ = ["SINGLE_FILE", "INDEX_FILE", "read_header", "tensors_from_header", "checkpoint_from_folder",
           "checkpoint_from_headers"]

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100_000_000   # the safetensors crate refuses larger headers (N_MAX_HEADER_SIZE)


def read_header(path) -> dict:
    """The JSON header of one safetensors file (the first 8 + N bytes; no tensor is read)."""
    try:
        with open(path, "rb") as handle:
            size_bytes = handle.read(8)
            if len(size_bytes) < 8:
                raise SourceError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
            (size,) = struct.unpack("<Q", size_bytes)
            if size > MAX_HEADER_BYTES:
                raise SourceError(f"{path}: safetensors header length {size:,} exceeds {MAX_HEADER_BYTES:,} bytes")
            raw = handle.read(size)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    return parse_header(raw, str(path), size)


def parse_header(raw: bytes, where: str, size: int | None = None) -> dict:
    """The header dict from its N JSON bytes."""
    if size is not None and len(raw) < size:
        raise SourceError(f"{where}: safetensors header truncated ({len(raw):,} of {size:,} bytes)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(f"{where}: safetensors header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise SourceError(f"{where}: safetensors header must be a JSON object")
    return header


def tensors_from_header(header: dict, where: str) -> list[Tensor]:
    """Every tensor of one header, bytes from its data_offsets (end - begin)."""
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = info["data_offsets"]
            tensor = Tensor(name, str(info["dtype"]), tuple(int(d) for d in info["shape"]), int(end) - int(begin))
        except (KeyError, TypeError, ValueError):
            raise SourceError(f"{where}: tensor {name!r} needs dtype, shape and data_offsets [begin, end], "
                              f"got {info!r}") from None
        if tensor.nbytes < 0:
            raise SourceError(f"{where}: tensor {name!r} has data_offsets {info['data_offsets']} (end < begin)")
        tensors.append(tensor)
    return tensors


def checkpoint_from_headers(headers: dict[str, dict], source: str) -> Checkpoint:
    """A Checkpoint from each shard's header (file name -> header dict)."""
    tensors = []
    for shard in sorted(headers):
        tensors += tensors_from_header(headers[shard], shard)
    return Checkpoint("safetensors", source, tuple(tensors))


def shard_names(index: dict, where: str) -> list[str]:
    """The shard files a model.safetensors.index.json names, sorted."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise SourceError(f"{where}: {INDEX_FILE} has no weight_map")
    return sorted(set(map(str, weight_map.values())))


def checkpoint_from_folder(folder) -> Checkpoint | None:
    """The checkpoint of a local model folder (model.safetensors, or the index and its shards);
    None when the folder has neither (the formula estimate is then the fallback)."""
    folder = str(folder)
    single, index_path = os.path.join(folder, SINGLE_FILE), os.path.join(folder, INDEX_FILE)
    if os.path.isfile(index_path):
        with open(index_path, encoding="utf-8") as handle:
            index = json.load(handle)
        shards = shard_names(index, index_path)
        missing = [s for s in shards if not os.path.isfile(os.path.join(folder, s))]
        if missing:
            return None
        headers = {s: read_header(os.path.join(folder, s)) for s in shards}
        return checkpoint_from_headers(headers, f"safetensors headers of {len(shards)} shards in {folder}")
    if os.path.isfile(single):
        return checkpoint_from_headers({SINGLE_FILE: read_header(single)}, f"safetensors header of {single}")
    return None


def model_from_folder(folder):
    """A Model from a local model folder: its config.json (kvmem.configs) and, when present,
    its safetensors headers (exact weight bytes)."""
    from ..configs import model_from_config
    folder = os.path.abspath(os.fspath(folder))
    name = os.path.basename(folder.rstrip(os.sep)) or folder
    model = model_from_config(os.path.join(folder, "config.json"), name=name, source=folder)
    checkpoint = checkpoint_from_folder(folder)
    return model.with_checkpoint(checkpoint) if checkpoint is not None else model
