"""Checkers for the questions and exercises of Chapter 7: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

import math


def _close(answer: float, want: float, rel: float) -> bool:
    return abs(answer - want) <= rel * abs(want)


def median_coverage(n: int, drop: int) -> float:
    """Chapter 7: probability that the interval from the (drop+1)-th smallest to the (drop+1)-th largest of n covers the median."""
    if n < 1 or drop < 0 or 2 * drop >= n:
        raise ValueError(f"need n >= 1 and 0 <= drop < n / 2, got n={n}, drop={drop}")
    tail = sum(math.comb(n, j) for j in range(drop + 1)) / 2**n
    return 1 - 2 * tail


def min_repeats(level: float = 0.95, drop: int = 0) -> int:
    """Chapter 7: the fewest samples whose interval, ``drop`` samples in from each end, covers the median at ``level``."""
    if not 0 < level < 1 or drop < 0:
        raise ValueError(f"need 0 < level < 1 and drop >= 0, got {level} and {drop}")
    n = 2 * drop + 1
    while median_coverage(n, drop) < level:
        n += 1
    return n


def check_min_repeats(answer: int, level: float = 0.95, drop: int = 0) -> bool:
    """Chapter 7, Check yourself and Exercises: how many repetitions a distribution-free interval of the median needs.

    The interval runs from the (drop+1)-th smallest to the (drop+1)-th largest sample; it covers the
    median with probability ``1 - 2 P(B <= drop)``, with B binomial(n, 1/2).
    """
    want = min_repeats(level, drop)
    if answer == want:
        print(f"right: {want} samples; the interval then covers the median with probability "
              f"{median_coverage(want, drop):.1%}")
        return True
    if answer > 2 * drop and answer < want:
        print(f"not quite: with {answer} samples that interval covers the median only "
              f"{median_coverage(answer, drop):.1%} of the time, under {level:.0%}")
    else:
        print(f"not quite: {answer}; {want - 1} samples are too few, {want} are enough")
    return False


def sign_test_p(slower: int, pairs: int) -> float:
    """Chapter 7: two-sided p-value of the sign test, ``slower`` of ``pairs`` pairs going one way."""
    if not 0 <= slower <= pairs or pairs < 1:
        raise ValueError(f"need 0 <= slower <= pairs and pairs >= 1, got {slower} and {pairs}")
    extreme = max(slower, pairs - slower)
    return min(1.0, 2 * sum(math.comb(pairs, j) for j in range(extreme, pairs + 1)) / 2**pairs)


def check_sign_test_p(answer: float, slower: int, pairs: int, rel: float = 0.02) -> bool:
    """Chapter 7, Check yourself: the two-sided sign-test p-value when one variant was slower in ``slower`` of ``pairs``."""
    want = sign_test_p(slower, pairs)
    if _close(answer, want, rel):
        print(f"right: p = {want:.4f} (both tails of binomial({pairs}, 1/2))")
        return True
    hint = " (that is one tail: the test is two-sided)" if _close(answer, want / 2, rel) else ""
    print(f"not quite: {answer:.4g}, expected {want:.4f}{hint}")
    return False


def wrong_winner_normal(spread: float, difference: float) -> float:
    """Chapter 7: chance that one run of each of two variants ranks them wrongly, for normal noise.

    ``spread`` is the relative standard deviation of one run, ``difference`` the true relative
    difference; the difference of two runs then has standard deviation ``spread * sqrt(2)``.
    """
    if spread <= 0 or difference < 0:
        raise ValueError(f"need spread > 0 and difference >= 0, got {spread} and {difference}")
    return 0.5 * math.erfc(difference / (spread * math.sqrt(2)) / math.sqrt(2))


def check_wrong_winner(answer: float, spread: float, difference: float, rel: float = 0.1) -> bool:
    """Chapter 7, Check yourself: estimate how often one run of each variant picks the wrong winner (normal noise)."""
    want = wrong_winner_normal(spread, difference)
    if _close(answer, want, rel):  # relative: a share of 1e-4 and one of 3e-7 are different answers
        print(f"right: about {want:.2g} ({want:.2%})")
        return True
    hint = ""
    if _close(answer, 0.5 * math.erfc(difference / spread / math.sqrt(2)), rel):
        hint = " (the difference of two runs carries the noise of both: the spread grows by sqrt(2))"
    print(f"not quite: {answer:.3g}, expected about {want:.2g}{hint}")
    return False


def decode_floor_ms(parameters: float, bytes_per_param: float, bandwidth: float) -> float:
    """Chapter 7 (after Chapter 2's decode bound): milliseconds to read the weights once at ``bandwidth`` bytes/s."""
    if parameters <= 0 or bytes_per_param <= 0 or bandwidth <= 0:
        raise ValueError(f"need positive parameters, bytes per parameter and bandwidth, got "
                         f"{parameters}, {bytes_per_param} and {bandwidth}")
    return parameters * bytes_per_param / bandwidth * 1e3


def check_decode_floor_ms(answer: float, parameters: float, bytes_per_param: float, bandwidth: float,
                          rel: float = 0.05) -> bool:
    """Chapter 7, Check yourself: the shortest a batch-1 decode step can take, in ms, from its weight bytes."""
    want = decode_floor_ms(parameters, bytes_per_param, bandwidth)
    if _close(answer, want, rel):
        print(f"right: about {want:.3g} ms; a step reported faster than that was not timed to its end")
        return True
    hint = ""
    if _close(answer, want / bytes_per_param, rel):
        hint = " (count bytes, not parameters: each parameter takes bytes_per_param bytes)"
    elif _close(answer, want / 1e3, rel):
        hint = " (that is in seconds: the question asks for milliseconds)"
    print(f"not quite: {answer:.3g} ms, expected about {want:.3g} ms{hint}")
    return False
