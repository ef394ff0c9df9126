"""Checkers for the exercises and Check-yourself questions of Chapter 4: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from inferlab.errors import BadRequest
from inferlab.models.shape import ModelShape


def check_norm(fn: Callable[..., torch.Tensor], kind: str = "rmsnorm", atol: float = 1e-5) -> bool:
    """Chapter 4, exercise 1: does ``fn`` compute RMSNorm ``fn(x, weight, eps)`` or LayerNorm ``fn(x, weight, bias, eps)``?"""
    if kind not in ("rmsnorm", "layernorm"):
        raise BadRequest(f"kind must be 'rmsnorm' or 'layernorm', got {kind!r}")
    g = torch.Generator().manual_seed(4)
    cases = {"random values": torch.randn(2, 5, 16, generator=g), "offset values": torch.randn(3, 16, generator=g) + 3.0,
             "tiny values": torch.randn(4, 16, generator=g) * 1e-4}
    weight, bias, eps = torch.rand(16, generator=g) + 0.5, torch.randn(16, generator=g), 1e-5
    for label, x in cases.items():
        if kind == "rmsnorm":
            want, got = F.rms_norm(x, (16,), weight, eps), fn(x, weight, eps)
        else:
            want, got = F.layer_norm(x, (16,), weight, bias, eps), fn(x, weight, bias, eps)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape or not torch.allclose(got, want, atol=atol):
            print(f"{kind}: wrong on {label}")
            return False
    print(f"{kind}: correct on {len(cases)} cases")
    return True


def check_wasted_head_flops(answer: float, shape: ModelShape, seq: int, rel: float = 0.01) -> bool:
    """Chapter 4, exercise 3: LM-head FLOPs spent on the ``seq - 1`` positions generation does not read."""
    from inferlab.analysis.flops import forward_costs

    def head(last_only: bool) -> int:
        return next(c.matmul_flops for c in forward_costs(shape, seq, last_only=last_only) if c.op == "lm_head")

    wasted = head(False) - head(True)
    ok = abs(answer - wasted) <= rel * wasted
    print(f"{answer:,.0f} FLOPs: {'correct' if ok else 'not within 1 % of the count'}")
    return ok


def check_attention_flops(answer: float, shape: ModelShape, seq: int, rel: float = 0.01) -> bool:
    """Chapter 4, Check yourself: FLOPs of the two attention products (scores and context), all layers, one pass."""
    from inferlab.analysis.flops import forward_costs

    costs = {c.op: c.matmul_flops for c in forward_costs(shape, seq)}
    want = costs["scores"] + costs["context"]
    ok = abs(answer - want) <= rel * want
    print(f"{answer:,.0f} FLOPs: {'correct' if ok else 'not within 1 % of the count'}")
    return ok


def check_kv_bytes_per_token(answer: float, shape: ModelShape, dtype: str = "float32", rel: float = 0.01) -> bool:
    """Chapter 4, Check yourself: bytes of keys and values one token needs, all layers, stored as ``dtype``.

    The count is Chapter 2's formula, ``inferlab.analysis.sizing.kv_bytes_per_token``.
    """
    from inferlab.analysis.sizing import kv_bytes_per_token

    want = kv_bytes_per_token(shape, dtype)
    ok = abs(answer - want) <= rel * want
    print(f"{answer:,.0f} bytes: {'correct' if ok else 'not within 1 % of the count'}")
    return ok


def check_positions_processed(answer: int, prompt_tokens: int, new_tokens: int, cached: bool = False) -> bool:
    """Chapter 4, Check yourself: positions a greedy loop sends through the model, with or without a KV cache."""
    if prompt_tokens < 1 or new_tokens < 1:
        raise BadRequest(f"prompt_tokens and new_tokens must be at least 1, got {prompt_tokens}, {new_tokens}")
    if cached:  # the prompt once, then one new position per step; the last token needs no further pass
        want = prompt_tokens + new_tokens - 1
    else:  # step i runs the prompt and the i tokens generated so far
        want = sum(prompt_tokens + i for i in range(new_tokens))
    ok = answer == want
    print(f"{answer:,} positions: {'correct' if ok else 'not the count'}")
    return ok
