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

from ..units import pad


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


# kineto's own lines: "USDT: ... profiler_start", stage markers, and its notice that the profiler
# started in another thread than the one that imported torch (the app imports torch in a background
# thread and measures in the page's; the memory events, and so every measured byte, are the same)
_PROFILER_NOISE = ("USDT:", "STAGE:", "ERROR: External init callback must run in same thread as registerClient")


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
    """(allocated, peak, reserved, CUDA stats): the caching allocator's counters around ``drive()``.

    The stats keep the raw counters too: ``memory_allocated`` / ``max_memory_allocated`` /
    ``memory_reserved`` / ``max_memory_reserved`` as torch reports them (absolute, this process),
    the baseline they are taken above, the segments and allocation requests added, and the bytes
    of inactive split blocks (free pieces of segments that still hold live blocks: fragmentation).
    """
    import torch
    gc.collect()  # free any unreachable tensors of an earlier run before the baseline
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    base_allocated = torch.cuda.memory_allocated(device)
    base_reserved = torch.cuda.memory_reserved(device)
    base = torch.cuda.memory_stats(device)
    torch.cuda.reset_peak_memory_stats(device)
    drive()
    torch.cuda.synchronize(device)
    stats = torch.cuda.memory_stats(device)
    allocated, peak = torch.cuda.memory_allocated(device), torch.cuda.max_memory_allocated(device)
    reserved, peak_reserved = torch.cuda.memory_reserved(device), torch.cuda.max_memory_reserved(device)
    return (allocated - base_allocated, peak - base_allocated, reserved - base_reserved,
            {"peak_reserved_bytes": peak_reserved - base_reserved,
             "segments": stats.get("segment.all.current", 0) - base.get("segment.all.current", 0),
             "alloc_requests": (stats.get("allocation.all.allocated", 0)
                                - base.get("allocation.all.allocated", 0)),
             "inactive_split_bytes": stats.get("inactive_split_bytes.all.current", 0),
             "base_allocated_bytes": base_allocated, "base_reserved_bytes": base_reserved,
             "memory_allocated": allocated, "max_memory_allocated": peak,
             "memory_reserved": reserved, "max_memory_reserved": peak_reserved,
             "device_name": torch.cuda.get_device_name(device)})


# The caching allocator's constants (c10/cuda/CUDACachingAllocator.cpp, defaults: no
# roundup_power2_divisions, no max_split_size, expandable segments off).
CUDA_MIN_BLOCK = 512            # kMinBlockSize: every request rounded up to a multiple of this
CUDA_SMALL_SIZE = 2**20         # kSmallSize: requests up to this come from the small pool
CUDA_SMALL_BUFFER = 2 * 2**20   # kSmallBuffer: a small-pool segment
CUDA_LARGE_BUFFER = 20 * 2**20  # kLargeBuffer: the segment for requests below kMinLargeAlloc
CUDA_MIN_LARGE_ALLOC = 10 * 2**20  # kMinLargeAlloc
CUDA_ROUND_LARGE = 2 * 2**20    # kRoundLarge: larger segments are rounded up to this


def cuda_round_size(size: int) -> int:
    """round_size: the request rounded up to 512 B (512 B at least)."""
    return max(CUDA_MIN_BLOCK, pad(size, CUDA_MIN_BLOCK))


def cuda_segment_size(size: int) -> int:
    """get_allocation_size: the segment cudaMalloc'd for a request no cached block can serve."""
    rounded = cuda_round_size(size)
    if rounded <= CUDA_SMALL_SIZE:
        return CUDA_SMALL_BUFFER
    if rounded < CUDA_MIN_LARGE_ALLOC:
        return CUDA_LARGE_BUFFER
    return pad(rounded, CUDA_ROUND_LARGE)


def cuda_fresh_block_size(size: int) -> int:
    """The block a request gets from a fresh segment: the rounded size when the allocator splits
    the remainder off (should_split: >= 512 B left in the small pool, > 1 MiB in the large
    one), else the whole segment -- which ``memory_allocated`` then counts."""
    rounded = cuda_round_size(size)
    remaining = cuda_segment_size(size) - rounded
    small = rounded <= CUDA_SMALL_SIZE
    split = remaining >= CUDA_MIN_BLOCK if small else remaining > CUDA_SMALL_SIZE
    return rounded if split else rounded + remaining


def cuda_block_model(sizes) -> dict:
    """What the rounding rules predict for storages of ``sizes`` bytes (non-zero ones): the sum
    rounded to 512 B (the least ``memory_allocated`` can count), the blocks each would get from a
    fresh segment (what it counts when no cached block is reused), and those segments."""
    sizes = [n for n in sizes if n > 0]
    return {"storage_sizes": len(sizes),
            "rounded_bytes": sum(cuda_round_size(n) for n in sizes),
            "fresh_block_bytes": sum(cuda_fresh_block_size(n) for n in sizes),
            "fresh_segment_bytes": sum(cuda_segment_size(n) for n in sizes)}

