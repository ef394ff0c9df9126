"""Diversity of generated text: how much of it repeats, across samples and within one (Chapter 5)."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from inferlab.errors import BadRequest

#: What :func:`distinct_n` divides by: every n-gram (the lab's default), or every generated token
#: (Li et al., 2016, who scale the number of distinct n-grams "by total number of generated tokens").
DENOMINATORS = ("ngrams", "tokens")


def _ngrams(sample: Sequence[int], n: int) -> list[tuple[int, ...]]:
    """Every run of ``n`` consecutive ids in one sample, in order (Chapter 5)."""
    if n < 1:
        raise BadRequest(f"n must be at least 1, got {n}")
    return [tuple(sample[i:i + n]) for i in range(len(sample) - n + 1)]


def distinct_n(samples: Sequence[Sequence[int]], n: int, denominator: str = "ngrams") -> float:
    """Distinct-n: unique n-grams pooled across samples, over all n-grams or all tokens (Chapter 5).

    ``denominator="ngrams"`` (the default) divides by the number of n-grams, so 1 means no n-gram
    repeats; ``"tokens"`` divides by the number of tokens, as Li et al. (2016) scale distinct-1 and
    distinct-2. The two agree for n = 1; for n > 1 a sample of L tokens has L - n + 1 n-grams, so
    the token version is lower. Either counts ids of the model's tokenizer, not words.
    """
    if n < 1:
        raise BadRequest(f"n must be at least 1, got {n}")
    if denominator not in DENOMINATORS:
        raise BadRequest(f"denominator must be one of {DENOMINATORS}, got {denominator!r}")
    grams = [gram for sample in samples for gram in _ngrams(sample, n)]
    if not grams:
        raise BadRequest(f"no sample is long enough for {n}-grams")
    total = len(grams) if denominator == "ngrams" else sum(len(sample) for sample in samples)
    return len(set(grams)) / total


def repetition_rate(sample: Sequence[int], n: int = 2) -> float:
    """Within one sample: the share of its n-grams that already occurred earlier in it (Chapter 5)."""
    grams = _ngrams(sample, n)
    if not grams:
        raise BadRequest(f"the sample has fewer than {n} tokens")
    return 1.0 - len(set(grams)) / len(grams)


def jackknife_se(statistic: Callable[[list[int]], float], n: int) -> float:
    """Jackknife standard error of ``statistic(indices)`` over ``n`` units, leaving one out at a time (Chapter 5).

    ``statistic`` receives the indices of the units kept. For a paired comparison of two rules run
    with the same seeds, leave out the same seed from both, and the error is that of the difference.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise BadRequest(f"the jackknife needs at least 2 units, got {n!r}")
    values = [statistic([j for j in range(n) if j != i]) for i in range(n)]
    mean = sum(values) / n
    return math.sqrt((n - 1) / n * sum((v - mean) ** 2 for v in values))
