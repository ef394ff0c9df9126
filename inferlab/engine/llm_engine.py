"""The engine: one generation loop for every backend, every decoding rule and every record (Chapter 6).

A request is admitted once (checked, tokenized, encoded, given its seed), then every
:meth:`Engine.step` does four things: the scheduler picks the sequences to run, the runner calls the
model once for all of them, the decoding rule picks one token per sequence, and post-processing
detokenizes the new token, applies the stop rules and emits stream events. ``generate`` and
``stream`` only add a request and step until it is done. The design goal is that each later chapter
changes one seam of this loop (the model call, the choice of token, the cache, the scheduler) and not
the loop itself; speculative decoding, which emits several tokens per step, will test it.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence as Seq
from contextlib import contextmanager
from typing import Any

from inferlab.engine.backends import Backend
from inferlab.engine.detokenizer import IncrementalDetokenizer
from inferlab.engine.runner import ModelRunner
from inferlab.engine.scheduler import OneRequestScheduler
from inferlab.engine.sequence import Sequence
from inferlab.engine.stopping import find_stop, held_back
from inferlab.errors import BadRequest, InferlabError
from inferlab.records import GenerationResult, StreamEvent
from inferlab.request import check_prompt_ids
from inferlab.sampling.params import SamplingParams
from inferlab.sampling.samplers import make_generator
from inferlab.timing import StageClock

#: Fresh seeds for sampled requests that bring none are drawn from the operating system's entropy.
_SEEDS = random.SystemRandom()


class Engine:
    """Admit requests, then ``step()``: schedule, run the model, choose tokens, post-process (Chapter 6).

    ``threads`` sets PyTorch's intra-op thread count while the engine works and restores the
    previous count afterwards (changing it costs milliseconds, so it is set once per ``generate`` or
    ``stream``, not per step). ``kv_cache`` keeps the model's KV cache between steps, for models that
    keep one (Chapter 9 explains it): True for the model's own (growing) cache, ``"static"`` for a
    preallocated one sized to the request's prompt and token budget; without it (False) every step
    recomputes every position.
    ``detokenizer`` makes each sequence's detokenizer from the tokenizer's ``decode`` and the prompt
    ids: :class:`IncrementalDetokenizer` by default, or :class:`FullDecodeDetokenizer` (the plain path
    that decodes every id at every step), so that the two can be timed in the same loop.
    """

    def __init__(self, backend: Backend, threads: int | None = None, kv_cache: bool | str = False,
                 detokenizer: Callable[[Callable[[list[int]], str], Seq[int]], Any] = IncrementalDetokenizer):
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise BadRequest(f"threads must be a whole number of at least 1, got {threads!r}")
        if not callable(detokenizer):
            raise BadRequest(f"detokenizer must be a class or function, got {type(detokenizer).__name__}")
        self.backend = backend
        self.threads = threads
        self.detokenizer = detokenizer
        self.runner = ModelRunner(backend.model, backend.device, backend.last_only, kv_cache)
        self.scheduler = OneRequestScheduler()
        self._next_request_id = 0
        self._thread_scopes = 0

    # --- admission ----------------------------------------------------------------------------

    def add_request(self, prompt: str | Seq[int], params: SamplingParams | None = None) -> int:
        """Check, tokenize and encode a request once, and queue its samples; returns its id (Chapter 6).

        ``prompt`` is text, or token ids. Bad input raises :class:`BadRequest` before anything is
        queued: an empty prompt, ids outside the vocabulary, a prompt plus budget beyond the context.
        """
        backend = self.backend
        clock = StageClock(backend.device)
        admitted_at = time.perf_counter()
        with clock.stage("request_parse"):
            params = SamplingParams() if params is None else params
            if not isinstance(params, SamplingParams):
                raise BadRequest(f"params must be SamplingParams, got {type(params).__name__}")
            if isinstance(prompt, str):
                if not prompt.strip():
                    raise BadRequest("the prompt is empty: give at least one non-space character")
            elif not isinstance(prompt, Seq):
                raise BadRequest(f"the prompt must be text or a list of token ids, got {type(prompt).__name__}")
        if isinstance(prompt, str):
            with clock.stage("tokenize"):
                pieces = backend.tokenizer.tokenize(prompt)
            with clock.stage("encode"):
                prompt_ids = [int(i) for i in backend.tokenizer.convert_tokens_to_ids(pieces)]
                check_prompt_ids(prompt_ids, params.max_new_tokens, self.runner.vocab_size, self.runner.max_positions)
            text = prompt
        else:
            with clock.stage("encode"):
                prompt_ids = check_prompt_ids(prompt, params.max_new_tokens, self.runner.vocab_size,
                                              self.runner.max_positions)
                text = backend.tokenizer.decode(prompt_ids)
        request_id, self._next_request_id = self._next_request_id, self._next_request_id + 1
        base_seed = params.seed
        if params.rule.do_sample and base_seed is None:
            base_seed = _SEEDS.randrange(2**63 - params.n)
        group = []
        for index in range(params.n):
            seed = base_seed + index if params.rule.do_sample else None  # type: ignore[operator]
            group.append(Sequence(
                request_id=request_id, index=index, prompt=text, prompt_ids=list(prompt_ids), params=params,
                seed=seed, generator=None if seed is None else make_generator(seed, backend.device),
                detokenizer=self.detokenizer(backend.tokenizer.decode, prompt_ids),
                admitted_at=admitted_at, timings=list(clock.timings)))
        self.scheduler.add(group)
        return request_id

    # --- the loop ---------------------------------------------------------------------------

    def step(self) -> list[StreamEvent]:
        """One iteration: schedule, one model call, one token per sequence, post-process (Chapter 6)."""
        import torch

        sequences = self.scheduler.schedule()
        if not sequences:
            return []
        step = len(sequences[0].token_ids)
        rule = sequences[0].params.rule
        with self._thread_count():
            clock = StageClock(self.backend.device)
            with clock.stage("forward_pass", step):
                logits = self.runner.run(sequences)
            with clock.stage("sample", step):
                # only the penalties read the ids so far; the additive ones count the generated ids alone
                history = (torch.tensor([s.ids for s in sequences], device=self.backend.device)
                           if rule.needs_history else None)
                generators = [s.generator for s in sequences] if rule.do_sample else None
                prompt_length = [len(s.prompt_ids) for s in sequences]
                next_ids = rule.next_tokens(history, logits, generators, prompt_length=prompt_length).tolist()
            events: list[StreamEvent] = []
            for sequence, token_id in zip(sequences, next_ids):
                sequence.timings.extend(clock.timings)
                events += self._postprocess(sequence, int(token_id), step)
        return events

    def _postprocess(self, s: Sequence, token_id: int, step: int) -> list[StreamEvent]:
        """Stop rules, incremental detokenization and stream events for one new token (Chapter 6)."""
        stops = s.params.stop
        clock = StageClock(self.backend.device)
        appended = False
        with clock.stage("decode", step):
            if token_id in self.backend.eos_token_ids and not s.params.ignore_eos:
                s.finish("eos")
            else:
                s.append(token_id)
                appended = True
                delta = s.detokenizer.push(token_id)
                if len(s.token_ids) == s.params.max_new_tokens:
                    delta += s.detokenizer.flush()
                s.text += delta
                cut = find_stop(s.text, len(delta), stops)
                if cut is not None:
                    s.text = s.text[:cut]
                    s.finish("stop_string")
                elif len(s.token_ids) == s.params.max_new_tokens:
                    s.finish("length")
            if s.finished:
                s.text += s.detokenizer.flush() if s.stop_reason == "eos" else ""
                ready = len(s.text)
            else:
                ready = len(s.text) - held_back(s.text, stops)
        s.timings.extend(clock.timings)
        elapsed = time.perf_counter() - s.admitted_at
        events = []
        if appended or ready > s.sent:
            events.append(StreamEvent(s.request_id, s.index, step, token_id if appended else None,
                                      s.text[s.sent:ready], elapsed))
            s.sent = ready
        if s.finished:
            events.append(StreamEvent(s.request_id, s.index, len(s.token_ids), None, "", elapsed,
                                      done=True, result=self._result(s)))
        return events

    def _result(self, s: Sequence) -> GenerationResult:
        """The record of a finished sequence (Chapter 6)."""
        import torch

        clock = StageClock(self.backend.device)
        with clock.stage("response_format"):
            decode = self.backend.tokenizer.decode
            provenance = {**self.backend.provenance, "device": self.backend.device,
                          "threads": torch.get_num_threads(), "last_only": self.runner.last_only,
                          "kv_cache": self.runner.kv_cache}
            result = GenerationResult(
                prompt=s.prompt, prompt_ids=list(s.prompt_ids), token_ids=list(s.token_ids),
                tokens=[decode([i]) for i in s.token_ids], text=s.text, stop_reason=s.stop_reason or "length",
                timings=s.timings, simulated_stages=list(self.backend.simulated_stages),
                params=s.params.to_dict(s.seed), provenance=provenance, request_id=s.request_id, index=s.index)
        result.timings.extend(clock.timings)
        return result

    @contextmanager
    def _thread_count(self) -> Iterator[None]:
        """Use the engine's thread count inside the block and restore the previous one after (Chapter 6)."""
        import torch

        previous = torch.get_num_threads()
        change = self._thread_scopes == 0 and self.threads is not None and self.threads != previous
        self._thread_scopes += 1
        if change:
            torch.set_num_threads(self.threads)  # type: ignore[arg-type]
        try:
            yield
        finally:
            self._thread_scopes -= 1
            if change:
                torch.set_num_threads(previous)

    def has_unfinished(self) -> bool:
        """Whether any admitted request has not finished (Chapter 6)."""
        return self.scheduler.has_unfinished()

    def abort(self, request_id: int) -> None:
        """Drop a request and free what the runner kept for it (Chapter 6)."""
        self.scheduler.abort(request_id)
        self.runner.release()

    # --- thin wrappers ----------------------------------------------------------------------

    def stream(self, prompt: str | Seq[int], params: SamplingParams | None = None) -> Iterator[StreamEvent]:
        """Yield text as tokens are produced; each sample's last event carries its result (Chapter 6).

        A stream that is abandoned before its end is aborted when it is closed (a ``for`` loop left
        with ``break`` closes it once nothing refers to it), and the thread count is restored.
        """
        if self.has_unfinished():
            raise InferlabError("the engine is busy with requests added by add_request(); step() them to the end first")
        request_id = self.add_request(prompt, params)
        try:
            with self._thread_count():
                while self.has_unfinished():
                    yield from self.step()
        finally:
            if self.has_unfinished():
                self.abort(request_id)

    def generate_all(self, prompt: str | Seq[int], params: SamplingParams | None = None) -> list[GenerationResult]:
        """Run one request to completion: one result per sample, in sample order (Chapter 5)."""
        results = [e.result for e in self.stream(prompt, params) if e.done]
        return sorted(results, key=lambda r: r.index)  # type: ignore[arg-type, union-attr, return-value]

    def generate(self, prompt: str | Seq[int], params: SamplingParams | None = None) -> GenerationResult:
        """Run one single-sample request to completion (Chapter 6)."""
        if params is not None and getattr(params, "n", 1) != 1:
            raise BadRequest("generate() returns one result; use generate_all() for a request with n > 1")
        return self.generate_all(prompt, params)[0]
