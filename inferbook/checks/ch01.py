"""Checkers for the exercises of Chapter 1: each says whether a reader's answer behaves as asked.

Each function names the chapter and exercise it checks, prints a one-line verdict and returns it
as a boolean, so it works both in a notebook cell and in a test.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inferlab.engine import TokenGenerator
    from inferlab.records import GenerationResult


def same_output_twice(generator: TokenGenerator, prompt: str = "Hello", max_new_tokens: int = 8) -> bool:
    """Does the generator give the same tokens for the same request twice? (Chapter 1)"""
    first = generator.generate(prompt, max_new_tokens)
    second = generator.generate(prompt, max_new_tokens)
    same = first.token_ids == second.token_ids
    print(f"{'same' if same else 'different'} tokens on two identical requests: "
          f"{first.text!r} / {second.text!r}")
    return same


def check_toy_sampling(make: Callable[[int], TokenGenerator], prompt: str = "Hello",
                       max_new_tokens: int = 16) -> bool:
    """Chapter 1, exercise 1: a sampling toy, built by ``make(sample_seed)``, is repeatable and samples.

    ``make`` must build the reader's toy on the table of ``ToyGenerator(seed=7)`` with the given
    sampling seed. Passes when one sampling seed gives the same tokens on two requests, and when five
    sampling seeds do not all reproduce the greedy toy's output (greedy would pass the first test).
    """
    from inferlab.engine import ToyGenerator

    repeatable = same_output_twice(make(7), prompt, max_new_tokens)
    greedy = ToyGenerator(seed=7).generate(prompt, max_new_tokens).token_ids
    outputs = {tuple(make(seed).generate(prompt, max_new_tokens).token_ids) for seed in range(1, 6)}
    samples = len(outputs) > 1 or outputs != {tuple(greedy)}
    print("repeatable per seed: " + ("yes" if repeatable else "no") +
          "; differs from greedy decoding: " + ("yes" if samples else "no"))
    return repeatable and samples


def has_stop_reason(result: GenerationResult) -> bool:
    """Chapter 1, exercise 2: does a result say why generation stopped, with a known reason?"""
    from inferlab.records import STOP_REASONS

    reason = getattr(result, "stop_reason", None)
    ok = reason in STOP_REASONS
    print(f"stop_reason = {reason!r}: {'ok' if ok else 'expected one of ' + ', '.join(STOP_REASONS)}")
    return ok
