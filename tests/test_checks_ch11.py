"""Chapter 11's checkers tell right answers from wrong ones."""
import pytest

from inferbook.checks.ch11 import check_break_even_tokens, check_crossover, check_launch_over_floor


def test_check_crossover(capsys):
    assert check_crossover(2e-6 / 0.5e-9, 2e-6, 0.5e-9) is True
    assert check_crossover(4000 * 1.03, 2e-6, 0.5e-9) is True
    assert check_crossover(2e-6 * 0.5e-9, 2e-6, 0.5e-9) is False
    assert "divide instead" in capsys.readouterr().out
    assert check_crossover(400, 2e-6, 0.5e-9) is False
    with pytest.raises(ValueError):
        check_crossover(1.0, 0.0, 1e-9)


def test_check_launch_over_floor(capsys):
    # 600 kernels at 4 µs against 270 MB at 3.35 TB/s
    want = 600 * 4e-6 / (270e6 / 3.35e12)
    assert check_launch_over_floor(want, 600, 4e-6, 270e6, 3.35e12) is True
    assert check_launch_over_floor(1 / want, 600, 4e-6, 270e6, 3.35e12) is False
    assert "invert" in capsys.readouterr().out
    assert check_launch_over_floor(want * 2, 600, 4e-6, 270e6, 3.35e12) is False


def test_check_break_even_tokens(capsys):
    assert check_break_even_tokens(10 / (0.05 - 0.03), 10, 0.05, 0.03) is True
    assert check_break_even_tokens(10 / 0.03, 10, 0.05, 0.03) is False
    assert "saving per token" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_break_even_tokens(1, 10, 0.03, 0.05)
