"""Chapter 13's checkers tell right answers from wrong ones."""
import pytest

from inferbook.checks.ch13 import check_decode_intensity, check_kv_crossover, check_score_bytes


def test_check_score_bytes(capsys):
    want = 32 * 8192 * 8192 * 2
    assert check_score_bytes(want, 1, 32, 8192, 8192, 2) is True
    assert check_score_bytes(want * 1.02, 1, 32, 8192, 8192, 2) is True
    capsys.readouterr()
    assert check_score_bytes(want / 4, 1, 32, 8192, 8192, 2) is False  # counted the 8 KV heads instead
    assert "every query head" in capsys.readouterr().out
    assert check_score_bytes(want * 128, 1, 32, 8192, 8192, 2) is False  # multiplied by the head dimension
    assert "head dimension" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_score_bytes(1.0, 1, 0, 8, 8, 2)


def test_check_decode_intensity(capsys):
    assert check_decode_intensity(1.5, 9, 3, 4) is True  # SmolLM2-135M in float32
    assert check_decode_intensity(0.5, 12, 12, 4) is True  # GPT-2
    capsys.readouterr()
    assert check_decode_intensity(0.5, 9, 3, 4) is False
    assert "group" in capsys.readouterr().out
    assert check_decode_intensity(6.0, 9, 3, 4) is False
    assert "bytes" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_decode_intensity(1.0, 9, 0, 4)


def test_check_kv_crossover(capsys):
    assert check_kv_crossover(538e6 / 46080, 538e6, 46080) is True
    assert check_kv_crossover(538e6 / 46080 / 8, 538e6, 46080, batch=8) is True
    capsys.readouterr()
    assert check_kv_crossover(538e6 / 46080, 538e6, 46080, batch=8) is False
    assert "its own cache" in capsys.readouterr().out
    assert check_kv_crossover(538e6 / 46080 / 9, 538e6, 46080) is False
    assert "tenth" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_kv_crossover(1.0, 0, 46080)
