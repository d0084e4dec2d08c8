"""The allocator's view of a build: net bytes and high-water mark above the start.

CPU: the profiler's memory events (``torch.profiler`` with ``profile_memory=True``, its event
tree in time order); the CPU allocator reports the bytes requested, so the net equals the
storages held (plus the int64 counter a DeepSeek-V3.2 static layer creates lazily). CUDA:
``torch.cuda.memory_allocated`` / ``max_memory_allocated`` deltas after ``synchronize``.

PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp) rounds every request up
to a multiple of 512 bytes. Requests up to 1 MiB are carved from 2 MiB segments (the small
pool); larger ones from 20 MiB segments while below 10 MiB, else from segments rounded up to
2 MiB. A cached block is split only when the remainder is worth keeping (> 1 MiB in the large
pool), so a reused block may be larger than the request. ``memory_allocated`` counts these
block sizes, hence on CUDA ``allocated_bytes`` is at least the sum of the storages rounded up
to 512 B and may exceed it by up to 1 MiB per large tensor; ``memory_reserved`` counts whole
segments, so ``reserved_bytes`` can be far above ``allocated_bytes`` when many mid-size
tensors each take part of a 20 MiB segment. ``torch.cuda.empty_cache()`` is called before
each CUDA measurement so that the reserved delta is this cache's own. These rounding rules
are read from the allocator's source and have not been confirmed on a GPU by this project yet.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys


def _cpu_allocations(prof) -> list[int]:
    """Signed CPU allocation sizes in time order, from the profiler's memory events."""
    from torch._C._profiler import _EventType
    events = []

    def walk(nodes):
        for node in nodes:
            if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
                events.append((node.start_time_ns, len(events), node.extra_fields.alloc_size))
            walk(node.children)

    walk(prof.profiler.kineto_results.experimental_event_tree())
    return [size for _, _, size in sorted(events)]


def _running(sizes: list[int]) -> tuple[int, int]:
    """(net, high-water mark) of a sequence of signed allocation sizes."""
    running = peak = 0
    for size in sizes:
        running += size
        peak = max(peak, running)
    return running, peak


_PROFILER_NOISE = ("USDT:", "STAGE:")  # kineto's own lines ("USDT: ... profiler_start", stage markers)


@contextlib.contextmanager
def quiet_native_stderr():
    """Keep what the profiler's C++ side (kineto) writes straight to file descriptor 2 out of
    the CLI's progress bar, without losing a real error: fd 2 goes to a temporary file whose
    lines other than kineto's own are written back afterwards, and a fatal signal meanwhile
    (a segfault) is still reported on the real stderr by faulthandler."""
    import faulthandler
    import tempfile
    sys.stderr.flush()
    saved = os.dup(2)
    real = os.fdopen(saved, "w", closefd=False)
    was_enabled = faulthandler.is_enabled()
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        faulthandler.enable(file=real, all_threads=True)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            faulthandler.disable()
            if was_enabled:  # as before, on file descriptor 2 (sys.stderr may be a capture without one)
                with contextlib.suppress(ValueError, OSError, AttributeError):
                    faulthandler.enable(file=sys.__stderr__, all_threads=True)
            capture.seek(0)
            kept = [line for line in capture.read().decode("utf-8", "replace").splitlines()
                    if line.strip() and not line.lstrip().startswith(_PROFILER_NOISE)]
            real.close()
            os.close(saved)
            if kept:
                print("\n".join(kept), file=sys.stderr, flush=True)


def run_cpu(drive) -> tuple[int, int, None, dict]:
    """(allocated, peak, reserved, CUDA stats): the profiler's CPU memory events of ``drive()``."""
    from torch.profiler import ProfilerActivity, profile
    with quiet_native_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        drive()
    allocated, peak = _running(_cpu_allocations(prof))
    return allocated, peak, None, {}


def run_cuda(drive, device) -> tuple[int, int, int, dict]:
    """(allocated, peak, reserved, CUDA stats): the caching allocator's counters around ``drive()``."""
    import torch
    gc.collect()  # free any unreachable tensors of an earlier run before the baseline
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    base_allocated = torch.cuda.memory_allocated(device)
    base_reserved = torch.cuda.memory_reserved(device)
    base_segments = torch.cuda.memory_stats(device).get("segment.all.current", 0)
    torch.cuda.reset_peak_memory_stats(device)
    drive()
    torch.cuda.synchronize(device)
    stats = torch.cuda.memory_stats(device)
    return (torch.cuda.memory_allocated(device) - base_allocated,
            torch.cuda.max_memory_allocated(device) - base_allocated,
            torch.cuda.memory_reserved(device) - base_reserved,
            {"peak_reserved_bytes": torch.cuda.max_memory_reserved(device) - base_reserved,
             "segments": stats.get("segment.all.current", 0) - base_segments,
             "device_name": torch.cuda.get_device_name(device)})

