"""Timing one stage of a request honestly: synchronise the device, then read the clock (Chapter 1)."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from inferlab.records import StageTiming


def synchronize(device: str) -> None:
    """Wait for queued GPU work on ``device`` to finish; a no-op on the CPU (Chapter 1).

    CUDA launches are asynchronous: without this, a stopwatch stops when the work is queued,
    not when it is done.
    """
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


class StageClock:
    """Records :class:`StageTiming` entries in order, synchronising the device first (Chapter 1)."""

    def __init__(self, device: str = "cpu", clock: Callable[[], float] = time.perf_counter):
        self.device = device
        self.clock = clock
        self.timings: list[StageTiming] = []

    @contextmanager
    def stage(self, name: str, step: int | None = None) -> Iterator[None]:
        """Time the body of a ``with`` block as one stage (Chapter 1)."""
        synchronize(self.device)
        start = self.clock()
        yield
        synchronize(self.device)
        self.timings.append(StageTiming(name, self.clock() - start, step))


@contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` PyTorch intra-op threads (None: as set), then restore the count (Chapter 7)."""
    import torch

    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
