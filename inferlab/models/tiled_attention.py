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
import torch.nn.functional as F

FLOAT32_U = 2.0 ** -24  # float32's unit roundoff: round-to-nearest is off by at most u, relatively
FLASH_KV_BLOCK = 512  # the CPU flash kernel's key block (kv_split_size) at every query-block choice


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


# --- what surrounds the kernels: real inputs, PyTorch's own kernel, costs (Chapter 13) ---------------------------


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` on the shapes of :func:`tiled_attention`, GQA included (Chapter 13).

    The queries are the last ``q_len`` positions: a prefill (``q_len == k_len``) passes
    ``is_causal=True``; one query (a decode step) sees every key and needs no mask; anything in between
    gets an explicit boolean mask, because SDPA's ``is_causal`` aligns the mask to the top left.
    """
    group, offset = _check(q, k, v)
    q_len, k_len = q.shape[2], k.shape[2]
    if not causal or q_len == 1:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=group > 1)
    if q_len == k_len:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=group > 1)
    mask = torch.arange(k_len, device=q.device) <= torch.arange(q_len, device=q.device).unsqueeze(1) + offset
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=group > 1)


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> str:
    """The name of the kernel PyTorch's dispatcher picks for :func:`sdpa_attention`'s call (Chapter 13).

    Asks ``torch._fused_sdp_choice``, the function ``scaled_dot_product_attention`` itself calls to
    choose (on the CPU: ``select_sdp_backend_cpp`` in ``aten/src/ATen/native/transformers/sdp_utils_cpp.cpp``).
    """
    from torch.nn.attention import SDPBackend

    group, offset = _check(q, k, v)
    q_len, k_len = q.shape[2], k.shape[2]
    kwargs: dict = {"enable_gqa": group > 1}
    if causal and q_len == k_len and q_len > 1:
        kwargs["is_causal"] = True
    elif causal and q_len > 1:
        kwargs["attn_mask"] = torch.arange(k_len) <= torch.arange(q_len).unsqueeze(1) + offset
    choice = torch._fused_sdp_choice(q, k, v, **kwargs)
    return SDPBackend(choice).name


def cpu_flash_bytes(batch: int, heads: int, q_len: int, k_len: int, head_dim: int, threads: int,
                    dtype: torch.dtype = torch.float32) -> dict[str, int]:
    """What PyTorch's CPU flash-attention kernel allocates through the tensor allocator, by its source (Chapter 13).

    ``cpu_flash_attention`` in ``aten/src/ATen/native/cpu/FlashAttentionKernel.cpp`` (float32, no
    packing) allocates the output, a float32 ``logsumexp`` [batch, q_len, heads], and one scratch
    buffer per thread of ``qSplit * kvSplit + 2 * qSplit + qSplit * head_dim`` floats: a block of
    scores, its running maximum and sum, and its output. ``flash_attention_kernel_impl`` picks the
    block sizes from the number of queries: (256, 512) from 768 queries, (64, 512) from 192,
    (32, 512) below; each is cut to the sequence when the sequence is shorter.
    """
    if dtype != torch.float32:
        raise ValueError("the prediction is written for float32, whose kernel neither packs nor converts")
    q_split = 256 if q_len >= 768 else 64 if q_len >= 192 else 32
    q_split, kv_split = min(q_split, q_len), min(FLASH_KV_BLOCK, k_len)
    per_thread = q_split * kv_split + 2 * q_split + q_split * head_dim
    return {"output": batch * heads * q_len * head_dim * 4, "logsumexp": batch * q_len * heads * 4,
            "scratch": threads * per_thread * 4, "q_block": q_split, "kv_block": kv_split}


def scale_roundings(head_dim: int) -> int:
    """Roundings, in units of u, that scaling a float32 score by ``1 / sqrt(head_dim)`` adds (Chapter 13).

    One for the multiplication; one more for the float32 constant ``1 / sqrt(head_dim)`` itself,
    unless ``sqrt(head_dim)`` is a power of two (``head_dim`` a power of four: 16, 64, 256), whose
    reciprocal float32 holds exactly.
    """
    if head_dim < 1:
        raise ValueError(f"head_dim must be positive, got {head_dim}")
    power_of_four = head_dim & (head_dim - 1) == 0 and (head_dim.bit_length() - 1) % 2 == 0
    return 1 if power_of_four else 2


def float32_error_bound(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_tiles: int,
                        exp_ulp: float = 20, a: float | None = None) -> tuple[float, float]:
    """A first-order a-priori bound on |float32 attention - exact attention|, per output element (Chapter 13).

    ``B = (2 (d + 4 + s) A + 2 n + 1 + 2 c + 2 T (c + 1)) u max|v|`` with ``u = 2^-24``, ``A`` the largest
    ``sum_i |q_i k_ji| / sqrt(d)`` of any query against any key, ``c = 2 exp_ulp`` (an ULP of a float32
    in [1, 2) is 2u) and ``T = key_tiles`` the number of key tiles whose rescalings a kernel applies
    (0 for a softmax over the whole row). The terms: each score is off by at most ``(d + s) u A``:
    ``d u A`` for its d products and d - 1 additions in any order, and ``s u A`` for the scaling by
    ``1 / sqrt(d)``, with ``s = 1`` when ``sqrt(d)`` is a power of two (the constant is then exact in
    float32; :func:`scale_roundings`) and ``s = 2`` otherwise (the constant rounds, then the product);
    each subtraction of a maximum is off by ``u`` of a difference at most ``2A``, at most ``4 u A`` over
    the chain of rescalings (the maxima only rise, so the differences telescope); each exponential
    adds ``c u``; each rescaling one exponential and one multiplication, ``(c + 1) u``; each of those
    enters a weight's numerator and, through the sum, its denominator (the factor 2); the sums of the
    denominator and of the weighted values add ``(n - 1) u`` and ``n u`` for any order and blocking,
    the final division (a reciprocal and a multiplication) ``2 u``. Returns ``(B, A)``; pass ``a`` from
    an earlier call on the same q and k to skip recomputing ``A`` (a float64 product of every query
    with every key).
    """
    group, _ = _check(q, k, v)
    if key_tiles < 0:
        raise ValueError(f"key_tiles must be at least 0, got {key_tiles}")
    n, d = k.shape[2], q.shape[-1]
    if a is None:
        keys = k.double().repeat_interleave(group, dim=1)
        a = ((q.double().abs() @ keys.abs().transpose(-1, -2)) / math.sqrt(d)).amax().item()
    c = 2 * exp_ulp
    per_unit = 2 * (d + 4 + scale_roundings(d)) * a + 2 * n + 1 + 2 * c + 2 * key_tiles * (c + 1)
    bound = per_unit * FLOAT32_U * v.abs().amax().item()
    return bound, a


def naive_peak_bytes(batch: int, heads: int, q_len: int, k_len: int) -> int:
    """Peak allocation of :func:`~inferlab.models.base.causal_attention` on float32 inputs, by its code (Chapter 13).

    Read off the function: the scores, then ``scores * scale`` and its ``masked_fill`` while the
    scores are still referenced (three score matrices alive at once), plus the boolean mask of
    ``q_len x k_len`` bytes. Assumes contiguous queries (their regrouping is then a view) and
    positions passed in.
    """
    return 3 * score_bytes(batch, heads, q_len, k_len) + q_len * k_len


def attention_costs(heads: int, kv_heads: int, head_dim: int, q_len: int, k_len: int, batch: int = 1,
                    bytes_per_value: int = 4, scores_in_memory: bool = False) -> dict[str, float]:
    """FLOPs, bytes and arithmetic intensity of one layer's attention, queries the last of the keys (Chapter 13).

    FLOPs: ``q kᵀ`` and ``p v``, two FLOPs per multiply-add, over the (query, key) pairs the causal
    mask leaves visible (a kernel that skips masked blocks does about that many; the naive one does
    ``q_len x k_len``); the softmax's few FLOPs per score are left out. Bytes: the least traffic,
    queries, keys and values read once and the output written once; with ``scores_in_memory`` the
    score matrix is also written once and read once, as the naive way must at least.
    """
    if min(heads, kv_heads, head_dim, q_len, k_len, batch) < 1 or q_len > k_len:
        raise ValueError("sizes must be positive, with q_len <= k_len")
    offset = k_len - q_len
    visible = q_len * (offset + 1) + q_len * (q_len - 1) // 2  # query i sees keys 0 .. offset + i
    flops = 4.0 * batch * heads * visible * head_dim
    values = batch * (2 * heads * q_len * head_dim + 2 * kv_heads * k_len * head_dim)
    if scores_in_memory:
        values += 2 * batch * heads * q_len * k_len
    nbytes = float(values * bytes_per_value)
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes}


class _Captured(Exception):
    """Raised inside a forward pass once every requested layer's attention inputs are recorded (Chapter 13)."""


def _attention_module(model: torch.nn.Module):
    """The module whose global ``causal_attention`` a native model's blocks call (Chapter 13)."""
    import sys

    blocks = getattr(model, "layers", None) or getattr(model, "blocks", None)
    if blocks is None:
        raise ValueError(f"{type(model).__name__} is not a native GPT-2 or Llama model of inferlab.models")
    module = sys.modules[type(blocks[0]).__module__]
    if not hasattr(module, "causal_attention"):
        raise ValueError(f"{module.__name__} does not call causal_attention")
    return module, len(blocks)


def attention_inputs(model: torch.nn.Module, input_ids: torch.Tensor,
                     layers: list[int] | None = None) -> dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The queries, keys and values that each chosen layer of a native model attends with (Chapter 13).

    Runs ``model(input_ids)`` (no cache) with the blocks' ``causal_attention`` wrapped so that it
    records contiguous copies of its q [batch, heads, seq, d], k and v [batch, kv_heads, seq, d],
    and stops the pass after the last chosen layer: capturing layer 0 costs one block, not the model.
    """
    module, count = _attention_module(model)
    wanted = sorted(set(range(count) if layers is None else layers))
    if not wanted or wanted[0] < 0 or wanted[-1] >= count:
        raise ValueError(f"layers must lie in 0 .. {count - 1}, got {layers}")
    original = module.causal_attention
    captured: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
    calls = [0]

    def recording(q, k, v, positions=None, key_positions=None):
        layer = calls[0]
        calls[0] += 1
        if layer in wanted:
            captured[layer] = (q.contiguous().clone(), k.contiguous().clone(), v.contiguous().clone())
            if layer == wanted[-1]:
                raise _Captured
        return original(q, k, v, positions, key_positions)

    module.causal_attention = recording
    try:
        with torch.inference_mode():
            model(input_ids)
    except _Captured:
        pass
    finally:
        module.causal_attention = original
    return captured
