"""The records every generation returns: stage timings, stop reasons, results and stream events.

Introduced in Chapter 1 (the result and its stage timings) and completed in Chapter 6 (stop
reasons and stream events). Every path through the engine produces these same records, so the same
harness can time, repeat and compare any backend.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

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

#: Why a generation stopped (Chapter 6): it produced ``max_new_tokens`` tokens, the model produced
#: an end-of-sequence token, or the text reached one of the request's stop strings.
STOP_REASONS: tuple[str, ...] = ("length", "eos", "stop_string")


@dataclass(frozen=True)
class StageTiming:
    """One timed stage of a request; ``step`` is the generation step of per-token stages (Chapter 1)."""

    stage: str
    seconds: float
    step: int | None = None


@dataclass
class GenerationResult:
    """What one request produced, how, and where its time went (Chapter 1; completed in Chapter 6).

    ``token_ids`` are the generated ids: they include the token that completed a stop string (the
    model did produce it) but not an end-of-sequence token that stopped the generation (a request
    with ``ignore_eos`` keeps those it produced). ``tokens`` holds the text of each
    generated id decoded on its own. ``text`` is the decoded text of ``token_ids``, cut before the
    stop string when there is one. ``params`` records the sampling parameters as run, including the
    seed that was drawn for a sampled request that gave none; ``provenance`` records the model,
    its weights, the backend, device and threads.
    """

    prompt: str
    prompt_ids: list[int]
    token_ids: list[int]
    tokens: list[str]
    text: str
    stop_reason: str
    timings: list[StageTiming]
    simulated_stages: list[str]
    params: dict[str, Any]
    provenance: dict[str, Any]
    request_id: int = 0
    #: Which of a request's ``n`` samples this is (Chapter 5).
    index: int = 0

    def __post_init__(self) -> None:
        if self.stop_reason not in STOP_REASONS:
            raise ValueError(f"stop_reason must be one of {STOP_REASONS}, got {self.stop_reason!r}")

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


@dataclass(frozen=True)
class StreamEvent:
    """One piece of a streamed generation: the token, the text it releases, and when (Chapter 6).

    ``text`` is only the newly released text; concatenating the ``text`` of every event of one
    sample gives its result's ``text``. ``elapsed_s`` counts from the request's admission. The last
    event of a sample has ``done=True`` and carries its complete :class:`GenerationResult`.
    """

    request_id: int
    index: int
    step: int
    token_id: int | None
    text: str
    elapsed_s: float
    done: bool = False
    result: GenerationResult | None = field(default=None, repr=False)
