"""Diversity of generated text: how much of it repeats, across samples and within one (Chapter 5)."""
from __future__ import annotations

from collections.abc import Sequence

from inferlab.errors import BadRequest


def _ngrams(sample: Sequence[int], n: int) -> list[tuple[int, ...]]:
    """Every run of ``n`` consecutive ids in one sample, in order (Chapter 5)."""
    if n < 1:
        raise BadRequest(f"n must be at least 1, got {n}")
    return [tuple(sample[i:i + n]) for i in range(len(sample) - n + 1)]


def distinct_n(samples: Sequence[Sequence[int]], n: int) -> float:
    """Distinct-n: unique n-grams over all n-grams, pooled across samples; 1 means no n-gram repeats (Chapter 5)."""
    if n < 1:
        raise BadRequest(f"n must be at least 1, got {n}")
    grams = [gram for sample in samples for gram in _ngrams(sample, n)]
    if not grams:
        raise BadRequest(f"no sample is long enough for {n}-grams")
    return len(set(grams)) / len(grams)


def repetition_rate(sample: Sequence[int], n: int = 2) -> float:
    """Within one sample: the share of its n-grams that already occurred earlier in it (Chapter 5)."""
    grams = _ngrams(sample, n)
    if not grams:
        raise BadRequest(f"the sample has fewer than {n} tokens")
    return 1.0 - len(set(grams)) / len(grams)
