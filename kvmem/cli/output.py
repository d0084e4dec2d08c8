"""``--output FILE`` of ``kvmem sweep`` and ``kvmem report``: a new regular file, never written through a
symbolic link; an existing file only with ``--force`` (issue 32: they followed links and overwrote
silently). Checked before the work starts (``check_output``) and again, race-free, when the file is
opened (``open_output``: O_EXCL for a new file, O_NOFOLLOW and a regular-file check for --force)."""

from __future__ import annotations

import os
import stat

from ..sources.bounded import quote

__all__ = ["check_output", "open_output", "add_output_arguments"]


def add_output_arguments(parser) -> None:
    parser.add_argument("--output", default=None, help="write to this new file (default: standard output); never "
                                                       "through a symbolic link")
    parser.add_argument("--force", action="store_true", help="overwrite --output when it exists (a regular file)")


def check_output(path: str, force: bool) -> None:
    """Refuse ``path`` as --output before any work: a link, not a regular file, or existing without --force."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ValueError(f"--output {quote(path)}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        raise ValueError(f"--output {quote(path)} is a symbolic link; kvmem does not write through one "
                         "(name the file itself)")
    if not stat.S_ISREG(mode):
        raise ValueError(f"--output {quote(path)} exists and is not a regular file; kvmem writes only regular files")
    if not force:
        raise ValueError(f"--output {quote(path)} exists; add --force to overwrite it")


def open_output(path: str, force: bool, *, binary: bool = False):
    """``path`` opened for writing under check_output's rules, as a file object (text: UTF-8)."""
    check_output(path, force)
    flags = (os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    flags |= os.O_TRUNC if force else os.O_EXCL      # without --force, a file created since the check: refused
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        raise ValueError(f"--output {quote(path)} exists; add --force to overwrite it") from None
    except OSError as exc:      # ELOOP: a link put there since the check; ENXIO: a FIFO with no reader
        raise ValueError(f"--output {quote(path)}: {exc.strerror}; kvmem writes only a regular file, never "
                         "through a symbolic link") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"--output {quote(path)} is not a regular file; kvmem writes only regular files")
    return os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
