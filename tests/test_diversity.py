"""Chapter 5: diversity measures over generated token ids."""
from __future__ import annotations

import pytest

from inferlab.analysis.diversity import distinct_n, jackknife_se, repetition_rate
from inferlab.errors import BadRequest


def test_distinct_n_pools_the_samples():
    assert distinct_n([[1, 2, 3], [1, 2, 3]], 1) == 0.5
    assert distinct_n([[1, 2, 3], [4, 5, 6]], 2) == 1.0
    assert distinct_n([[5] * 6], 1) == pytest.approx(1 / 6)
    assert distinct_n([[1], [1, 2, 1, 2]], 2) == pytest.approx(2 / 3)  # a sample too short adds no n-grams


def test_repetition_rate_is_within_one_sample():
    assert repetition_rate([1, 2, 1, 2, 1, 2], 2) == pytest.approx(1 - 2 / 5)
    assert repetition_rate([1, 2, 3, 4], 2) == 0.0
    assert repetition_rate([7, 7, 7, 7]) == pytest.approx(2 / 3)


def test_distinct_n_over_tokens_is_li_et_al_scaling():
    # Li et al. (2016) divide the distinct n-grams by the number of generated tokens
    samples = [[1, 2, 3, 1], [1, 2, 4, 5]]
    assert distinct_n(samples, 2, denominator="tokens") == pytest.approx(5 / 8)  # (1,2) (2,3) (3,1) (2,4) (4,5)
    assert distinct_n(samples, 2) == pytest.approx(5 / 6)
    assert distinct_n(samples, 1, denominator="tokens") == distinct_n(samples, 1)  # the same for unigrams
    # equal-length samples: the token version is the n-gram version times (L - n + 1) / L
    assert distinct_n(samples, 2, denominator="tokens") == pytest.approx(distinct_n(samples, 2) * 3 / 4)
    with pytest.raises(BadRequest):
        distinct_n(samples, 2, denominator="words")


def test_jackknife_standard_error_of_a_mean_is_the_textbook_one():
    values = [1.0, 4.0, 2.0, 8.0, 5.0]
    se = jackknife_se(lambda idx: sum(values[i] for i in idx) / len(idx), len(values))
    mean = sum(values) / 5
    textbook = (sum((v - mean) ** 2 for v in values) / 4 / 5) ** 0.5  # sample sd / sqrt(n)
    assert se == pytest.approx(textbook)
    assert jackknife_se(lambda idx: 3.0, 4) == 0.0
    with pytest.raises(BadRequest):
        jackknife_se(lambda idx: 0.0, 1)


@pytest.mark.parametrize("measure", [lambda: distinct_n([[1]], 2), lambda: distinct_n([], 1),
                                     lambda: distinct_n([[1, 2]], 0), lambda: repetition_rate([1], 2),
                                     lambda: repetition_rate([1, 2], 0)])
def test_too_short_or_bad_n_is_refused(measure):
    with pytest.raises(BadRequest):
        measure()


def test_distinct_n_checker_tells_right_from_wrong():
    from inferbook.checks.ch05 import check_distinct_n

    assert check_distinct_n(distinct_n) is True
    assert check_distinct_n(lambda samples, n: 1.0) is False
