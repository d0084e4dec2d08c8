"""GGUF files, header only: llama.cpp's metadata -> a config.json-shaped dict -> kvmem.configs.

A GGUF file (ggml docs/gguf.md) is a header — magic "GGUF", version (2 or 3), tensor and key
counts (u64), the metadata key/values (key string, u32 type, value; strings are a u64 length
and UTF-8 bytes, arrays a u32 item type, a u64 count and the items), one info record per tensor
(name, u32 n_dims, u64 dims, u32 ggml type, u64 offset) — then the tensor data, aligned to
``general.alignment`` (default 32). ``_parse`` reads the header once, front to back, pulling
bytes from its source as it needs them (a file, an upload, HTTP ranges): a remote header is
fetched in growing ranges and never parsed twice; the tensor data is never read.

Budgets (issue 20; kvmem/sources/bounded.py): the header is at most MAX_GGUF_HEADER_BYTES; every
count (keys, tensors, array items, string lengths) is checked against the bytes that could hold
it before anything is allocated; at most MAX_KEYS keys and MAX_TENSORS tensors (llama.cpp writes
~300 keys and ~1,100 tensors for its largest models); an array of more than MAX_KEPT_ITEMS items
(a tokenizer's vocabulary: kvmem reads only its length), or past MAX_KEPT_TOTAL items kept in
all, is walked, not kept: ``Skipped`` holds its type and length (kvmem reads per-layer arrays,
at most 1,024 entries); at most 4 dims per tensor (GGML_MAX_DIMS).

Weight bytes are exact from the tensor infos: elements / block size x type size per tensor
(kvmem.dtypes.GGML_TYPES, the one table of ggml's ``type_traits``); a Q4_K_M file mixes
Q4_K, Q6_K and F32 tensors and each is counted in its own type.

The metadata -> config.json mapping is kvmem/sources/gguf_config.py.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from . import Checkpoint, SourceError, Tensor
from .bounded import MAX_GGUF_HEADER_BYTES, check_count, quote
from .gguf_config import config_from_header

__all__ = ["HeaderTruncated", "GGUFHeader", "Skipped", "read_header", "parse_stream", "header_from_bytes",
           "config_from_header", "header_from_stream", "fields_from_header", "fields_from_gguf",
           "fields_from_gguf_bytes"]

MAX_KEYS = 65_536
MAX_TENSORS = 65_536
MAX_KEPT_ITEMS = 4_096
MAX_KEPT_TOTAL = 1 << 18
_MAX_DIMS = 4                       # ggml.h GGML_MAX_DIMS
_MAX_ARRAY_DEPTH = 16               # arrays of arrays (the spec allows them; real files: none, or one level)
_CHUNK = 1 << 20
# GGUFValueType -> struct format of one item (8 STRING and 9 ARRAY are read by hand)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_MIN_ITEM = {**{t: struct.calcsize(f) for t, f in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}


class HeaderTruncated(Exception):
    """The bytes given end inside the GGUF header: more are needed."""


@dataclass(frozen=True)
class Skipped:
    """A metadata array too long to keep (a tokenizer's vocabulary): its item type and length."""

    item_type: int
    count: int

    def __len__(self) -> int:
        return self.count


class GGUFHeader:
    """A GGUF file's metadata (plain Python values) and tensor infos, with ``header_bytes``."""

    def __init__(self, metadata: dict, tensors: tuple[Tensor, ...], header_bytes: int, source: str):
        self.metadata, self.tensors, self.header_bytes, self.source = metadata, tensors, header_bytes, source

    @property
    def arch(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def checkpoint(self) -> Checkpoint:
        return Checkpoint("gguf", f"GGUF header of {self.source}", self.tensors)


class _Source:
    """Bytes pulled from ``stream`` on demand, at most ``limit`` of them in all."""

    def __init__(self, stream, limit: int, where: str):
        self.stream, self.limit, self.where = stream, limit, where
        self.buf, self.at, self.base = b"", 0, 0        # buffered bytes, position in them, file offset of buf[0]
        self.kept = 0                                   # array items kept so far (MAX_KEPT_TOTAL)

    @property
    def pos(self) -> int:
        return self.base + self.at

    def left(self) -> int:
        return self.limit - self.pos

    def take(self, n: int) -> bytes:
        while self.at + n > len(self.buf):
            self._pull(self.at + n - len(self.buf))
        out = self.buf[self.at:self.at + n]
        self.at += n
        return out

    def _pull(self, need: int) -> None:
        have = self.base + len(self.buf)
        if have + need > self.limit:
            if self.limit >= MAX_GGUF_HEADER_BYTES:
                raise SourceError(f"{self.where}: the GGUF header is longer than {MAX_GGUF_HEADER_BYTES:,} bytes, "
                                  "the most kvmem reads (a corrupt or hostile file)")
            raise HeaderTruncated(have + need)
        want = max(need, min(max(have, 1 << 16), _CHUNK))      # 64 KiB, then as much again, up to 1 MiB
        chunk = self.stream.read(min(want, self.limit - have))
        if not chunk:
            raise HeaderTruncated(have + need)
        self.base += self.at
        self.buf, self.at = self.buf[self.at:] + chunk, 0

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]


def _string(src: _Source, what: str) -> str:
    n = src.unpack("Q")
    if n > src.left():
        raise SourceError(f"{src.where}: {what} claims a string of {n:,} bytes, past the header's end")
    try:
        return src.take(n).decode("utf-8")
    except UnicodeDecodeError:
        raise SourceError(f"{src.where}: {what} is not UTF-8 text") from None


def _value(src: _Source, vtype: int, key: str):
    if vtype in _SCALARS:
        return src.unpack(_SCALARS[vtype])
    if vtype == _STRING:
        return _string(src, f"metadata {quote(key)}")
    if vtype != _ARRAY:
        raise SourceError(f"{src.where}: metadata {quote(key)} has value type {vtype}, not a GGUF type")
    return _array(src, key, 1, hold=True)


def _array(src: _Source, key: str, depth: int, *, hold: bool):
    """An array value: its item type, count and items. The GGUF spec lets an item be an array
    itself (gguf-py's GGUFReader reads them so); each nested array is read the same way, its items
    kept only while the kept-item bounds allow (``hold``), else walked and left as Skipped.
    Nesting past _MAX_ARRAY_DEPTH is refused (the byte bounds alone would allow millions of levels)."""
    if depth > _MAX_ARRAY_DEPTH:
        raise SourceError(f"{src.where}: metadata {quote(key)} nests arrays more than {_MAX_ARRAY_DEPTH} deep, "
                          "the most kvmem reads")
    item_type, count = src.unpack("I"), src.unpack("Q")
    if item_type not in _MIN_ITEM:
        raise SourceError(f"{src.where}: metadata {quote(key)} is an array of type {item_type}, not a GGUF type")
    check_count(count, _MIN_ITEM[item_type], src.left(), f"{src.where}: metadata array {quote(key)}")
    keep = hold and count <= MAX_KEPT_ITEMS and src.kept + count <= MAX_KEPT_TOTAL
    src.kept += count if keep else 0
    if item_type == _ARRAY:
        if keep:
            return [_array(src, key, depth + 1, hold=True) for _ in range(count)]
        for _ in range(count):                # walked, never held
            _array(src, key, depth + 1, hold=False)
        return Skipped(item_type, count)
    if item_type in _SCALARS:
        fmt = _SCALARS[item_type]
        size = struct.calcsize(fmt) * count
        if not keep:
            while size:                       # walked in chunks, never held
                size -= len(src.take(min(size, _CHUNK)))
            return Skipped(item_type, count)
        return list(struct.unpack(f"<{count}{fmt}", src.take(size)))
    if not keep:
        for _ in range(count):
            n = src.unpack("Q")
            if n > src.left():
                raise SourceError(f"{src.where}: metadata array {quote(key)} claims a string of {n:,} bytes")
            src.take(n)
        return Skipped(item_type, count)
    return [_string(src, f"metadata array {quote(key)}") for _ in range(count)]


def _tensor(src: _Source, sizes: dict) -> Tensor:
    name = _string(src, "a tensor name")
    n_dims = src.unpack("I")
    if not 1 <= n_dims <= _MAX_DIMS:
        raise SourceError(f"{src.where}: tensor {quote(name)} has {n_dims} dims; GGUF allows 1 to {_MAX_DIMS}")
    shape = tuple(src.unpack("Q") for _ in range(n_dims))
    raw_type = src.unpack("I")
    src.unpack("Q")                                          # offset into the data: unused
    if raw_type not in sizes:
        raise SourceError(f"{src.where}: tensor {quote(name)} has ggml type {raw_type}, not one the gguf "
                          "package knows")
    type_name, (block, type_size) = sizes[raw_type]
    elements = 1
    for d in shape:
        elements *= d
    if elements % block:
        raise SourceError(f"{src.where}: GGUF tensor {quote(name)}: {elements} elements are not whole "
                          f"{type_name} blocks of {block}")
    return Tensor(name, type_name, shape, elements // block * type_size)


def _quant_sizes() -> dict:
    """ggml type id -> (name, (block, bytes)): kvmem's one table of ggml's types (kvmem.dtypes.GGML_TYPES,
    checked against ggml's own type_traits; gguf-py's GGML_QUANT_SIZES gives Q8_1 40 bytes, ggml 36)."""
    from ..dtypes import GGML_TYPES
    return {t.id: (t.name.upper(), (t.block, t.size)) for t in GGML_TYPES.values()}


def parse_stream(stream, source: str, limit: int = MAX_GGUF_HEADER_BYTES) -> GGUFHeader:
    """The header, read once from ``stream``; HeaderTruncated when the stream ends inside it."""
    src = _Source(stream, min(limit, MAX_GGUF_HEADER_BYTES), source)
    if src.take(4) != b"GGUF":
        raise SourceError(f"{source}: not a GGUF file (it does not start with the magic 'GGUF')")
    version = src.unpack("I")
    if version not in (2, 3):
        raise SourceError(f"{source}: GGUF version {version} is not read (2 and 3 are; a big-endian file "
                          "shows a byte-swapped version)")
    n_tensors, n_kv = src.unpack("Q"), src.unpack("Q")
    for count, most, what in ((n_kv, MAX_KEYS, "metadata keys"), (n_tensors, MAX_TENSORS, "tensors")):
        if count > most:
            raise SourceError(f"{source}: the GGUF header claims {count:,} {what}; kvmem reads at most {most:,}")
    check_count(n_kv * 13 + n_tensors * 24, 1, src.left(), f"{source}: {n_kv:,} keys and {n_tensors:,} tensors")
    metadata = {}
    for _ in range(n_kv):
        key = _string(src, "a metadata key")
        metadata[key] = _value(src, src.unpack("I"), key)
    sizes = _quant_sizes()
    tensors = tuple(_tensor(src, sizes) for _ in range(n_tensors))
    alignment = metadata.get("general.alignment", 32)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or not 1 <= alignment <= 1 << 20:
        raise SourceError(f"{source}: general.alignment is {quote(alignment)}, not a whole number of bytes")
    offset = src.pos
    return GGUFHeader(metadata, tensors, offset + (-offset) % alignment, source)


def read_header(path) -> GGUFHeader:
    """The header of a local .gguf file (its first bytes only; a file cut short after its header
    reads the same)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SourceError(f"GGUF file {quote(path)} does not exist")
    try:
        with open(path, "rb") as handle:
            return parse_stream(handle, os.path.basename(path), os.fstat(handle.fileno()).st_size)
    except HeaderTruncated:
        raise SourceError(f"{path}: the file ends inside its GGUF header (incomplete download?)") from None
    except OSError as exc:
        raise SourceError(f"cannot read {quote(path)}: {exc.strerror}") from None


def header_from_bytes(prefix: bytes, source: str) -> GGUFHeader:
    """The header from the first bytes of a file; HeaderTruncated when they end inside it."""
    import io
    return parse_stream(io.BytesIO(prefix), source)


def fields_from_header(header: GGUFHeader, *, name: str) -> dict:
    """A kvmem Model's keyword arguments from a GGUF header: its config through kvmem.configs, exact
    weights attached (``kvmem.Model(**fields)``; kvmem.Model.from_gguf builds it from a file)."""
    from ..configs import ConfigError, model_fields
    cfg = config_from_header(header)
    try:
        fields = model_fields(cfg, name=name, source=f"GGUF header of {header.source}")
    except ConfigError as exc:
        raise SourceError(f"{header.source}: {exc}") from None
    return {**fields, "checkpoint": header.checkpoint()}


def header_from_stream(stream, source: str) -> GGUFHeader:
    """The header from a readable binary stream (an upload, an HTTP body), read once, front to
    back: only the header's bytes (and at most one more 1 MiB chunk) are read."""
    try:
        return parse_stream(stream, source)
    except HeaderTruncated:
        raise SourceError(f"{source}: the bytes given end inside the GGUF header; give more of the file (the "
                          "header of an 8B model with its tokenizer is about 6 MB)") from None


def fields_from_gguf_bytes(data, *, name: str) -> dict:
    """A Model's keyword arguments from a GGUF file's first bytes (bytes, or a binary stream such as an upload)."""
    import io
    stream = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    return fields_from_header(header_from_stream(stream, name), name=name.removesuffix(".gguf"))


def fields_from_gguf(path) -> dict:
    """A Model's keyword arguments from a local .gguf file's header (kvmem.Model.from_gguf)."""
    header = read_header(path)
    return fields_from_header(header, name=os.path.basename(os.fspath(path)).removesuffix(".gguf"))
