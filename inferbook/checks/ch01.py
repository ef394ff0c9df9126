"""Checkers for the exercises and the "Check yourself" questions of Chapter 1.

Each function names the chapter and the exercise or question it checks, prints a one-line verdict
and returns it as a boolean, so it works both in a notebook cell and in a test. The numeric
checkers take this run's measurements as arguments, so they judge an answer against the reader's
own machine.
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


def _verdict(name: str, answer: float, expected: float, ok: bool, unit: str = "") -> bool:
    print(f"{name}: your answer {answer:.6g}{unit}, expected about {expected:.6g}{unit}: "
          + ("right" if ok else "not right"))
    return ok


def check_no_cache_estimate(answer_s: float, intercept_ms: float, slope_ms: float, prompt_tokens: int,
                            new_tokens: int = 200, tolerance: float = 0.1) -> bool:
    """Chapter 1, Check yourself 1: time of ``new_tokens`` steps without a cache, from a straight-line fit.

    Step ``k`` (from 0) processes ``prompt_tokens + k`` positions and takes
    ``intercept_ms + slope_ms * positions``; the answer, in seconds, is the sum over all steps,
    accepted within ``tolerance`` (relative).
    """
    expected = sum(intercept_ms + slope_ms * (prompt_tokens + k) for k in range(new_tokens)) / 1e3
    ok = abs(answer_s - expected) <= tolerance * abs(expected)
    return _verdict("time for the whole answer", answer_s, expected, ok, " s")


def check_amdahl_bound(answer: float, removable_share: float, tolerance: float = 0.05) -> bool:
    """Chapter 1, Check yourself 2: the largest speed-up from removing a share of the time entirely.

    Amdahl's law gives ``1 / (1 - removable_share)``. The answer's gain over 1 must be within
    ``tolerance`` (relative) of the expected gain, so that "no speed-up at all" is not accepted.
    """
    if not 0 <= removable_share < 1:
        raise ValueError(f"removable_share must be in [0, 1), got {removable_share}")
    expected = 1 / (1 - removable_share)
    gain = expected - 1
    ok = abs((answer - 1) - gain) <= tolerance * gain if gain > 0 else abs(answer - 1) < 1e-12
    return _verdict("largest speed-up", answer, expected, ok, " times")


def check_cost_per_million(answer: float, core_seconds_per_token: float, price_per_core_hour: float,
                           tolerance: float = 0.05) -> bool:
    """Chapter 1, Check yourself 5: the price of a million tokens at a given core-seconds per token."""
    expected = core_seconds_per_token * 1e6 / 3600 * price_per_core_hour
    ok = abs(answer - expected) <= tolerance * abs(expected)
    return _verdict("cost of a million tokens", answer, expected, ok)


def check_lm_head_waste(answer_gflop: float, hidden: int, vocab: int, positions: int,
                        tolerance: float = 0.05) -> bool:
    """Chapter 1, Check yourself 6: LM-head GFLOP spent on the positions whose scores are thrown away.

    The head costs ``2 * hidden * vocab`` operations per position; a step over ``positions``
    positions needs only the last one's row.
    """
    expected = (positions - 1) * 2 * hidden * vocab / 1e9
    ok = abs(answer_gflop - expected) <= tolerance * abs(expected)
    return _verdict("wasted LM-head work", answer_gflop, expected, ok, " GFLOP")
