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
from dataclasses import dataclass

from . import Checkpoint, SourceError, Tensor
from .bounded import MAX_INDEX_BYTES, MAX_SHARDS, confined, quote, read_json_file, read_prefix

__all__ = ["SINGLE_FILE", "INDEX_FILE", "read_header", "tensors_from_header", "checkpoint_from_folder",
           "checkpoint_from_headers"]

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# One header's JSON: about 290,000 tensors (a real shard's header is a few MB at most); parsing 32 MB of
# it peaks near 230 MB of Python objects, within the 500 MB a hostile source may take (issue 20). The
# safetensors crate itself accepts up to 100,000,000 bytes (N_MAX_HEADER_SIZE).
MAX_HEADER_BYTES = 32_000_000


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
            raw = read_prefix(handle, size)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    return parse_header(raw, str(path), size)


def parse_header(raw: bytes, where: str, size: int | None = None) -> dict:
    """The header dict from its N JSON bytes."""
    if size is not None and len(raw) < size:
        raise SourceError(f"{where}: safetensors header truncated ({len(raw):,} of {size:,} bytes)")
    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SourceError(f"{where}: safetensors header is not JSON ({str(exc)[:100]})") from None
    if not isinstance(header, dict):
        raise SourceError(f"{where}: safetensors header must be a JSON object")
    return header


def _no_constant(name: str):
    """JSON's NaN / Infinity are not numbers a header may hold (data_offsets, shape)."""
    raise ValueError(f"{name} is not a number a safetensors header may hold")


def _whole(value) -> int:
    """A non-negative JSON integer (a shape entry, an offset); a bool, float or text is refused."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value >= 1 << 64:
        raise ValueError(value)
    return value


def tensors_from_header(header: dict, where: str) -> list[Tensor]:
    """Every tensor of one header, bytes from its data_offsets (end - begin)."""
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = info["data_offsets"]
            tensor = Tensor(str(name), str(info["dtype"])[:32], tuple(_whole(d) for d in info["shape"]),
                            _whole(end) - _whole(begin))
        except (KeyError, TypeError, ValueError):
            raise SourceError(f"{where}: tensor {quote(name)} needs dtype, shape and data_offsets [begin, end] "
                              f"(non-negative integers), got {quote(info)}") from None
        if tensor.nbytes < 0:
            raise SourceError(f"{where}: tensor {quote(name)} has data_offsets {quote(info['data_offsets'])} "
                              "(end < begin)")
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
    names = set()
    for value in weight_map.values():
        if not isinstance(value, str):
            raise SourceError(f"{where}: weight_map names a shard {quote(value)} that is not a file name")
        names.add(value)
        if len(names) > MAX_SHARDS:
            raise SourceError(f"{where}: weight_map names more than {MAX_SHARDS:,} shards, the most kvmem reads")
    return sorted(names)


def checkpoint_from_folder(folder) -> Checkpoint | None:
    """The checkpoint of a local model folder (model.safetensors, or the index and its shards);
    None when the folder has neither (the formula estimate is then the fallback). Every file
    read is inside the folder: an index entry or a link leading out is refused before opening."""
    folder = str(folder)
    single = confined(folder, SINGLE_FILE, folder)
    index_path = confined(folder, INDEX_FILE, folder)
    if os.path.isfile(index_path):
        shards = shard_names(read_json_file(index_path, MAX_INDEX_BYTES), index_path)
        paths = {s: confined(folder, s, index_path) for s in shards}
        if not all(os.path.isfile(p) for p in paths.values()):
            return None
        headers = {s: read_header(p) for s, p in paths.items()}
        return checkpoint_from_headers(headers, f"safetensors headers of {len(shards)} shards in {folder}")
    if os.path.isfile(single):
        return checkpoint_from_headers({SINGLE_FILE: read_header(single)}, f"safetensors header of {single}")
    return None


@dataclass(frozen=True)
class FolderCheckpoint:
    """A local folder's safetensors headers, read when the weights are asked for (``load``): an
    estimate of the KV cache never reads them."""

    folder: str

    def load(self) -> tuple[Checkpoint | None, str]:
        checkpoint = checkpoint_from_folder(self.folder)     # a bad header of the user's own folder: refused
        return checkpoint, "" if checkpoint is not None else f"{self.folder} has no complete safetensors checkpoint"


def model_from_folder(folder):
    """A Model from a local model folder: its config.json (kvmem.configs) and, when present,
    its safetensors headers (exact weight bytes)."""
    from ..model import Model
    folder = os.path.abspath(os.fspath(folder))
    name = os.path.basename(folder.rstrip(os.sep)) or folder
    model = Model.from_hf_config(confined(folder, "config.json", folder), name=name, source=folder)
    has_weights = any(os.path.isfile(os.path.join(folder, f)) for f in (SINGLE_FILE, INDEX_FILE))
    return model.with_checkpoint(FolderCheckpoint(folder)) if has_weights else model
