"""Chapter 12's checkers tell right answers from wrong ones."""
import pytest

from inferbook.checks.ch12 import check_bits_per_weight, check_quantised_bytes


def test_check_bits_per_weight(capsys):
    assert check_bits_per_weight(5.0, bits=4, group_size=32, bytes_per_group=4) is True  # Q4_1
    assert check_bits_per_weight(8.5, bits=8, group_size=32, bytes_per_group=2) is True  # Q8_0
    capsys.readouterr()
    assert check_bits_per_weight(4.0, bits=4, group_size=32, bytes_per_group=4) is False
    assert "scales" in capsys.readouterr().out
    assert check_bits_per_weight(4.125, bits=4, group_size=32, bytes_per_group=4) is False
    assert "8 bits" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_bits_per_weight(1.0, bits=0, group_size=32, bytes_per_group=4)


def test_check_quantised_bytes(capsys):
    want = 7e9 * 5 / 8
    assert check_quantised_bytes(want, params=7e9, bits=4, group_size=32, bytes_per_group=4) is True
    assert check_quantised_bytes(want * 1.03, params=7e9, bits=4, group_size=32, bytes_per_group=4) is True
    capsys.readouterr()
    assert check_quantised_bytes(7e9 * 4 / 8, params=7e9, bits=4, group_size=32, bytes_per_group=4) is False
    assert "scales" in capsys.readouterr().out
    assert check_quantised_bytes(want * 8, params=7e9, bits=4, group_size=32, bytes_per_group=4) is False
    assert "bits" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_quantised_bytes(1.0, params=0, bits=4, group_size=32, bytes_per_group=4)
