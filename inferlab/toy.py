"""A seeded toy generator with the shape of a real one and none of its substance (Chapter 1).

The toy exists to test the interface and the timing harness: it has the stages of a real request,
but its "forward pass" is a lookup in a random table, so it says nothing about model quality,
hardware or serving, and its result lists those stages as simulated.
"""
from __future__ import annotations

import math
import random
import string

from inferlab.errors import BadRequest
from inferlab.records import GenerationResult
from inferlab.request import parse_request
from inferlab.timing import StageClock

#: The toy's vocabulary: one character per token, 57 symbols.
TOY_VOCABULARY: str = string.ascii_uppercase + string.ascii_lowercase + " .,!?"


def stable_softmax(logits: list[float]) -> list[float]:
    """Softmax that subtracts the maximum first, so large scores cannot overflow (Chapter 1)."""
    if not logits:
        raise ValueError("softmax of an empty list")
    top = max(logits)
    exps = [math.exp(value - top) for value in logits]
    total = sum(exps)
    return [value / total for value in exps]


def greedy_pick(probs: list[float]) -> int:
    """Index of the largest probability; ties go to the smallest index (Chapter 1)."""
    best = 0
    for index, value in enumerate(probs):
        if value > probs[best]:
            best = index
    return best


class ToyGenerator:
    """Character-level generator whose next-token scores depend on the previous token only (Chapter 1)."""

    simulated_stages = ["forward_pass", "sampling_distribution", "kv_cache"]

    def __init__(self, seed: int = 7, vocabulary: str = TOY_VOCABULARY):
        if len(set(vocabulary)) != len(vocabulary) or not vocabulary:
            raise ValueError("the vocabulary must be non-empty with no repeated symbols")
        self.seed = seed
        self.vocabulary = vocabulary
        self.ids = {symbol: index for index, symbol in enumerate(vocabulary)}
        rng = random.Random(seed)
        size = len(vocabulary)
        self.table = [[rng.gauss(0.0, 1.0) for _ in range(size)] for _ in range(size)]

    def encode(self, prompt: str) -> list[int]:
        """Map each character to its id, refusing characters outside the vocabulary (Chapter 1)."""
        unknown = sorted({c for c in prompt if c not in self.ids})
        if unknown:
            raise BadRequest(
                f"the toy vocabulary has no {', '.join(map(repr, unknown))}; "
                f"it knows letters, space and . , ! ?"
            )
        return [self.ids[c] for c in prompt]

    def next_token_probs(self, ids: list[int]) -> list[float]:
        """The toy forward pass: a table row for the last token, through a stable softmax (Chapter 1)."""
        return stable_softmax(self.table[ids[-1]])

    def generate(self, prompt: str, max_new_tokens: int) -> GenerationResult:
        """Run the seven stages greedily for ``max_new_tokens`` steps (Chapter 1)."""
        clock = StageClock("cpu")
        with clock.stage("request_parse"):
            request = parse_request(prompt, max_new_tokens)
        with clock.stage("tokenize"):
            symbols = list(request.prompt)
        with clock.stage("encode"):
            prompt_ids = self.encode("".join(symbols))
        ids = list(prompt_ids)
        new_ids: list[int] = []
        for step in range(request.max_new_tokens):
            with clock.stage("forward_pass", step):
                probs = self.next_token_probs(ids)
            with clock.stage("sample", step):
                next_id = greedy_pick(probs)
            ids.append(next_id)
            new_ids.append(next_id)
        with clock.stage("decode"):
            tokens = [self.vocabulary[i] for i in new_ids]
            text = "".join(tokens)
        with clock.stage("response_format"):
            metadata = {"generator": "toy", "seed": self.seed, "vocabulary_size": len(self.vocabulary)}
        return GenerationResult(
            prompt=request.prompt,
            prompt_ids=prompt_ids,
            token_ids=new_ids,
            tokens=tokens,
            text=text,
            timings=clock.timings,
            simulated_stages=list(self.simulated_stages),
            metadata=metadata,
        )
