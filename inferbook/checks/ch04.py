"""Checkers for the exercises of Chapter 4: each prints a one-line verdict and returns it as a boolean."""
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
