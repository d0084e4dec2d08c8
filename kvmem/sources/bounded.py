"""Every byte from outside, bounded: files, uploads and HTTP bodies go through this module.

Rules (issue 20, "hostile model sources"):

- a read has a byte budget and refuses, naming the file and the unit, one byte past it
  (``read_at_most``); a count read from a file is checked against the bytes that could hold it
  before anything of that size is allocated (``check_count``);
- an operation has a deadline (``Deadline``); a read past it is refused, naming what it waited for;
- a file name that comes from a repository or a folder (an index entry, a GGUF name) resolves
  inside that repository's snapshot or that folder, else it is refused before it is opened
  (``confined``): no absolute path, no ``..``, no symlink out;
- a message quotes at most ``QUOTE_CHARS`` characters of the input (``quote``);
- a text input (a log file or standard input, a report) is read by ``read_text``: a regular
  file (never a FIFO, device or directory; a pipe or a terminal on standard input), at most a
  byte budget, within a time bound; a JSON document from outside is parsed by ``parse_json``
  with a depth and an item bound besides its size.

The limits are the module's constants; docs/sources.md lists them and where each applies.
Standard library only.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass

from . import DeadlineExceeded, SourceError

__all__ = ["MAX_JSON_BYTES", "MAX_INDEX_BYTES", "MAX_SHARDS", "MAX_GGUF_HEADER_BYTES", "QUOTE_CHARS",
           "MAX_LOG_BYTES", "MAX_REPORT_BYTES", "TEXT_SECONDS", "MAX_JSON_DEPTH", "MAX_JSON_ITEMS",
           "Deadline", "quote", "check_count", "read_at_most", "read_prefix", "read_json_file", "read_text",
           "parse_json", "check_shape", "file_kind", "plain_name", "confined"]

MAX_JSON_BYTES = 10_000_000          # a config.json (real ones: a few KB; Phi-3.5's 7 KB)
MAX_INDEX_BYTES = 100_000_000        # a model.safetensors.index.json (DeepSeek-V3's: 9 MB)
MAX_SHARDS = 2_000                   # shards one index may name (the largest real checkpoints: ~200)
MAX_GGUF_HEADER_BYTES = 64 << 20     # a GGUF header (an 8B model with its tokenizer: ~6 MB; 262k-vocab Gemma: ~12 MB)
QUOTE_CHARS = 100                    # the most of an input a message repeats
MAX_LOG_BYTES = 16 << 20             # a startup log (vLLM's with a debug level: ~2 MB; most a few hundred KB)
MAX_REPORT_BYTES = 10_000_000        # a kvmem report (JSON; with a model's config.json: ~30 KB)
TEXT_SECONDS = 60.0                  # the time a text input (a file, standard input) may take to arrive
MAX_JSON_DEPTH = 64                  # nesting of a JSON document from outside (a report's own: 7)
MAX_JSON_ITEMS = 200_000             # keys and list items of such a document, together
_CHUNK = 1 << 16


def quote(value, limit: int = QUOTE_CHARS) -> str:
    """repr(value), cut to ``limit`` characters with the length said when longer."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


@dataclass(frozen=True)
class Deadline:
    """The moment (time.monotonic) an operation must end by, and what it is, for the message."""

    at: float
    what: str
    hint: str = "retry later, or set KVMEM_HUB_TIMEOUT (seconds) higher"

    @classmethod
    def after(cls, seconds: float, what: str, hint: str | None = None) -> Deadline:
        return cls(time.monotonic() + seconds, what, *(() if hint is None else (hint,)))

    def left(self) -> float:
        """Seconds left; DeadlineExceeded once none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(f"{self.what}: gave up after the deadline (no answer in time); {self.hint}",
                                   what=self.what)
        return left


def check_count(count: int, item_bytes: int, available: int, what: str) -> int:
    """``count`` items of at least ``item_bytes`` each must fit in the ``available`` bytes that
    could hold them; checked before a list of ``count`` items is allocated."""
    if count < 0 or count * item_bytes > available:
        raise SourceError(f"{what}: {count:,} entries of at least {item_bytes} bytes cannot fit in the "
                          f"{max(available, 0):,} bytes left (a corrupt or hostile file)")
    return count


def read_at_most(stream, limit: int, what: str, deadline: Deadline | None = None, wait=None) -> bytes:
    """All of ``stream`` (a binary file, an upload, an HTTP body), refused one byte past ``limit``;
    ``wait()`` (if given) runs before each read, e.g. to wait for a pipe's data until a deadline."""
    parts: list[bytes] = []
    size = 0
    while True:
        if deadline is not None:
            deadline.left()
        if wait is not None:
            wait()
        chunk = _read_some(stream, min(_CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > limit:
            raise SourceError(f"{what} is over {limit:,} bytes, the most kvmem reads of it")
        parts.append(chunk)


def read_prefix(stream, n: int, deadline: Deadline | None = None) -> bytes:
    """The next ``n`` bytes of ``stream`` (fewer where it ends), read in chunks: never more."""
    parts, size = [], 0
    while size < n:
        if deadline is not None:
            deadline.left()
        chunk = _read_some(stream, min(_CHUNK, n - size))
        if not chunk:
            break
        size += len(chunk)
        parts.append(chunk)
    return b"".join(parts)


def _read_some(stream, n: int) -> bytes:
    read1 = getattr(stream, "read1", None)
    return read1(n) if read1 is not None else stream.read(n)


def read_json_file(path, limit: int, what: str | None = None):
    """A JSON file of at most ``limit`` bytes, parsed; errors name the file."""
    import json
    what = what or os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = read_at_most(handle, limit, what)
    except OSError as exc:
        raise SourceError(f"cannot read {what}: {exc.strerror}") from None
    try:
        return json.loads(raw.decode("utf-8"), parse_int=_json_int, parse_constant=_json_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SourceError(f"{what} is not valid JSON: {str(exc)[:QUOTE_CHARS]}") from None


def _json_int(text: str) -> int:
    """A JSON integer of at most 30 digits (Python's own refusal past 4,300 names no field)."""
    if len(text) > 30:
        raise ValueError(f"a {len(text):,}-digit number")
    return int(text)


def _json_constant(name: str):
    raise ValueError(f"{name} is not a number kvmem reads")


def read_text(source, limit: int, what: str, seconds: float = TEXT_SECONDS) -> str:
    """The text of ``source`` (a path, or a binary stream such as ``sys.stdin.buffer``) as UTF-8
    (undecodable bytes replaced), refused by name: a path that is not a regular file (a FIFO, a
    device, a directory, a link to one), a stream that is not a pipe, socket, terminal or regular
    file, more than ``limit`` bytes, or not all of it within ``seconds``."""
    deadline = Deadline.after(seconds, what, f"kvmem waits {seconds:g} s for a text input; save it to a file first")
    if isinstance(source, (str, bytes, os.PathLike)):
        return _read_path(source, limit, what, deadline).decode("utf-8", errors="replace")
    fd = _fileno(source)
    if fd is not None:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
            raise SourceError(f"{what} is {file_kind(mode)}, not a file or a pipe; kvmem reads a text from those only")
    return _read_waiting(source, fd, limit, what, deadline, seconds).decode("utf-8", errors="replace")


def _read_path(path, limit: int, what: str, deadline: Deadline) -> bytes:
    try:
        mode = os.stat(path).st_mode       # before opening: opening a FIFO blocks, a device may act
        if not stat.S_ISREG(mode):
            raise SourceError(f"{what} is {file_kind(mode)}, not a regular file; kvmem reads text from files only")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SourceError(f"cannot read {what}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode        # what was opened (it may have been swapped since the stat)
        if not stat.S_ISREG(mode):
            raise SourceError(f"{what} is {file_kind(mode)}, not a regular file; kvmem reads text from files only")
        return read_at_most(handle, limit, what, deadline)


def file_kind(mode: int) -> str:
    """What a file of ``mode`` (st_mode) is, for a message: "a directory", "a FIFO", ..."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


_kind = file_kind        # the name kvmem.sources.hub imported first; file_kind is the public one


def _fileno(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):   # io.BytesIO and friends: no descriptor
        return None


def _read_waiting(stream, fd: int | None, limit: int, what: str, deadline: Deadline, seconds: float) -> bytes:
    """read_at_most of a stream whose reads may block (a pipe, a terminal): each read waits for
    data at most until the deadline (select, where the platform has it for this descriptor)."""
    import select

    def ready() -> None:
        if fd is not None and os.name == "posix" and not select.select([fd], [], [], deadline.left())[0]:
            raise DeadlineExceeded(f"{what}: not all of it arrived within {seconds:g} s (a writer that never "
                                   "ends or never writes); save it to a file first", what=what)
    return read_at_most(stream, limit, what, deadline, wait=ready)


def parse_json(text, what: str, *, limit: int, depth: int = MAX_JSON_DEPTH, items: int = MAX_JSON_ITEMS):
    """A JSON document from outside, parsed: at most ``limit`` bytes (UTF-8; a leading BOM is
    allowed), ``depth`` levels of nesting and ``items`` keys and list items in all; numbers of at
    most 30 digits, no NaN or Infinity. Refused with a SourceError naming ``what`` otherwise."""
    import json
    if isinstance(text, (bytes, bytearray)):
        if len(text) > limit:
            raise SourceError(f"{what} is over {limit:,} bytes, the most kvmem reads of it")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SourceError(f"{what} is not UTF-8 text: {str(exc)[:QUOTE_CHARS]}") from None
    if len(text) > limit or len(text.encode("utf-8", errors="replace")) > limit:
        raise SourceError(f"{what} is over {limit:,} bytes, the most kvmem reads of it")
    text = text.removeprefix("\ufeff")
    try:
        data = json.loads(text, parse_int=_json_int, parse_constant=_json_constant)
    except RecursionError:                 # the parser's own bound (Python's recursion limit), far past ours
        raise SourceError(f"{what} is nested deeper than {depth} levels; kvmem reads at most {depth}") from None
    except ValueError as exc:
        raise SourceError(f"{what} is not valid JSON: {str(exc)[:QUOTE_CHARS]}") from None
    check_shape(data, what, depth, items)
    return data


def check_shape(data, what: str, depth: int, items: int) -> None:
    """A parsed document's nesting (at most ``depth``) and its keys and list items (at most
    ``items`` in all), walked without recursion."""
    count, todo = 0, [(data, 0)]
    while todo:
        value, level = todo.pop()
        if isinstance(value, (dict, list)):
            if level >= depth:
                raise SourceError(f"{what} is nested deeper than {depth} levels; kvmem reads at most {depth}")
            count += len(value)
            if count > items:
                raise SourceError(f"{what} has over {items:,} keys and list items; kvmem reads at most that many")
            todo.extend((v, level + 1) for v in (value.values() if isinstance(value, dict) else value))


def plain_name(name, what: str) -> str:
    """``name`` when it is a plain relative file name ("a/b.json"): no absolute path, no empty,
    "." or ".." part, no backslash or NUL; refused by name otherwise."""
    if not isinstance(name, str) or not name or "\0" in name or "\\" in name or len(name) > 1000:
        raise SourceError(f"{what}: file name {quote(name)} is not a plain relative path inside the repository")
    parts = name.split("/")
    if name.startswith("/") or os.path.isabs(name) or any(p in ("", ".", "..") for p in parts):
        raise SourceError(f"{what}: file name {quote(name)} leads outside the repository (absolute, empty "
                          "or '..' parts); kvmem reads only files inside it")
    return name


def confined(root, name, what: str) -> str:
    """The path of ``name`` inside the folder ``root``: refused, before anything opens it, when it
    is not a plain relative name or when it (or a symlink on the way) leads outside ``root``."""
    parts = plain_name(name, what).split("/")
    root = os.path.realpath(os.fspath(root))
    path = os.path.join(root, *parts)
    real = os.path.realpath(path)
    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
        if not _inside_hf_blobs(root, real):
            raise SourceError(f"{what}: {quote(name)} is a link to {quote(real)}, outside {quote(root)}; "
                              "kvmem reads only files inside the folder")
    return path


def _inside_hf_blobs(snapshot: str, real: str) -> bool:
    """huggingface_hub's cache links snapshots/<commit>/<file> to ../../blobs/<hash>: a file of the
    same repository folder (models--org--name/blobs), so inside the snapshot's repository."""
    parent = os.path.dirname(snapshot)
    if os.path.basename(parent) != "snapshots":
        return False
    blobs = os.path.join(os.path.dirname(parent), "blobs") + os.sep
    return real.startswith(blobs) and os.sep not in real[len(blobs):]
