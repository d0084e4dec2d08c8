"""One measurement at a time per process, admitted against the memory the process may use.

Why: the torch profiler that ``kvmem.measure`` runs on CPU is not safe to run from two
threads at once -- two Streamlit sessions measuring together crashed the server with a
segfault in libtorch_cpu.so, inside the profiler's ``__exit__`` -- and a cold server
importing transformers from two threads at once raised ``ImportError: cannot import name
'CONFIG_MAPPING'``. So every measurement (imports included) runs under one process-wide
lock, in arrival order; a caller that has to wait is told so through ``on_wait``.

Memory: a run is admitted when its need fits ``MEMORY_FRACTION`` of what is free, less what
runs already admitted hold (the ledger), where "free" is the smallest of

    MemAvailable (/proc/meminfo)                                   the machine
    memory.max - memory.current (cgroup v2; v1: limit_in_bytes - usage_in_bytes)  the container
    RLIMIT_AS - VmSize (/proc/self/status)                        the process's address space

so that a container limit or ``ulimit -v`` is respected, not only the machine's memory.
CUDA: ``torch.cuda.mem_get_info``, less the ledger.
"""

from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["serialised", "reserve", "free_bytes", "MEMORY_FRACTION", "waiting"]

MEMORY_FRACTION = 0.8  # admit a run whose need is at most this share of the free memory

_LOCK = threading.RLock()         # one measurement at a time, process-wide (validate holds it across runs)
_STATE = threading.Lock()         # guards the two counters below
_waiting = 0                      # callers queued behind the running measurement
_reserved: dict[str, int] = {}    # device -> bytes admitted and not yet released


def waiting() -> int:
    """How many measurements are queued behind the running one."""
    return _waiting


@contextlib.contextmanager
def serialised(on_wait=None):
    """Hold the process-wide measurement lock; ``on_wait(message)`` is called once if another
    measurement runs, before blocking, so that a page can show that it is queued."""
    global _waiting
    if not _LOCK.acquire(blocking=False):
        with _STATE:
            _waiting += 1
            ahead = _waiting
        try:
            if on_wait is not None:
                on_wait(f"waiting for another measurement to finish ({ahead} in the queue)")
            _LOCK.acquire()
        finally:
            with _STATE:
                _waiting -= 1
    try:
        yield
    finally:
        _LOCK.release()


@contextlib.contextmanager
def reserve(device: str, need: int):
    """Count ``need`` bytes as taken on ``device`` until the block ends."""
    with _STATE:
        _reserved[device] = _reserved.get(device, 0) + need
    try:
        yield
    finally:
        with _STATE:
            _reserved[device] -= need


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            text = handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_free() -> int | None:
    """Bytes left under this process's cgroup memory limit, or None where it has none."""
    for limit_path, usage_path in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and usage is not None and limit < 2**60:  # v1 "no limit" is ~2**63
            return max(limit - usage, 0)
    return None


def _address_space_free() -> int | None:
    """Bytes left under RLIMIT_AS (``ulimit -v``), or None without such a limit."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    size = None
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmSize:"):
                    size = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(soft - (size or 0), 0)


def free_bytes(device) -> int:
    """Memory a new run may take on ``device`` now (see the module docstring), ledger deducted."""
    if getattr(device, "type", str(device)) == "cuda":
        import torch
        free = int(torch.cuda.mem_get_info(device)[0])
    else:
        limits = [x for x in (_meminfo_available(), _cgroup_free(), _address_space_free()) if x is not None]
        free = min(limits) if limits else os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with _STATE:
        taken = _reserved.get(str(device), 0)
    return max(free - taken, 0)
