"""Chapter 5: the check-yourself checkers tell right answers from wrong ones."""
from __future__ import annotations

import pytest

from inferbook.checks.ch05 import check_batch_share, check_beam_rows, check_penalty_drop, check_random_draws


def test_beam_rows_counts_the_prompt_once(capsys):
    assert check_beam_rows(34) is True
    assert check_beam_rows(36) is False  # three rows at every step, the first included
    assert check_beam_rows(1 + 4 * 7, num_beams=4, steps=8) is True
    assert "wrong" in capsys.readouterr().out


def test_penalty_drop_is_frequency_times_count_plus_presence(capsys):
    assert check_penalty_drop(1.8) is True
    assert check_penalty_drop(1.5) is False  # the presence penalty forgotten
    assert check_penalty_drop(2.3) is False  # the prompt's copy counted as well
    assert check_penalty_drop(0.0, count=0) is True
    assert "wrong" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["1.8", None, True])
def test_checkers_refuse_non_numbers(bad):
    assert check_penalty_drop(bad) is False
    assert check_beam_rows(bad) is False
    assert check_random_draws(bad, 64, 100) is False


def test_random_draws_are_one_per_vocabulary_entry(capsys):
    assert check_random_draws(64 * 49_152, rows=64, vocab=49_152) is True
    assert check_random_draws(64, rows=64, vocab=49_152) is False  # one uniform per row is the CDF method
    assert "wrong" in capsys.readouterr().out


def test_batch_share_counts_the_sampler_per_row_and_the_forward_pass_once(capsys):
    # 64 rows x 5 ms = 320 ms of sampling against a 240 ms forward pass: 320 / 560 = 57 %
    assert check_batch_share(57.1, sampler_ms=5.0, rows=64, forward_ms=240.0) is True
    assert check_batch_share(2.0, sampler_ms=5.0, rows=64, forward_ms=240.0) is False  # one row's share
    assert check_batch_share(133.0, sampler_ms=5.0, rows=64, forward_ms=240.0) is False  # sampler over forward
    assert check_batch_share("57", sampler_ms=5.0, rows=64, forward_ms=240.0) is False
    assert "wrong" in capsys.readouterr().out
