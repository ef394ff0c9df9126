"""Chapter 7's checkers tell right answers from wrong ones, and agree with SciPy and the harness."""
import itertools
import math

import pytest
from scipy.stats import binomtest

from inferbook.checks.ch07 import (check_min_repeats, check_sign_test_p, check_wrong_winner, median_coverage,
                                   min_repeats, sign_test_p, wrong_winner_normal)
from inferlab.bench.harness import interval_coverage, median_interval


def test_median_coverage_counts_sign_patterns():
    for n, drop in [(6, 0), (9, 1), (12, 2)]:
        hits = sum(drop < sum(s) < n - drop for s in itertools.product((0, 1), repeat=n)) / 2**n
        assert median_coverage(n, drop) == pytest.approx(hits)
        assert median_coverage(n, drop) == pytest.approx(interval_coverage(n, drop))
    with pytest.raises(ValueError):
        median_coverage(4, 2)


def test_min_repeats_matches_the_harness():
    assert (min_repeats(0.95, 0), min_repeats(0.95, 1), min_repeats(0.95, 2)) == (6, 9, 12)
    for drop in range(4):
        n = min_repeats(0.95, drop)
        assert median_interval(list(range(n)))[0] == drop  # the harness drops exactly as many at n
        assert median_interval(list(range(n - 1)))[0] < drop if drop else True
    with pytest.raises(ValueError, match="too few"):
        median_interval(list(range(min_repeats(0.95, 0) - 1)))


def test_check_min_repeats(capsys):
    assert check_min_repeats(9, drop=1) is True
    assert check_min_repeats(8, drop=1) is False
    assert "covers the median only" in capsys.readouterr().out
    assert check_min_repeats(6) is True and check_min_repeats(5) is False


@pytest.mark.parametrize("pairs", [6, 10, 15])
def test_sign_test_p_matches_scipy(pairs):
    for slower in range(pairs + 1):
        assert sign_test_p(slower, pairs) == pytest.approx(binomtest(slower, pairs, 0.5).pvalue)


def test_check_sign_test_p(capsys):
    want = 2 * (10 + 1) / 1024
    assert check_sign_test_p(want, 9, 10) is True
    assert check_sign_test_p(want / 2, 9, 10) is False
    assert "two-sided" in capsys.readouterr().out


def test_wrong_winner_normal_and_its_checker(capsys):
    assert wrong_winner_normal(0.02, 0.0) == pytest.approx(0.5)
    # difference 2.5 %, spread 2 % per run: z = 0.025 / (0.02 * sqrt 2) = 0.884, tail 0.188
    assert wrong_winner_normal(0.02, 0.025) == pytest.approx(0.1884, abs=5e-4)
    assert check_wrong_winner(0.19, 0.02, 0.025) is True
    assert check_wrong_winner(0.106, 0.02, 0.025) is False  # forgot the sqrt(2)
    assert "sqrt(2)" in capsys.readouterr().out
    # The chapter's case, a small share: spread 0.5 %, difference 2.5 %. The forgotten sqrt(2) gives a share
    # about a thousand times smaller, still within any absolute tolerance of the right one: it must fail.
    want = wrong_winner_normal(0.005, 0.025)
    assert want == pytest.approx(2.0e-4, rel=0.05)
    assert check_wrong_winner(want * 1.05, 0.005, 0.025) is True
    assert check_wrong_winner(0.5 * math.erfc(5 / math.sqrt(2)), 0.005, 0.025) is False
    assert "sqrt(2)" in capsys.readouterr().out
    assert check_wrong_winner(0.0, 0.005, 0.025) is False
    with pytest.raises(ValueError):
        wrong_winner_normal(0.0, 0.1)


def test_decode_floor_and_its_checker(capsys):
    from inferbook.checks.ch07 import check_decode_floor_ms, decode_floor_ms

    # 7e9 parameters at 2 bytes read at 2 TB/s: 14 GB / 2e12 B/s = 7 ms
    assert decode_floor_ms(7e9, 2, 2e12) == pytest.approx(7.0)
    assert check_decode_floor_ms(7.0, 7e9, 2, 2e12) is True
    assert check_decode_floor_ms(3.5, 7e9, 2, 2e12) is False  # forgot the bytes per parameter
    assert "count bytes" in capsys.readouterr().out
    assert check_decode_floor_ms(0.007, 7e9, 2, 2e12) is False
    assert "seconds" in capsys.readouterr().out
    with pytest.raises(ValueError):
        decode_floor_ms(7e9, 2, 0)
