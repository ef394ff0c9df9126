"""Repeating a request and summarising where its time went, stage by stage (Chapter 1).

Chapter 6 adds the timeline of a stream: for each step, when its text left the engine, how long the
model call took, and what the engine spent around it. Part II (Chapter 7) grows this module into the
book's benchmark harness.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from inferlab.engine.faces import TokenGenerator
from inferlab.records import GenerationResult, StreamEvent


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


@dataclass(frozen=True)
class StreamStep:
    """One step of a streamed sample: its event's time, the step's time and the model's share (Chapter 6)."""

    step: int
    #: When the step's event left the engine, counted from the request's admission.
    elapsed_s: float
    #: Time since the previous step's event (for the first step: since admission).
    seconds: float
    #: The model call of this step (the ``forward_pass`` stage).
    forward_s: float
    #: The text the step released ('' while text is held back).
    text: str

    @property
    def overhead_s(self) -> float:
        """Everything but the model call: the engine's own work in this step (Chapter 6).

        For the first step it also holds the admission (parsing, tokenizing, encoding the prompt),
        so ``steps[0].overhead_s`` is the time to the first event minus the first forward pass.
        """
        return self.seconds - self.forward_s


def stream_steps(events: Iterable[StreamEvent]) -> list[StreamStep]:
    """The timeline of one sample's stream, one row per step that emitted an event (Chapter 6).

    Consume the stream without work between events (``list(engine.stream(...))``): whatever the
    caller does between two events is counted in the next step's time.
    """
    events = list(events)
    if not events or not events[-1].done or events[-1].result is None:
        raise ValueError("give every event of one finished stream, its final event included")
    if len({e.index for e in events}) != 1:
        raise ValueError("give the events of one sample (a request with n = 1)")
    forward = {t.step: t.seconds for t in events[-1].result.timings if t.stage == "forward_pass"}
    rows, previous = [], 0.0
    for event in events[:-1]:
        rows.append(StreamStep(event.step, event.elapsed_s, event.elapsed_s - previous,
                               forward.get(event.step, 0.0), event.text))
        previous = event.elapsed_s
    return rows
