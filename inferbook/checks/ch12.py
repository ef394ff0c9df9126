"""Checkers for the questions and exercises of Chapter 12: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

from inferbook.checks.common import close, verdict


def _bits(bits: float, group_size: float, bytes_per_group: float) -> float:
    if not (bits > 0 and group_size > 0 and bytes_per_group >= 0):
        raise ValueError("bits and group_size must be positive, bytes_per_group not negative")
    return bits + 8 * bytes_per_group / group_size


def check_bits_per_weight(answer: float, bits: float, group_size: float, bytes_per_group: float,
                          rel: float = 0.02) -> bool:
    """Chapter 12, Check yourself: the bits a grouped format stores per weight.

    Each weight has its ``bits`` of code; each group of ``group_size`` weights adds ``bytes_per_group``
    bytes of scales (and minimums): ``bits + 8 * bytes_per_group / group_size``.
    """
    want = _bits(bits, group_size, bytes_per_group)
    ok = close(answer, want, rel)
    hint = ""
    if not ok and close(answer, bits, rel):
        hint = " (the scales and minimums are stored too: add their bits, shared by the group)"
    elif not ok and close(answer, bits + bytes_per_group / group_size, rel):
        hint = " (the group's extra bytes are 8 bits each)"
    return verdict("bits per weight", answer, want, ok, " bits", hint)


def check_quantised_bytes(answer: float, params: float, bits: float, group_size: float, bytes_per_group: float,
                          rel: float = 0.05) -> bool:
    """Chapter 12, Check yourself: the bytes of a model's weights in a grouped format (answer in bytes).

    ``params`` weights at ``bits + 8 * bytes_per_group / group_size`` bits each, over 8 bits per byte.
    """
    if not params > 0:
        raise ValueError("params must be positive")
    want = params * _bits(bits, group_size, bytes_per_group) / 8
    ok = close(answer, want, rel)
    hint = ""
    if not ok and close(answer, params * bits / 8, rel):
        hint = " (count the scales and minimums as well as the codes)"
    elif not ok and close(answer, want * 8, rel):
        hint = " (that is bits: divide by 8 for bytes)"
    return verdict("the weights' bytes", answer, want, ok, " bytes", hint)
