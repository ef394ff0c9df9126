"""Chapter 6's checkers tell right answers from wrong ones."""
import pytest

from inferbook.checks.ch06 import check_batch_detok_ms, check_redecode_seconds, check_ttft_estimate


def test_check_ttft_estimate(capsys):
    forward = {17: 150.0, 68: 260.0, 136: 400.0}
    want = 150.0 + 250.0 * (272 - 17) / (136 - 17) + 0.4  # the line through the shortest and the longest
    assert check_ttft_estimate(want, forward, 0.4, 272) is True
    assert check_ttft_estimate(want * 1.02, forward, 0.4, 272) is True
    assert check_ttft_estimate(400.0, forward, 0.4, 272) is False  # the longest measured, not extrapolated
    capsys.readouterr()
    line = want - 0.4
    assert check_ttft_estimate(line, forward, 100.0, 272) is False  # the engine's 100 ms left out
    assert "forget the engine" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_ttft_estimate(1.0, {17: 1.0}, 0.0, 20)


def test_check_redecode_seconds(capsys):
    assert check_redecode_seconds(0.25 * 2048 * 2049 / 2 * 1e-6, 0.25, 2048) is True
    assert check_redecode_seconds(0.25 * 2048 * 2048 * 1e-6, 0.25, 2048) is False
    assert "answer so far" in capsys.readouterr().out
    assert check_redecode_seconds(0.25 * 2048 * 1e-6, 0.25, 2048) is False


def test_check_batch_detok_ms():
    assert check_batch_detok_ms(0.25 * 64 * 2048 / 1e3, 0.25, 64, 2048) is True
    assert check_batch_detok_ms(0.25 * 2048 / 1e3, 0.25, 64, 2048) is False
