"""Checkers for the exercises and check-yourself questions of Chapter 5: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def check_top_p(top_p_fn: Callable[[Any, float], Any], trials: int = 20) -> bool:
    """Compare a reader's ``top_p_fn(logits, p) -> logits`` with transformers' TopPLogitsWarper (Chapter 5).

    The random logits have no exact ties, where the lab's TopP and transformers' may differ.
    """
    import torch
    from transformers.generation.logits_process import TopPLogitsWarper

    g = torch.Generator().manual_seed(0)
    for trial in range(trials):
        logits = torch.randn(4, 300, generator=g) * (1 + trial % 4)
        p = [0.3, 0.5, 0.8, 0.95][trial % 4]
        mine = top_p_fn(logits.clone(), p)
        ref = TopPLogitsWarper(p)(None, logits.clone())
        if not torch.equal(torch.isfinite(mine), torch.isfinite(ref)):
            print(f"wrong: at p={p} you keep {int(torch.isfinite(mine).sum())} tokens, transformers {int(torch.isfinite(ref).sum())}")
            return False
        if not torch.allclose(torch.softmax(mine, -1), torch.softmax(ref, -1), atol=1e-6):
            print(f"wrong: the kept sets agree at p={p}, but the probabilities do not")
            return False
    print(f"right: same kept tokens and probabilities as transformers in {trials} trials")
    return True


def check_distinct_n(fn: Callable[[Sequence[Sequence[int]], int], float]) -> bool:
    """Check a reader's ``distinct_n(samples, n)`` against the lab's on fixed cases (Chapter 5)."""
    from inferlab.analysis.diversity import distinct_n

    cases = [([[1, 2, 3], [1, 2, 3]], 1), ([[1, 2, 1, 2], [3, 4]], 2), ([[5] * 6], 1), ([[1, 2, 3, 4]], 3)]
    for samples, n in cases:
        got, want = fn(samples, n), distinct_n(samples, n)
        if abs(got - want) > 1e-12:
            print(f"wrong: distinct-{n} of {samples} is {want:.4f}, you gave {got:.4f}")
            return False
    print("right: pooled unique n-grams over all n-grams, on every case")
    return True



def _number(answer: object) -> float | None:
    """The answer as a float, or None when it is not a number."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return None
    return float(answer)


def check_beam_rows(answer: object, num_beams: int = 3, steps: int = 12) -> bool:
    """Chapter 5, check yourself: rows a beam search without a cache sends through the model.

    The first step scores the prompt alone (one row); every later step scores one row per running
    beam, so with no hypothesis finishing early the count is ``1 + num_beams * (steps - 1)``.
    """
    want = 1 + num_beams * (steps - 1)
    ok = _number(answer) == want
    print(f"right: {want} rows" if ok else
          f"wrong: count the rows of each of the {steps} steps (the first step has only the prompt)")
    return ok


def check_penalty_drop(answer: object, frequency: float = 0.5, presence: float = 0.3, count: int = 3) -> bool:
    """Chapter 5, check yourself: how far the additive penalties lower the logit of a token generated ``count`` times.

    OpenAI's documented formula subtracts ``count * frequency + (count > 0) * presence``; the prompt's
    copies of the token do not count.
    """
    want = count * frequency + (presence if count > 0 else 0.0)
    got = _number(answer)
    ok = got is not None and abs(got - want) <= 1e-6 * max(1.0, abs(want))
    print(f"right: {count} x {frequency:g} + {presence:g} = {want:g}" if ok else
          "wrong: the frequency penalty counts every generated copy, the presence penalty applies once")
    return ok


def check_random_draws(answer: object, rows: int, vocab: int) -> bool:
    """Chapter 5, check yourself: random numbers one sampling step consumes with ``torch.multinomial``.

    One draw per row is an exponential race over the whole vocabulary: one random number per entry.
    """
    want = rows * vocab
    ok = _number(answer) == want
    print(f"right: {want:,} random numbers" if ok else
          "wrong: one draw is a race in which every vocabulary entry gets its own random number")
    return ok


def check_batch_share(answer: object, sampler_ms: float, rows: int, forward_ms: float, tolerance: float = 3.0) -> bool:
    """Chapter 5, check yourself: the share of a batched step (in %) a row-by-row sampler would take.

    The sampler's time grows with the rows, ``rows * sampler_ms``; the batched forward pass is measured
    as a whole, ``forward_ms``. The share is ``sampler / (sampler + forward)``, within ``tolerance`` points.
    """
    sampler = rows * sampler_ms
    want = sampler / (sampler + forward_ms) * 100
    got = _number(answer)
    ok = got is not None and abs(got - want) <= tolerance
    print(f"right: about {want:.0f} % of the step" if ok else
          "wrong: multiply one row's sampler time by the rows, then compare it with the whole step "
          "(sampler plus forward pass), in per cent")
    return ok
