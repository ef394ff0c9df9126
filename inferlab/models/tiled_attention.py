"""Attention tile by tile with an online softmax, beside the whole score matrix at once (Chapter 13).

The lab's :func:`inferlab.models.base.causal_attention` (Chapter 4) is the naive way: it
materialises the scores, ``batch x heads x q_len x k_len`` numbers, whose memory grows with the
square of the length (:func:`score_bytes`). :func:`tiled_attention` computes the same
``softmax(q kᵀ / sqrt(d)) v`` for queries [batch, heads, q_len, head_dim] over keys and values
[batch, kv_heads, k_len, head_dim] (``heads`` a multiple of ``kv_heads``; the query heads of a group
share their keys in place, as in ``causal_attention``). The queries are the last ``q_len`` positions
of the ``k_len`` (a prefill when they are equal, a decode step when ``q_len`` is one), and with
``causal=True`` query ``i`` sees the keys at positions up to its own.

It walks the keys in tiles of ``tile`` positions, for one tile of queries at a time, and keeps per
query a running maximum, a running sum of exponentials and a running weighted sum of values,
rescaling them whenever a new tile raises the maximum (the online softmax of Milakov and Gimelshein,
2018, which FlashAttention, Dao et al. 2022, arranges around a GPU's on-chip memory). No score matrix
larger than ``tile x tile`` per head ever exists. Written in PyTorch for the lesson, not for speed:
each tile is a few tensor operations.
"""
from __future__ import annotations

import math

import torch


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int]:
    """(heads per KV head, position offset of the first query), refusing shapes that do not fit (Chapter 13)."""
    if q.dim() != 4 or k.shape != v.shape or k.dim() != 4:
        raise ValueError(f"q [batch, heads, q_len, d] and k, v [batch, kv_heads, k_len, d] of one shape; got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads % kv_heads or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"query heads {heads} must be a multiple of KV heads {kv_heads}, with batch and head_dim equal")
    if q.shape[2] > k.shape[2]:
        raise ValueError(f"{q.shape[2]} queries cannot be the last positions of {k.shape[2]} keys")
    return heads // kv_heads, k.shape[2] - q.shape[2]


def score_bytes(batch: int, heads: int, q_len: int, k_len: int, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the score matrix that ``causal_attention`` materialises, batch x heads x q_len x k_len (Chapter 13)."""
    return batch * heads * q_len * k_len * torch.finfo(dtype).bits // 8


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tile: int = 64,
                    causal: bool = True) -> torch.Tensor:
    """Attention tile by tile with an online softmax: no score matrix beyond tile x tile per head (Chapter 13).

    Key tiles that lie wholly after a query tile's last position are skipped when ``causal``: they
    would be masked everywhere.
    """
    if tile < 1:
        raise ValueError(f"tile must be at least 1, got {tile}")
    group, offset = _check(q, k, v)
    batch, heads, q_len, head_dim = q.shape
    kv_heads, k_len = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(head_dim)
    out = torch.empty_like(q)
    for q0 in range(0, q_len, tile):
        q_tile = q[:, :, q0:q0 + tile] * scale
        rows_here = q_tile.shape[2]
        # the query heads of a group become rows of one product over their shared keys: [batch, kv_heads, group*rows, d]
        q_tile = q_tile.reshape(batch, kv_heads, group * rows_here, head_dim)
        rows = (torch.arange(q0, q0 + rows_here, device=q.device) + offset).repeat(group).unsqueeze(1)
        running_max = torch.full(q_tile.shape[:3] + (1,), float("-inf"), dtype=q.dtype, device=q.device)
        running_sum = torch.zeros_like(running_max)
        acc = torch.zeros_like(q_tile)
        last_key = q0 + rows_here - 1 + offset if causal else k_len - 1
        for k0 in range(0, last_key + 1, tile):
            k_tile, v_tile = k[:, :, k0:k0 + tile], v[:, :, k0:k0 + tile]
            scores = q_tile @ k_tile.transpose(-1, -2)
            if causal:
                cols = torch.arange(k0, k0 + k_tile.shape[2], device=q.device).unsqueeze(0)
                scores = scores.masked_fill(cols > rows, float("-inf"))
            new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
            rescale = torch.exp(running_max - new_max)  # shrink what was summed under the old maximum
            weights = torch.exp(scores - new_max)
            running_sum = running_sum * rescale + weights.sum(dim=-1, keepdim=True)
            acc = acc * rescale + weights @ v_tile
            running_max = new_max
        out[:, :, q0:q0 + tile] = (acc / running_sum).view(batch, heads, rows_here, head_dim)
    return out
