"""GGUF files, header only: llama.cpp's metadata -> a config.json-shaped dict -> kvmem.configs.

A GGUF file (ggml docs/gguf.md) is a header — magic, version, tensor and key counts, the
metadata key/values, one info record per tensor (name, dims, ggml type, offset) — then the
aligned tensor data. The llama.cpp project's ``gguf`` reader (PyPI ``gguf``) parses it;
``_HeaderReader`` keeps its parsing and replaces the two steps that would touch tensor data:
it never builds the data views, and a read past the bytes it was given raises
``HeaderTruncated`` (so a remote header is fetched by range requests until it parses).

Weight bytes are exact from the tensor infos: elements / block size x type size per tensor
(``gguf.GGML_QUANT_SIZES``, the table of ggml's ``ggml_type_traits``); a Q4_K_M file mixes
Q4_K, Q6_K and F32 tensors and each is counted in its own type.

The metadata -> config.json mapping is kvmem/sources/gguf_config.py.
"""

from __future__ import annotations

import os
import tempfile

from . import Checkpoint, SourceError, Tensor
from .gguf_config import config_from_header

__all__ = ["HeaderTruncated", "GGUFHeader", "read_header", "header_from_bytes", "config_from_header",
           "header_from_stream", "model_from_header", "model_from_gguf", "model_from_gguf_bytes"]


class HeaderTruncated(Exception):
    """The bytes given end inside the GGUF header: more are needed."""


class GGUFHeader:
    """A GGUF file's metadata (plain Python values) and tensor infos, with ``header_bytes``."""

    def __init__(self, metadata: dict, tensors: tuple[Tensor, ...], header_bytes: int, source: str):
        self.metadata, self.tensors, self.header_bytes, self.source = metadata, tensors, header_bytes, source

    @property
    def arch(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def checkpoint(self) -> Checkpoint:
        return Checkpoint("gguf", f"GGUF header of {self.source}", self.tensors)


def _reader_class():
    import gguf
    import numpy as np

    class _HeaderReader(gguf.GGUFReader):
        """gguf.GGUFReader (gguf==0.19.0) that reads the header only."""

        def _get(self, offset, dtype, count=1, override_order=None):
            end = int(offset) + int(np.empty([], dtype=dtype).itemsize) * int(count)
            if end > len(self.data):
                raise HeaderTruncated(end)
            return super()._get(offset, dtype, count, override_order)

        def _build_tensors(self, _start_offs, fields):   # GGUFReader's signature; offsets unused here
            infos = []
            for field in fields:
                _len, name_data, _n_dims, dims, raw_type, _offset = field.parts
                ggml_type = gguf.GGMLQuantizationType(int(raw_type[0]))
                shape = tuple(int(d) for d in dims)
                elements = 1
                for d in shape:
                    elements *= d
                block, type_size = gguf.GGML_QUANT_SIZES[ggml_type]
                if elements % block:
                    raise SourceError(f"GGUF tensor {bytes(name_data).decode()!r}: {elements} elements are not "
                                      f"whole {ggml_type.name} blocks of {block}")
                infos.append(Tensor(bytes(name_data).decode("utf-8"), ggml_type.name, shape,
                                    elements // block * type_size))
            self.tensor_infos = tuple(infos)
            self.tensors = []

    return _HeaderReader


def _plain(field):
    value = field.contents()
    if hasattr(value, "item"):
        value = value.item()
    return value


def _parse(path: str, source: str) -> GGUFHeader:
    reader_class = _reader_class()
    try:
        reader = reader_class(path)
    except HeaderTruncated:
        raise
    except (ValueError, KeyError, IndexError) as exc:
        raise SourceError(f"{source}: not a GGUF file the gguf reader can parse ({exc})") from None
    metadata = {name: _plain(field) for name, field in reader.fields.items()}
    return GGUFHeader(metadata, reader.tensor_infos, int(reader.data_offset), source)


def read_header(path) -> GGUFHeader:
    """The header of a local .gguf file. The reader memory-maps the file and touches only the
    header's pages; a file cut short after its header reads the same."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SourceError(f"GGUF file {path!r} does not exist")
    try:
        return _parse(path, os.path.basename(path))
    except HeaderTruncated:
        raise SourceError(f"{path}: the file ends inside its GGUF header (incomplete download?)") from None


def header_from_bytes(prefix: bytes, source: str) -> GGUFHeader:
    """The header from the first bytes of a file; HeaderTruncated when they end inside it."""
    with tempfile.NamedTemporaryFile(suffix=".gguf") as handle:
        handle.write(prefix)
        handle.flush()
        return _parse(handle.name, source)


def model_from_header(header: GGUFHeader, *, name: str):
    """A kvmem Model from a GGUF header: its config through kvmem.configs, exact weights attached."""
    from ..configs import ConfigError, model_from_config
    cfg = config_from_header(header)
    try:
        model = model_from_config(cfg, name=name, source=f"GGUF header of {header.source}")
    except ConfigError as exc:
        raise SourceError(f"{header.source}: {exc}") from None
    return model.with_checkpoint(header.checkpoint())


def header_from_stream(stream, source: str, *, first: int = 1 << 16) -> GGUFHeader:
    """The header from a readable binary stream (an upload), reading 64 KiB, then as much again,
    until it parses: only the header's bytes (at most twice them) are read."""
    data, want = b"", first
    while True:
        chunk = stream.read(want - len(data))
        data += chunk
        try:
            return header_from_bytes(data, source)
        except HeaderTruncated:
            if len(data) < want:
                raise SourceError(f"{source}: the {len(data):,} bytes given end inside the GGUF header; give more "
                                  "of the file (the header of an 8B model with its tokenizer is about 6 MB)") from None
            want *= 2


def model_from_gguf_bytes(data, *, name: str):
    """A Model from a GGUF file's first bytes (bytes, or a binary stream such as an upload)."""
    import io
    stream = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    return model_from_header(header_from_stream(stream, name), name=name.removesuffix(".gguf"))


def model_from_gguf(path):
    """A Model from a local .gguf file's header (kvmem.Model.from_gguf)."""
    header = read_header(path)
    return model_from_header(header, name=os.path.basename(os.fspath(path)).removesuffix(".gguf"))
