"""Chapter 5: diversity measures over generated token ids."""
from __future__ import annotations

import pytest

from inferlab.analysis.diversity import distinct_n, repetition_rate
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
