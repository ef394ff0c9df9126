"""The request record: what one request asked for, what came back and where the time went.

Introduced in Chapter 1. Every generator in the lab returns a :class:`GenerationResult`, so the
same harness can time, repeat and summarise any of them.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

#: The stages of one request, in the order they first run (Chapter 1).
STAGES: tuple[str, ...] = (
    "request_parse",
    "tokenize",
    "encode",
    "forward_pass",
    "sample",
    "decode",
    "response_format",
)


@dataclass(frozen=True)
class StageTiming:
    """One timed stage of a request; ``step`` is the generation step of per-token stages (Chapter 1)."""

    stage: str
    seconds: float
    step: int | None = None


@dataclass
class GenerationResult:
    """What one request produced, with ordered stage timings and its simulated stages (Chapter 1)."""

    prompt: str
    prompt_ids: list[int]
    token_ids: list[int]
    tokens: list[str]
    text: str
    timings: list[StageTiming]
    simulated_stages: list[str]
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Why generation stopped: "length", "eos" or "stop_string"; None where a generator does not say
    #: (the Chapter 1 generators always run to length). Set by the Engine (Chapter 6).
    stop_reason: str | None = None

    def stage_totals(self) -> dict[str, float]:
        """Seconds spent in each stage, summed over steps, in first-seen order (Chapter 1)."""
        totals: dict[str, float] = {}
        for timing in self.timings:
            totals[timing.stage] = totals.get(timing.stage, 0.0) + timing.seconds
        return totals

    def total_seconds(self) -> float:
        """Sum of all timed stages: the measured request time (Chapter 1)."""
        return sum(timing.seconds for timing in self.timings)

    def step_seconds(self, stage: str = "forward_pass") -> list[float]:
        """Durations of one per-token stage, in step order (Chapter 1)."""
        return [t.seconds for t in self.timings if t.stage == stage]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of the whole record (Chapter 1)."""
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        """The record as JSON text (Chapter 1)."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


@runtime_checkable
class TokenGenerator(Protocol):
    """Anything that turns a prompt into a :class:`GenerationResult` (Chapter 1)."""

    def generate(self, prompt: str, max_new_tokens: int) -> GenerationResult:
        """Generate up to ``max_new_tokens`` tokens after ``prompt``."""
        ...
