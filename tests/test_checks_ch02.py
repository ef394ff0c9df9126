"""The checkers of Chapter 2's "Check yourself" questions accept the right answers and refuse wrong ones."""
import pytest

from inferbook.checks import ch02


def test_decode_bound_checker():
    assert ch02.check_decode_bound_ms(4.18)  # 7e9 x 2 bytes / 3.35 TB/s
    assert not ch02.check_decode_bound_ms(41.8) and not ch02.check_decode_bound_ms(2.09)
    assert ch02.check_decode_bound_ms(0.729, 7e9, "int4", "H200")  # 3.5 GB / 4.8 TB/s
    assert not ch02.check_decode_bound_ms(0.729, 7e9, "float16", "H200")
    with pytest.raises(ValueError, match="unknown GPU"):
        ch02.check_decode_bound_ms(1.0, gpu="H300")


def test_kv_per_token_checker():
    assert ch02.check_kv_kib_per_token(128)  # 2 x 32 layers x 8 KV heads x 128 x 2 bytes
    assert not ch02.check_kv_kib_per_token(512)  # as if all 32 heads kept keys and values
    assert ch02.check_kv_kib_per_token(320, "llama-2-70b", "float16")  # 2 x 80 x 8 x 128 x 2 bytes


def test_verdicts_are_printed(capsys):
    ch02.check_decode_bound_ms(4.18)
    assert "right" in capsys.readouterr().out
