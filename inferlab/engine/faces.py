"""Chapter 1's names for the engine: ``TokenGenerator``, ``ToyGenerator`` and ``RealModelRunner``.

Chapter 1 introduces a request before it introduces an engine, so it speaks of a generator that
takes a prompt and a token budget. These are that interface and its two first implementations;
both are the Chapter 6 engine underneath, so every path produces the same record through the same
loop. Like the loop that Chapter 1 writes out by hand, they stop only at the token budget
(``ignore_eos=True``, no stop strings): a timing experiment then always runs the steps it asked for.
Chapter 6 adds the other two stop reasons.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from inferlab.engine.backends import toy_backend, transformers_backend
from inferlab.engine.llm_engine import Engine
from inferlab.models.registry import LoadedModel
from inferlab.models.toy import ToyModel
from inferlab.records import GenerationResult
from inferlab.sampling.params import SamplingParams


@runtime_checkable
class TokenGenerator(Protocol):
    """Anything that turns a prompt into a :class:`GenerationResult` (Chapter 1)."""

    def generate(self, prompt: str, max_new_tokens: int) -> GenerationResult:
        """Generate up to ``max_new_tokens`` tokens after ``prompt``."""
        ...


class ToyGenerator:
    """The toy model of Chapter 1 behind the engine, greedy: a generator with no network (Chapter 1)."""

    def __init__(self, seed: int = 7):
        self.engine = Engine(toy_backend(seed))
        self.model: ToyModel = self.engine.backend.model  # type: ignore[assignment]

    def generate(self, prompt: str, max_new_tokens: int) -> GenerationResult:
        """The most probable character, ``max_new_tokens`` times (Chapter 1)."""
        return self.engine.generate(prompt, SamplingParams(max_new_tokens=max_new_tokens, ignore_eos=True))


class RealModelRunner:
    """A loaded model behind the engine: transformers' forward pass, greedy, no KV cache (Chapter 1).

    Every step runs the model over the whole sequence so far and keeps only the last position's
    logits. That is wasteful on purpose: it is the baseline that the KV cache (Chapter 9) improves
    on, and it has to be measured before it is improved.
    """

    def __init__(self, loaded: LoadedModel, threads: int | None = None):
        self.engine = Engine(transformers_backend(loaded), threads=threads)

    def generate(self, prompt: str, max_new_tokens: int) -> GenerationResult:
        """Greedy generation of exactly ``max_new_tokens`` tokens, every stage timed (Chapter 1)."""
        return self.engine.generate(prompt, SamplingParams(max_new_tokens=max_new_tokens, ignore_eos=True))
