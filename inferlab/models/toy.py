"""A toy model with the shape of a real one and none of its substance (Chapter 1).

The toy exists to test the interface and the timing harness: each character is a token, and its
"forward pass" is a lookup in a seeded random table, one row per previous character. It says
nothing about model quality, hardware or serving, and every result it produces lists those stages
as simulated.
"""
from __future__ import annotations

import math
import random
import string
from typing import Any

from inferlab.errors import BadRequest

#: The toy's vocabulary: one character per token (Chapter 1).
TOY_VOCABULARY: str = string.ascii_uppercase + string.ascii_lowercase + " .,!?"
#: What a toy result does not really do (Chapter 1).
TOY_SIMULATED_STAGES: tuple[str, ...] = ("forward_pass", "sampling_distribution", "kv_cache")


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


class ToyTokenizer:
    """One token per character of a fixed vocabulary; unknown characters are refused (Chapter 1)."""

    def __init__(self, vocabulary: str = TOY_VOCABULARY):
        if not vocabulary or len(set(vocabulary)) != len(vocabulary):
            raise ValueError("the vocabulary must be non-empty with no repeated symbols")
        self.vocabulary = vocabulary
        self.ids = {symbol: index for index, symbol in enumerate(vocabulary)}

    def tokenize(self, text: str) -> list[str]:
        """One symbol per character (Chapter 1)."""
        return list(text)

    def convert_tokens_to_ids(self, pieces: list[str]) -> list[int]:
        """Ids of the symbols, refusing symbols outside the vocabulary (Chapter 1)."""
        unknown = sorted({p for p in pieces if p not in self.ids})
        if unknown:
            raise BadRequest(f"the toy vocabulary has no {', '.join(map(repr, unknown))}; "
                             "it knows letters, space and . , ! ?")
        return [self.ids[p] for p in pieces]

    def decode(self, ids: list[int]) -> str:
        """The characters of the ids (Chapter 1)."""
        return "".join(self.vocabulary[i] for i in ids)


class ToyModel:
    """Next-token scores that depend on the previous token only: a row of a seeded table (Chapter 1)."""

    max_positions: int | None = None  # the toy reads one previous token, so any length fits

    def __init__(self, seed: int = 7, vocabulary: str = TOY_VOCABULARY):
        self.seed = seed
        self.vocabulary = vocabulary
        self.vocab_size = len(vocabulary)
        rng = random.Random(seed)
        self.table = [[rng.gauss(0.0, 1.0) for _ in range(self.vocab_size)] for _ in range(self.vocab_size)]
        self._rows: Any = None

    def next_token_probs(self, ids: list[int]) -> list[float]:
        """The toy forward pass in plain Python: the last token's row through a stable softmax (Chapter 1)."""
        return stable_softmax(self.table[ids[-1]])

    def new_cache(self) -> None:
        """The toy keeps no cache: it has nothing to remember beyond the last token (Chapter 1)."""
        return None

    def __call__(self, input_ids: Any, positions: Any = None, cache: Any = None, last_only: bool = False) -> Any:
        """Scores [batch, seq, vocab] (or [batch, 1, vocab]): each position's row of the table (Chapter 1)."""
        import torch

        if cache is not None:
            raise BadRequest("the toy model keeps no cache")
        if self._rows is None:
            self._rows = torch.tensor(self.table, dtype=torch.float64)
        ids = input_ids[:, -1:] if last_only else input_ids
        return self._rows[ids]
