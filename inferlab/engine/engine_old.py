"""The first complete engine: one generation loop around pluggable backends (Chapter 6).

A backend knows a model: how to turn text into ids, ids into next-token logits, and ids back into
text. The :class:`Engine` owns everything else, identically for every backend: request checks, the
loop, the decoding rule of Chapter 5, stop conditions with a recorded stop reason, streaming of text as tokens
are produced, stage timings and provenance. Because the engine is shared, two backends given the
same request can be compared token for token and stage for stage.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from inferlab.errors import BadRequest
from inferlab.records import GenerationResult
from inferlab.request import check_context, parse_request
from inferlab.sampling import DecodingRule, make_generator
from inferlab.timing import StageClock

#: The reasons a generation can stop (Chapter 6).
STOP_REASONS = ("length", "eos", "stop_string")


@runtime_checkable
class Backend(Protocol):
    """What the engine needs from a model (Chapter 6)."""

    name: str
    device: str
    eos_token_ids: frozenset[int]
    context: int | None
    simulated_stages: list[str]

    def tokenize(self, text: str) -> list[str]:
        """Split text into the model's symbols."""
        ...

    def encode(self, pieces: list[str]) -> list[int]:
        """Map symbols to ids."""
        ...

    def next_token_logits(self, ids: list[int]) -> Any:
        """Scores for the token after ``ids``: a 1-D tensor over the vocabulary."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of a list of ids."""
        ...

    def describe(self) -> dict[str, Any]:
        """Provenance of the backend: model, weights, implementation (Chapter 6)."""
        ...


def held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of ``text`` could still begin a stop string (Chapter 6).

    A streaming engine must not send those characters yet: the next token might complete the stop
    string, and text that is part of a stop string is never shown.
    """
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:size]):
                longest = max(longest, size)
                break
    return longest


@dataclass(frozen=True)
class StreamEvent:
    """One step of a streamed generation: the token, the text it releases, and when (Chapter 6).

    The last event of a stream has ``done=True`` and carries the complete :class:`GenerationResult`.
    """

    step: int
    token_id: int | None
    text: str
    elapsed_s: float
    done: bool = False
    result: GenerationResult | None = None


class Engine:
    """Generation loop shared by every backend: checks, selection, stops, streaming, timing (Chapter 6).

    A result's ``text`` ends before a stop string; its ``token_ids`` include the token that
    completed the stop string (the model did produce it) but never an end-of-sequence token.
    Stopping is checked after every token: the engine stops at the first token after which any
    stop string appears in the text, and cuts at the earliest of the stop strings present then.
    """

    def __init__(self, backend: Backend, rule: DecodingRule | None = None, threads: int | None = None):
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.backend = backend
        self.rule = rule if rule is not None else DecodingRule()
        self.threads = threads

    def generate(self, prompt: str, max_new_tokens: int, stop: Sequence[str] = (),
                 seed: int = 0) -> GenerationResult:
        """Run one request to completion (satisfies ``TokenGenerator``) (Chapter 6)."""
        with closing(self.stream(prompt, max_new_tokens, stop, seed)) as events:
            for event in events:
                if event.done:
                    assert event.result is not None
                    return event.result
        raise RuntimeError("the stream ended without a result")  # unreachable

    def stream(self, prompt: str, max_new_tokens: int, stop: Sequence[str] = (),
               seed: int = 0) -> Iterator[StreamEvent]:
        """Yield text as tokens are produced, then a final event with the result (Chapter 6).

        ``stop`` is one stop string or several. ``seed`` seeds this request's own random
        generator, so a sampled request is repeatable on the same device and library versions,
        whatever ran before it; greedy rules ignore it. The thread count is process-wide in
        PyTorch: an engine with ``threads`` set changes it for the duration of the stream.
        """
        import torch

        stops = [stop] if isinstance(stop, str) else list(stop)
        previous_threads = torch.get_num_threads()
        changed = self.threads is not None and self.threads != previous_threads
        if changed:
            torch.set_num_threads(self.threads)  # type: ignore[arg-type]
        try:
            yield from self._loop(prompt, max_new_tokens, stops, seed)
        finally:
            if changed:
                torch.set_num_threads(previous_threads)

    def _loop(self, prompt: str, max_new_tokens: int, stops: list[str], seed: int) -> Iterator[StreamEvent]:
        import torch

        backend = self.backend
        clock = StageClock(backend.device)
        start = time.perf_counter()
        with clock.stage("request_parse"):
            request = parse_request(prompt, max_new_tokens)
            if any(not isinstance(s, str) or not s for s in stops):
                raise BadRequest("stop strings must be non-empty text")
            generator = make_generator(seed, backend.device)
        with clock.stage("tokenize"):
            pieces = backend.tokenize(request.prompt)
        with clock.stage("encode"):
            prompt_ids = backend.encode(pieces)
            check_context(len(prompt_ids), request.max_new_tokens, backend.context)
        ids = list(prompt_ids)
        new_ids: list[int] = []
        sent = ""            # text already streamed to the caller
        text = ""            # text of the generated ids so far, stop string cut off
        reason = "length"
        for step in range(request.max_new_tokens):
            with clock.stage("forward_pass", step):
                logits = backend.next_token_logits(ids)
            with clock.stage("sample", step):
                history = torch.tensor([ids], device=backend.device)
                next_id = int(self.rule.next_tokens(history, logits.unsqueeze(0), [generator])[0])
            ids.append(next_id)
            if next_id in backend.eos_token_ids:
                reason = "eos"
                break
            new_ids.append(next_id)
            with clock.stage("decode", step):
                text = backend.decode(new_ids)
                hits = [text.find(s) for s in stops if s in text]
                if hits:
                    text, reason = text[: min(hits)], "stop_string"
                    ready = text
                elif text.endswith("\ufffd"):  # an incomplete UTF-8 character: wait for more bytes
                    ready = sent
                else:
                    ready = text[: len(text) - held_back(text, stops)]
            if not ready.startswith(sent):  # text already sent can never be taken back
                raise RuntimeError(f"{backend.name}: decoding is not prefix-stable ({sent!r} became "
                                   f"{ready!r}); streaming needs a tokenizer that does not rewrite earlier text")
            # The event is yielded outside every stage: time the caller spends with it is not ours.
            yield StreamEvent(step, next_id, ready[len(sent):], time.perf_counter() - start)
            sent = ready
            if reason == "stop_string":
                break
        with clock.stage("response_format"):
            result = GenerationResult(
                prompt=request.prompt,
                prompt_ids=list(prompt_ids),
                token_ids=new_ids,
                tokens=[backend.decode([i]) for i in new_ids],
                text=text,
                timings=clock.timings,
                simulated_stages=list(backend.simulated_stages),
                metadata={"generator": "engine", "backend": backend.describe(),
                          "threads": torch.get_num_threads(), "rule": self.rule.label(), "seed": seed,
                          "max_new_tokens": request.max_new_tokens, "stop": stops},
                stop_reason=reason,
            )
        if len(text) > len(sent):  # text held back for a stop string that never completed
            yield StreamEvent(len(new_ids), None, text[len(sent):], time.perf_counter() - start)
        yield StreamEvent(len(new_ids), None, "", time.perf_counter() - start, done=True, result=result)
