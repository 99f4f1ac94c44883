"""Peak memory of a block of torch work, in bytes above what was allocated before it.

* CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``,
  minus the memory allocated when the block starts.
* CPU: torch keeps no peak statistic for host memory, so the peak is rebuilt
  from the profiler's memory events: every allocation (+bytes) and free
  (-bytes) torch makes inside the block, in time order, and the running sum's
  maximum. It counts torch allocations only: the compiled kernels' small
  internal scratch and numpy temporaries are not seen; nor are frees of memory
  allocated before the block (only frees of addresses the block allocated
  count: a tensor allocated under an earlier profiler and freed inside the
  block would otherwise lower the peak by its size), so on CPU it is the peak
  of the block's own allocations. Starting the profiler
  costs about a second once per process, so measure once per run, not per epoch.

    with memory.peak(device) as probe:
        model.fit(X, y)
    probe.bytes
"""

from __future__ import annotations

import gc

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import torch


@dataclass
class PeakMemory:
    bytes: int = 0
    method: str = ""  # how it was measured (recorded with the number)


def block_events(allocations) -> list[tuple[int, int]]:
    """The (time_ns, nbytes) pairs of the block's own memory: from (time_ns, address,
    nbytes) records (nbytes < 0 for a free) the allocations, and the frees of the
    addresses allocated in the block, in time order."""
    live, kept = set(), []
    for time_ns, address, nbytes in sorted(allocations, key=lambda a: a[0]):
        if nbytes > 0:
            live.add(address)
        elif address in live:
            live.discard(address)
        else:
            continue  # memory allocated before the block
        kept.append((time_ns, nbytes))
    return kept


def peak_from_events(events) -> int:
    """The running maximum of the allocated bytes, from (start_ns, nbytes) pairs
    (nbytes < 0 for a free); 0 when nothing stays allocated above the start."""
    current = peak = 0
    for _, nbytes in sorted(events, key=lambda e: e[0]):
        current += nbytes
        peak = max(peak, current)
    return peak


@contextmanager
def _native_stderr_silenced():
    """File descriptor 2 to /dev/null: the profiler's C++ side prints a line to it
    at every start and stop, which would land in every run's output."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _allocations(events) -> list[tuple[int, int, int]]:
    """(time_ns, address, nbytes) of every CPU allocation and free in a profiler's event tree
    (its flat event list carries no addresses, which ``block_events`` needs; torch's own memory
    profiler, torch.profiler._memory_profiler, reads allocations from the same tree)."""
    allocation = torch._C._profiler._EventType.Allocation
    found, stack = [], list(events)
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        if event.tag == allocation and event.extra_fields.device.type == "cpu":
            fields = event.extra_fields
            found.append((event.start_time_ns, fields.ptr, fields.alloc_size))
    return found


@contextmanager
def _cpu_peak(probe: PeakMemory):
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _native_stderr_silenced():  # only around start and stop, never around the measured work
        prof.start()
    try:
        yield
    finally:
        with _native_stderr_silenced():
            prof.stop()
    probe.bytes = peak_from_events(block_events(_allocations(prof.profiler.kineto_results.experimental_event_tree())))
    probe.method = "torch profiler memory events (CPU, torch allocations)"


@contextmanager
def _cuda_peak(probe: PeakMemory, device: torch.device):
    # garbage from before the block (tensors in reference cycles) is freed now, not inside it, where
    # its free would hide the block's own allocations below the level the peak is measured from
    gc.collect()
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    yield
    torch.cuda.synchronize(device)
    probe.bytes = max(0, torch.cuda.max_memory_allocated(device) - before)
    probe.method = "torch.cuda.max_memory_allocated"


@contextmanager
def peak(device="cpu"):
    """Measures the block; the yielded probe holds ``bytes`` and ``method`` afterwards."""
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"peak memory is measured on cpu or cuda devices, got {device}")
    probe = PeakMemory()
    with (_cuda_peak(probe, device) if device.type == "cuda" else _cpu_peak(probe)):
        yield probe
