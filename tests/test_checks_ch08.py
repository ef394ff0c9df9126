"""Chapter 8's checkers tell right answers from wrong ones."""
import pytest

from inferbook.checks.ch08 import (check_chunked_ttft, check_context_step_ms, check_cost_per_million,
                                   check_crossover_tokens, check_request_latency)


def test_check_request_latency(capsys):
    assert check_request_latency(1.0 + 199 * 0.07, 1.0, 0.07, 200) is True
    assert check_request_latency((1.0 + 199 * 0.07) * 1.03, 1.0, 0.07, 200) is True
    capsys.readouterr()
    assert check_request_latency(0.2 + 5 * 0.1, 0.2, 0.1, 5) is False  # n steps instead of n - 1
    assert "n - 1" in capsys.readouterr().out
    assert check_request_latency(5 * 0.1, 0.2, 0.1, 5) is False  # the TTFT left out
    assert "time to first token" in capsys.readouterr().out
    assert check_request_latency(0.5, 0.5, 0.07, 1) is True  # one token: the latency is the TTFT
    with pytest.raises(ValueError):
        check_request_latency(1.0, 1.0, 0.07, 0)


def test_check_crossover_tokens(capsys):
    # an H100 SXM's datasheet figures, bfloat16: two bytes and two FLOPs per weight per token
    want = 989e12 / 3.35e12
    assert check_crossover_tokens(want, 989e12, 3.35e12, 2) is True
    assert check_crossover_tokens(295, 989e12, 3.35e12, 2) is True
    assert check_crossover_tokens(2 * want, 989e12, 3.35e12, 4) is True  # float32: twice the tokens
    capsys.readouterr()
    assert check_crossover_tokens(want, 989e12, 3.35e12, 4) is False  # the ridge, not the tokens
    assert "ridge point" in capsys.readouterr().out
    assert check_crossover_tokens(1.0, 989e12, 3.35e12, 2) is False
    with pytest.raises(ValueError):
        check_crossover_tokens(1.0, 0.0, 1.0, 2)


def test_check_cost_per_million(capsys):
    want = 0.10 / 3600 / 12.5 * 1e6
    assert check_cost_per_million(want, 12.5, 0.10) is True
    assert check_cost_per_million(want * 1.04, 12.5, 0.10) is True
    capsys.readouterr()
    assert check_cost_per_million(want * 3600, 12.5, 0.10) is False
    assert "per hour" in capsys.readouterr().out
    assert check_cost_per_million(want * 2, 12.5, 0.10) is False
    with pytest.raises(ValueError):
        check_cost_per_million(1.0, 0.0, 0.10)


def test_check_context_step_ms(capsys):
    kv, bandwidth = 46_080, 20e9
    want = kv * 8192 / bandwidth * 1e3
    assert check_context_step_ms(want, kv, 8192, bandwidth) is True
    assert check_context_step_ms(3 * want, kv, 8192, bandwidth, passes=3) is True
    assert check_context_step_ms(3 * want, kv, 8192, bandwidth) is False
    capsys.readouterr()
    assert check_context_step_ms(want / 1e3, kv, 8192, bandwidth) is False
    assert "milliseconds" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_context_step_ms(1.0, kv, 8192, bandwidth, passes=0)


def test_check_chunked_ttft(capsys):
    curve = {1: 60.0, 16: 100.0, 64: 250.0, 256: 1000.0}
    assert check_chunked_ttft(4 * 250.0, curve, 256, 64) is True  # four passes of 64 tokens
    assert check_chunked_ttft(16 * 100.0, curve, 256, 16) is True
    # 256 = 3 x 80 + 16: three passes of 80 (read between 64 and 256) and one of 16
    want = 3 * (250.0 + 750.0 * 16 / 192) + 100.0
    assert check_chunked_ttft(want, curve, 256, 80) is True
    capsys.readouterr()
    assert check_chunked_ttft(1000.0, curve, 256, 16) is False  # one pass over the whole prompt
    assert "each of the 16 chunks" in capsys.readouterr().out
    # ceil(P / c) full chunks instead of a short last one: 3 x T(100) against 2 x T(100) + T(56)
    t100, t56 = 250.0 + 750.0 * 36 / 192, 100.0 + 150.0 * 40 / 48
    assert check_chunked_ttft(2 * t100 + t56, curve, 256, 100) is True
    assert check_chunked_ttft(3 * t100, curve, 256, 100) is False
    assert "the last chunk holds only 56 tokens" in capsys.readouterr().out
    with pytest.raises(ValueError):
        check_chunked_ttft(1.0, curve, 256, 0)
