"""Chapter 4's checkers (inferbook.checks.ch04) accept right answers and reject wrong ones."""
import pytest
import torch

from inferbook.checks.ch04 import (check_attention_flops, check_kv_bytes_per_token, check_norm,
                                   check_positions_processed, check_wasted_head_flops)
from inferlab.analysis.sizing import preset
from inferlab.errors import BadRequest


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def layernorm(x, w, b, eps):
    mu, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def test_check_norm(capsys):
    assert check_norm(rmsnorm) and check_norm(layernorm, kind="layernorm")
    assert not check_norm(lambda x, w, eps: x / x.abs().mean(-1, keepdim=True) * w)  # mean |x|, not RMS
    assert not check_norm(lambda x, w, b, eps: rmsnorm(x, w, eps) + b, kind="layernorm")
    assert not check_norm(lambda x, w, b, eps: layernorm(x, w, b, eps)[..., :-1], kind="layernorm")  # wrong shape
    assert "wrong on" in capsys.readouterr().out
    with pytest.raises(BadRequest):
        check_norm(rmsnorm, kind="batchnorm")


def test_check_wasted_head_flops():
    smollm2 = preset("smollm2-135m")
    assert check_wasted_head_flops(2 * 576 * 49_152 * 199, smollm2, seq=200)
    assert not check_wasted_head_flops(576 * 49_152 * 199, smollm2, seq=200)  # a multiply-add is two FLOPs


def test_check_attention_flops():
    smollm2, gpt2 = preset("smollm2-135m"), preset("gpt2")
    assert check_attention_flops(4 * 30 * 9 * 64 * 1024**2, smollm2, seq=1024)
    assert check_attention_flops(72.5e9, smollm2, seq=1024)  # the rounded answer is within 1 %
    assert not check_attention_flops(2 * 30 * 9 * 64 * 1024**2, smollm2, seq=1024)  # one product only
    assert not check_attention_flops(4 * 30 * 3 * 64 * 1024**2, smollm2, seq=1024)  # K/V heads, not query heads
    assert check_attention_flops(4 * 12 * 12 * 64 * 512**2, gpt2, seq=512)


def test_check_kv_bytes_per_token():
    smollm2 = preset("smollm2-135m")
    assert check_kv_bytes_per_token(2 * 30 * 3 * 64 * 4, smollm2)
    assert check_kv_bytes_per_token(2 * 30 * 3 * 64 * 2, smollm2, dtype="bfloat16")
    assert not check_kv_bytes_per_token(2 * 30 * 3 * 64 * 4, smollm2, dtype="bfloat16")  # float32 bytes
    assert not check_kv_bytes_per_token(2 * 30 * 9 * 64 * 4, smollm2)  # multi-head, not SmolLM2's GQA
    assert not check_kv_bytes_per_token(30 * 3 * 64 * 4, smollm2)  # keys only


def test_check_positions_processed():
    assert check_positions_processed(392, 17, 16)
    assert check_positions_processed(32, 17, 16, cached=True)
    assert not check_positions_processed(17 * 16, 17, 16)  # the prompt alone, sixteen times
    assert not check_positions_processed(33, 17, 16, cached=True)
    with pytest.raises(BadRequest):
        check_positions_processed(0, 0, 16)
