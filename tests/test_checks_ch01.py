"""The checkers of Chapter 1's "Check yourself" questions tell right answers from wrong ones."""
import pytest

from inferbook.checks.ch01 import (check_amdahl_bound, check_cost_per_million, check_lm_head_waste,
                                   check_no_cache_estimate)


def test_no_cache_estimate_sums_every_step(capsys):
    # 3 steps over 10, 11, 12 positions at 100 ms + 2 ms per position: 300 + 66 ms
    assert check_no_cache_estimate(0.366, intercept_ms=100, slope_ms=2, prompt_tokens=10, new_tokens=3)
    assert not check_no_cache_estimate(0.300, intercept_ms=100, slope_ms=2, prompt_tokens=10, new_tokens=3)
    # one step's time times the count, forgetting that each step is longer, is wrong for long answers
    assert not check_no_cache_estimate(200 * (100 + 2 * 17) / 1e3, 100, 2, prompt_tokens=17, new_tokens=200)
    assert "right" in capsys.readouterr().out


def test_amdahl_bound_rejects_no_speed_up_and_the_inverse_share(capsys):
    assert check_amdahl_bound(1 / 0.998, removable_share=0.002)
    assert not check_amdahl_bound(1.0, removable_share=0.002)       # "nothing to gain" is not the bound
    assert not check_amdahl_bound(1 / 0.002, removable_share=0.002)  # confusing the share with its complement
    assert not check_amdahl_bound(1.002 * 2, removable_share=0.002)
    assert check_amdahl_bound(1.0, removable_share=0.0)
    with pytest.raises(ValueError):
        check_amdahl_bound(2.0, removable_share=1.0)
    assert "largest speed-up" in capsys.readouterr().out


def test_cost_per_million():
    # 0.36 core-seconds per token: 360,000 core-seconds = 100 core-hours per million tokens
    assert check_cost_per_million(4.0, core_seconds_per_token=0.36, price_per_core_hour=0.04)
    assert not check_cost_per_million(4.0 * 3600, core_seconds_per_token=0.36, price_per_core_hour=0.04)
    assert not check_cost_per_million(0.04, core_seconds_per_token=0.36, price_per_core_hour=0.04)


def test_lm_head_waste_counts_all_but_the_last_position():
    hidden, vocab = 576, 49_152
    per_position = 2 * hidden * vocab / 1e9
    assert check_lm_head_waste(999 * per_position, hidden, vocab, positions=1000)
    assert check_lm_head_waste(1000 * per_position, hidden, vocab, positions=1000)  # within 5 %: the idea is right
    assert not check_lm_head_waste(per_position, hidden, vocab, positions=1000)      # only the needed row
    assert not check_lm_head_waste(999 * per_position / 2, hidden, vocab, positions=1000)  # forgot the factor 2
