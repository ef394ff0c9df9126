"""Checkers for the exercises of Chapter 5: each prints a one-line verdict and returns it as a boolean."""
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
