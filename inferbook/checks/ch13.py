"""Checkers for the questions and exercises of Chapter 13: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

from inferbook.checks.common import close, verdict


def _positive(**values: float) -> None:
    bad = [name for name, value in values.items() if not value > 0]
    if bad:
        raise ValueError(f"{', '.join(bad)} must be positive")


def check_score_bytes(answer: float, batch: int, heads: int, q_len: int, k_len: int, bytes_per_value: float,
                      rel: float = 0.03) -> bool:
    """Chapter 13, Check yourself: bytes of one layer's score matrix, ``batch x heads x q_len x k_len x bytes``.

    Every query head has its own scores, so the KV heads and the head dimension do not enter.
    """
    _positive(batch=batch, heads=heads, q_len=q_len, k_len=k_len, bytes_per_value=bytes_per_value)
    want = batch * heads * q_len * k_len * bytes_per_value
    ok = close(answer, want, rel)
    hint = ""
    if not ok and answer > 0 and close(answer / want, round(answer / want), 0.03) and round(answer / want) > 1:
        hint = " (count every query head once, and each number at its bytes; the head dimension does not enter)"
    elif not ok and answer > 0 and close(want / answer, round(want / answer), 0.03) and round(want / answer) > 1:
        hint = " (every query head has its own scores: KV heads shared by a group do not share scores)"
    return verdict("the score matrix", answer, want, ok, " bytes", hint)


def check_decode_intensity(answer: float, heads: int, kv_heads: int, bytes_per_value: float,
                           rel: float = 0.05) -> bool:
    """Chapter 13, Check yourself: FLOP per byte of decode attention, ``2 heads / (kv_heads x bytes)``.

    Each cached key and value number is read once and meets ``heads / kv_heads`` query heads, two
    FLOPs each (one multiply-add); queries and outputs are a vanishing share of the bytes at long contexts.
    """
    _positive(heads=heads, kv_heads=kv_heads, bytes_per_value=bytes_per_value)
    want = 2 * heads / (kv_heads * bytes_per_value)
    ok = close(answer, want, rel)
    hint = ""
    if not ok and close(answer, want * kv_heads / heads, rel):
        hint = " (each key and value meets every query head of its group)"
    elif not ok and close(answer, want * bytes_per_value, rel):
        hint = " (divide by the bytes of each number)"
    return verdict("decode attention's intensity", answer, want, ok, " FLOP/byte", hint)


def check_kv_crossover(answer: float, weight_bytes: float, kv_bytes_per_token: float, batch: int = 1,
                       rel: float = 0.05) -> bool:
    """Chapter 13, Check yourself: the context at which a decode step reads as many cache bytes as weight bytes.

    A step of ``batch`` sequences reads the weights once and every sequence's cache:
    ``context = weight_bytes / (batch x kv_bytes_per_token)``.
    """
    _positive(weight_bytes=weight_bytes, kv_bytes_per_token=kv_bytes_per_token, batch=batch)
    want = weight_bytes / (batch * kv_bytes_per_token)
    ok = close(answer, want, rel)
    hint = ""
    if not ok and batch > 1 and close(answer, want * batch, rel):
        hint = " (every sequence of the batch reads its own cache)"
    elif not ok and close(answer, want / 9, rel):
        hint = " (that is where attention is a tenth of the step; the question asks for half)"
    return verdict("the crossover context", answer, want, ok, " tokens", hint)
