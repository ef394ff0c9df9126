"""Peak memory of one call: what PyTorch's allocator handed out, at its highest, while the call ran (Chapter 13).

On CUDA, PyTorch's caching allocator keeps the statistic itself: :func:`peak_allocated` resets it,
runs the call, and reads ``torch.cuda.max_memory_allocated``, less what was allocated before.

On the CPU there is no such counter by default. With ``torch.profiler.profile(profile_memory=True)``,
c10's CPU allocator (``DefaultCPUAllocator::allocate`` and ``ReportAndDelete`` in
``c10/core/CPUAllocator.cpp``) reports every allocation and every free of a tensor's storage to the
profiler through ``ProfiledCPUMemoryReporter::New`` and ``Delete``, with its size. The profiler keeps
them as events of type ``Allocation`` (``alloc_size`` positive for an allocation, negative for a
free), which ``torch.profiler._memory_profiler`` also reads from
``result.experimental_event_tree()``. :func:`peak_allocated` walks those events in time order and
returns the highest running sum: the peak of tensor storage allocated by the call above what existed
before it.

What it does not see: memory that does not come from c10's allocator, such as a kernel's own
``std::make_unique`` scratch buffers, a BLAS library's workspace, or Python objects; and memory freed
and reused by the operating system's allocator below c10. It counts bytes requested, not pages
touched. A tensor allocated before the call and freed inside it appears as a negative step.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class PeakMemory:
    """The peak of allocated bytes during one call, above the start, and how it was measured (Chapter 13)."""

    peak_bytes: int  #: the highest running total of allocations minus frees during the call
    allocated_bytes: int  #: all bytes allocated during the call, frees not subtracted
    net_bytes: int  #: allocated minus freed at the end: what the call left behind (its result, say)
    allocations: int  #: how many allocations the call made
    method: str  #: "torch.profiler (CPU allocator events)" or "torch.cuda.max_memory_allocated"
    result: Any = None  #: what the call returned


def _allocation_events(result: Any) -> list[tuple[int, int]]:
    """(start time in ns, signed size) of every CPU allocator event in a profiler result (Chapter 13)."""
    from torch._C._profiler import _EventType

    events: list[tuple[int, int]] = []
    stack = list(result.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            events.append((node.start_time_ns, int(node.extra_fields.alloc_size)))
        stack.extend(node.children)
    return sorted(events)


def peak_allocated(fn: Callable[[], Any], device: str = "cpu") -> PeakMemory:
    """Run ``fn`` once and return the peak of memory it allocated above the start (Chapter 13).

    On the CPU through the profiler's allocator events (see the module's docstring for what they
    count); on CUDA through the caching allocator's own peak statistic.
    """
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        start = torch.cuda.memory_stats()
        torch.cuda.reset_peak_memory_stats()
        out = fn()
        torch.cuda.synchronize()
        end = torch.cuda.memory_stats()
        peak = torch.cuda.max_memory_allocated() - before
        net = torch.cuda.memory_allocated() - before
        grown = {key: int(end.get(key, 0)) - int(start.get(key, 0))
                 for key in ("allocated_bytes.all.allocated", "allocation.all.allocated")}
        return PeakMemory(peak, grown["allocated_bytes.all.allocated"], net, grown["allocation.all.allocated"],
                          "torch.cuda.max_memory_allocated", out)
    if str(device) != "cpu":
        raise ValueError(f"peak_allocated measures the CPU or CUDA, not {device!r}")
    from torch.profiler import ProfilerActivity, profile

    from inferlab.analysis.flops import _quiet_native_stderr

    with _quiet_native_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    running = peak = allocated = count = 0
    for _, size in _allocation_events(prof.profiler.kineto_results):
        running += size
        peak = max(peak, running)
        if size > 0:
            allocated += size
            count += 1
    return PeakMemory(peak, allocated, running, count, "torch.profiler (CPU allocator events)", out)
