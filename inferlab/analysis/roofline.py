"""The roofline: a pass's least time from its FLOPs and bytes, and a decode path's bandwidth utilisation (Chapter 10).

A machine that computes ``F`` FLOP/s and reads ``B`` bytes/s cannot finish a pass of ``W`` FLOPs over
``Q`` bytes in less than ``max(W / F, Q / B)``: on log-log axes, rate against arithmetic intensity
``I = W / Q``, the bound is ``min(F, I * B)``, a memory roof meeting a compute roof at the ridge
``I* = F / B`` (Williams, Waterman and Patterson, 2009). Chapter 10 shows each function inline first.
"""
from __future__ import annotations

from inferlab.errors import BadRequest


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise BadRequest(f"{name} must be positive, got {value}")


def attainable(intensity: float, flops_per_s: float, bytes_per_s: float) -> float:
    """The roofline: the most FLOP/s a computation of this intensity can reach on a machine (Chapter 10)."""
    _positive(flops_per_s=flops_per_s, bytes_per_s=bytes_per_s)
    if intensity < 0:
        raise BadRequest(f"intensity must not be negative, got {intensity}")
    return min(flops_per_s, intensity * bytes_per_s)


def pass_bound_s(flops: float, nbytes: float, flops_per_s: float, bytes_per_s: float) -> float:
    """The least time a pass can take: the slower of its arithmetic and its bytes (Chapter 10)."""
    _positive(flops_per_s=flops_per_s, bytes_per_s=bytes_per_s)
    if flops < 0 or nbytes < 0:
        raise BadRequest(f"FLOPs and bytes must not be negative, got {flops} and {nbytes}")
    return max(flops / flops_per_s, nbytes / bytes_per_s)


def ridge_point(flops_per_s: float, bytes_per_s: float) -> float:
    """The intensity at which the memory roof meets the compute roof, F / B in FLOP per byte (Chapter 10)."""
    _positive(flops_per_s=flops_per_s, bytes_per_s=bytes_per_s)
    return flops_per_s / bytes_per_s


def product_intensity(rows: int, k: int, n: int, bytes_per_value: int) -> float:
    """FLOPs per byte of a [rows, k] by [k, n] product, every operand read and the result written once (Chapter 10).

    ``2 rows k n / (w (rows k + k n + rows n))``: with few rows and a large weight, about ``2 rows / w``
    (decode at batch b, a prefill of P positions, each ``rows``); it grows with the rows until the
    activations' bytes, not the weight's, dominate.
    """
    if min(rows, k, n, bytes_per_value) < 1:
        raise BadRequest(f"rows, k, n and bytes per value must be at least 1, got {rows, k, n, bytes_per_value}")
    return 2 * rows * k * n / (bytes_per_value * (rows * k + k * n + rows * n))


def mbu(tokens_per_s: float, bytes_per_token: float, bytes_per_s: float) -> float:
    """Model bandwidth utilisation: the bytes a decode must read per second over the bandwidth (Chapter 10)."""
    _positive(bytes_per_s=bytes_per_s)
    if tokens_per_s < 0 or bytes_per_token < 0:
        raise BadRequest(f"tokens per second and bytes per token must not be negative, got {tokens_per_s}, "
                         f"{bytes_per_token}")
    return tokens_per_s * bytes_per_token / bytes_per_s
