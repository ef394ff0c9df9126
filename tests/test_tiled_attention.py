"""Tiled (online-softmax) attention against PyTorch's SDPA and the lab's causal attention (Chapter 13).

Tolerance: float32 sums taken in another order (tile by tile, with rescaling) differ from SDPA's by
rounding only, of order 1e-7 relative for values of order one; TOL = 1e-5 leaves room for that and
would still catch a wrong mask or a missing rescale (each moves outputs by 1e-2 or more here).
"""
import pytest
import torch
import torch.nn.functional as F

from inferlab.models.base import causal_attention
from inferlab.models.tiled_attention import score_bytes, tiled_attention

TOL = 1e-5


def qkv(q_len, k_len, heads=4, kv_heads=2, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, heads, q_len, d, generator=g), torch.randn(2, kv_heads, k_len, d, generator=g),
            torch.randn(2, kv_heads, k_len, d, generator=g))


def sdpa(q, k, v, causal):
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    offset = k.shape[2] - q.shape[2]
    mask = None
    if causal:  # queries are the last positions: query i sees keys up to offset + i
        mask = torch.arange(k.shape[2]).unsqueeze(0) <= torch.arange(q.shape[2]).unsqueeze(1) + offset
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("q_len,k_len", [(37, 37), (1, 50), (5, 40), (64, 64)])
@pytest.mark.parametrize("tile", [1, 8, 16, 100])
@pytest.mark.parametrize("causal", [True, False])
def test_tiled_equals_sdpa(q_len, k_len, tile, causal):
    q, k, v = qkv(q_len, k_len)
    torch.testing.assert_close(tiled_attention(q, k, v, tile, causal), sdpa(q, k, v, causal), rtol=0, atol=TOL)


def test_a_wrong_mask_would_be_caught():
    q, k, v = qkv(20, 20)
    assert (tiled_attention(q, k, v, 8, causal=False) - sdpa(q, k, v, True)).abs().max() > 1000 * TOL


@pytest.mark.parametrize("q_len,k_len", [(24, 24), (1, 30), (6, 30)])
def test_equal_to_the_labs_causal_attention_the_naive_way(q_len, k_len):
    """causal_attention materialises the scores; the queries are the last positions, the keys 0 .. k_len-1."""
    q, k, v = qkv(q_len, k_len)
    positions, key_positions = torch.arange(k_len - q_len, k_len), torch.arange(k_len)
    torch.testing.assert_close(tiled_attention(q, k, v, 8), causal_attention(q, k, v, positions, key_positions),
                               rtol=0, atol=TOL)


def test_score_bytes_is_the_naive_score_matrix():
    q, k, _ = qkv(37, 50)
    scores = q @ k.repeat_interleave(2, dim=1).transpose(-1, -2)
    assert score_bytes(2, 4, 37, 50) == scores.numel() * scores.element_size()
    assert score_bytes(1, 1, 10, 10, torch.bfloat16) == 200


def test_bad_shapes_are_refused():
    q, k, v = qkv(8, 8, heads=3, kv_heads=2)
    with pytest.raises(ValueError, match="multiple"):
        tiled_attention(q, k, v)
    q, k, v = qkv(9, 8)
    with pytest.raises(ValueError, match="last positions"):
        tiled_attention(q, k, v)
    with pytest.raises(ValueError, match="tile"):
        tiled_attention(*qkv(4, 4), tile=0)


def test_float32_error_bound_holds_and_catches_a_wrong_mask():
    from inferlab.models.tiled_attention import float32_error_bound, sdpa_attention

    q, k, v = qkv(96, 96)
    exact = causal_attention(q.double(), k.double(), v.double(), torch.arange(96))
    naive = causal_attention(q, k, v, torch.arange(96))
    tiled = tiled_attention(q, k, v, 16)
    assert (naive.double() - exact).abs().max() <= float32_error_bound(q, k, v, 0)[0]
    assert (tiled.double() - exact).abs().max() <= float32_error_bound(q, k, v, 6)[0]
    assert (sdpa_attention(q, k, v).double() - exact).abs().max() <= float32_error_bound(q, k, v, 1)[0]
    unmasked = tiled_attention(q, k, v, 16, causal=False).double()
    assert (unmasked - exact).abs().max() > 10 * float32_error_bound(q, k, v, 6)[0]
    # more key tiles, more rescalings: the bound grows with T
    assert float32_error_bound(q, k, v, 6)[0] > float32_error_bound(q, k, v, 0)[0]
    with pytest.raises(ValueError):
        float32_error_bound(q, k, v, -1)


def test_the_scaling_rounds_unless_sqrt_d_is_a_power_of_two():
    """1/sqrt(d) is exact in float32 only for d a power of four; otherwise the constant itself rounds (Chapter 13)."""
    from inferlab.models.tiled_attention import FLOAT32_U, float32_error_bound, scale_roundings

    for d in (1, 4, 16, 64, 256):
        assert scale_roundings(d) == 1
        assert torch.tensor(1 / d ** 0.5, dtype=torch.float32).item() == 1 / d ** 0.5
    for d in (2, 8, 12, 32, 48, 80, 96, 128):
        assert scale_roundings(d) == 2
        assert torch.tensor(1 / d ** 0.5, dtype=torch.float32).item() != 1 / d ** 0.5
    with pytest.raises(ValueError):
        scale_roundings(0)
    for d in (16, 24):  # the bound's score term is (d + 4 + s) A, counted twice
        q, k, v = qkv(40, 40, d=d)
        bound, a = float32_error_bound(q, k, v, 2, 20)
        want = (2 * (d + 4 + scale_roundings(d)) * a + 2 * 40 + 1 + 2 * 40 + 2 * 2 * 41) * FLOAT32_U * v.abs().max().item()
        assert bound == pytest.approx(want, rel=1e-12)
        exact = causal_attention(q.double(), k.double(), v.double(), torch.arange(40))
        assert (tiled_attention(q, k, v, 16).double() - exact).abs().max() <= float32_error_bound(q, k, v, 3)[0]
