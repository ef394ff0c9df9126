"""One request's state inside the engine, from admission to its result (Chapter 6).

Everything the loop needs to know about one sample lives here, in one place: its ids, its
sampling parameters and random generator, its status and stop state, its streamed text and its
stage timings. (nano-vllm calls the same object a ``Sequence``.)
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from inferlab.engine.detokenizer import FullDecodeDetokenizer, IncrementalDetokenizer
from inferlab.records import StageTiming
from inferlab.sampling.params import SamplingParams


class Status(enum.Enum):
    """Where a sequence is in its life (Chapter 6)."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """Per-request state: ids, parameters, generator, status, stop state, text and timings (Chapter 6)."""

    request_id: int
    index: int
    prompt: str
    prompt_ids: list[int]
    params: SamplingParams
    seed: int | None
    generator: Any
    detokenizer: IncrementalDetokenizer | FullDecodeDetokenizer
    admitted_at: float
    timings: list[StageTiming] = field(default_factory=list)
    #: The generated ids (never an end-of-sequence id unless ``ignore_eos``).
    token_ids: list[int] = field(default_factory=list)
    #: The prompt followed by every generated id: what the model reads next. Kept up to date as
    #: tokens arrive (see :meth:`append`), so that no step rebuilds it.
    ids: list[int] = field(default_factory=list)
    status: Status = Status.WAITING
    stop_reason: str | None = None
    #: The text of the answer so far, cut before a stop string once one appears.
    text: str = ""
    #: How much of ``text`` has been streamed to the caller.
    sent: int = 0

    def __post_init__(self) -> None:
        if not self.ids:
            self.ids = list(self.prompt_ids) + list(self.token_ids)

    def append(self, token_id: int) -> None:
        """Add a generated id to the answer and to the ids the model reads next (Chapter 6)."""
        self.token_ids.append(token_id)
        self.ids.append(token_id)

    @property
    def finished(self) -> bool:
        """Whether the sequence has stopped (Chapter 6)."""
        return self.status is Status.FINISHED

    def finish(self, reason: str) -> None:
        """Stop the sequence with a reason from :data:`inferlab.records.STOP_REASONS` (Chapter 6)."""
        self.status, self.stop_reason = Status.FINISHED, reason
