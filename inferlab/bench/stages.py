"""Repeating a request and summarising where its time went, stage by stage (Chapter 1).

Part II (Chapter 7) grows this module into the book's benchmark harness.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from inferlab.engine.faces import TokenGenerator
from inferlab.records import GenerationResult



def run_repeated(generator: TokenGenerator, prompt: str, max_new_tokens: int, repeats: int) -> list[GenerationResult]:
    """Send the same request ``repeats`` times to one loaded generator (Chapter 1)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    return [generator.generate(prompt, max_new_tokens) for _ in range(repeats)]


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
