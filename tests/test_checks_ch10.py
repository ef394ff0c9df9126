"""Chapter 10's checkers tell right answers from wrong ones."""
import pytest

from inferbook.checks.ch10 import (check_attainable, check_batch_at_ridge, check_decode_bound_tokens_per_s,
                                   check_mbu, check_ridge_point)


def test_check_decode_bound_tokens_per_s(capsys):
    # a 7B model in bfloat16 on an H100 SXM's datasheet bandwidth
    want = 3.35e12 / (7e9 * 2)
    assert check_decode_bound_tokens_per_s(want, 7e9, 2, 3.35e12) is True
    assert check_decode_bound_tokens_per_s(want * 1.04, 7e9, 2, 3.35e12) is True
    assert check_decode_bound_tokens_per_s(0.7 * want, 7e9, 2, 3.35e12, utilisation=0.7) is True
    capsys.readouterr()
    assert check_decode_bound_tokens_per_s(want, 7e9, 2, 3.35e12, utilisation=0.7) is False
    assert "utilisation" in capsys.readouterr().out
    assert check_decode_bound_tokens_per_s(want * 2, 7e9, 2, 3.35e12) is False  # bytes per parameter left out
    assert "bytes per parameter" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_decode_bound_tokens_per_s(1.0, 0, 2, 3.35e12)


def test_check_mbu(capsys):
    want = 30 * 538e6 / 27e9
    assert check_mbu(want, 30, 538e6, 27e9) is True
    assert check_mbu(want * 1.02, 30, 538e6, 27e9) is True
    capsys.readouterr()
    assert check_mbu(100 * want, 30, 538e6, 27e9) is False
    assert "fraction" in capsys.readouterr().out
    assert check_mbu(1 / want, 30, 538e6, 27e9) is False
    assert "upside down" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_mbu(0.5, 30, 538e6, 0)


def test_check_ridge_point(capsys):
    assert check_ridge_point(989e12 / 3.35e12, 989e12, 3.35e12) is True
    capsys.readouterr()
    assert check_ridge_point(3.35e12 / 989e12, 989e12, 3.35e12) is False
    assert "upside down" in capsys.readouterr().out
    assert check_ridge_point(10.0, 989e12, 3.35e12) is False


def test_check_batch_at_ridge(capsys):
    ridge = 312e12 / 2.039e12
    assert check_batch_at_ridge(ridge, 312e12, 2.039e12, 2) is True  # two bytes, two FLOPs: the ridge itself
    assert check_batch_at_ridge(2 * ridge, 312e12, 2.039e12, 4) is True  # float32: twice the batch
    capsys.readouterr()
    assert check_batch_at_ridge(ridge, 312e12, 2.039e12, 4) is False
    assert "ridge in FLOP per byte" in capsys.readouterr().out
    assert check_batch_at_ridge(1.0, 312e12, 2.039e12, 2) is False


def test_check_attainable(capsys):
    assert check_attainable(0.5 * 27e9, 0.5, 80e9, 27e9) is True  # below the ridge: the memory roof
    assert check_attainable(80e9, 50, 80e9, 27e9) is True  # above it: the compute roof
    capsys.readouterr()
    assert check_attainable(50 * 27e9, 50, 80e9, 27e9) is False
    assert "lower of the two" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_attainable(1.0, 0, 80e9, 27e9)
