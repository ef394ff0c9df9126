"""Timing stages honestly, repeating requests and summarising where the time went (Chapter 1)."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from inferlab.records import GenerationResult, StageTiming


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


def run_repeated(
    generator: object, prompt: str, max_new_tokens: int, repeats: int
) -> list[GenerationResult]:
    """Send the same request ``repeats`` times to one loaded generator (Chapter 1)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    return [generator.generate(prompt, max_new_tokens) for _ in range(repeats)]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class StageSummary:
    """One row of :func:`summarise_timings`: a stage over all requests (Chapter 1)."""

    stage: str
    count: int
    total_s: float
    median_s: float
    share: float


def summarise_timings(results: list[GenerationResult]) -> list[StageSummary]:
    """Per stage: how often it ran, total and median seconds, and share of all time (Chapter 1)."""
    if not results:
        raise ValueError("no results to summarise")
    by_stage: dict[str, list[float]] = {}
    for result in results:
        for timing in result.timings:
            by_stage.setdefault(timing.stage, []).append(timing.seconds)
    grand_total = sum(sum(values) for values in by_stage.values())
    return [
        StageSummary(
            stage=stage,
            count=len(values),
            total_s=sum(values),
            median_s=statistics.median(values),
            share=sum(values) / grand_total if grand_total > 0 else 0.0,
        )
        for stage, values in by_stage.items()
    ]


def format_summary(rows: list[StageSummary]) -> str:
    """A fixed-width text table of :func:`summarise_timings` rows (Chapter 1)."""
    lines = [f"{'stage':<16}{'count':>6}{'total ms':>12}{'median ms':>12}{'share':>9}"]
    for row in rows:
        lines.append(
            f"{row.stage:<16}{row.count:>6}{row.total_s * 1e3:>12.2f}"
            f"{row.median_s * 1e3:>12.3f}{row.share:>9.2%}"
        )
    return "\n".join(lines)
