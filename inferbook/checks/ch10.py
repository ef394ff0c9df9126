"""Checkers for the questions and exercises of Chapter 10: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

from inferbook.checks.common import close, rows_at_ridge, verdict


def _positive(**values: float) -> None:
    bad = [name for name, value in values.items() if not value > 0]
    if bad:
        raise ValueError(f"{', '.join(bad)} must be positive")


def check_decode_bound_tokens_per_s(answer: float, params: float, bytes_per_param: float, bytes_per_s: float,
                                    utilisation: float = 1.0, rel: float = 0.05) -> bool:
    """Chapter 10, Check yourself: the most tokens per second a batch-1 decode can reach, from bytes alone.

    Every step reads every weight once, ``params * bytes_per_param`` bytes, at ``utilisation`` times
    the bandwidth ``bytes_per_s``: at most ``utilisation * bytes_per_s / (params * bytes_per_param)``
    steps, one token each, per second.
    """
    _positive(params=params, bytes_per_param=bytes_per_param, bytes_per_s=bytes_per_s, utilisation=utilisation)
    want = utilisation * bytes_per_s / (params * bytes_per_param)
    ok = close(answer, want, rel)
    hint = ""
    if not ok and close(answer, want / utilisation, rel) and utilisation != 1.0:
        hint = " (that is the bound at the full bandwidth: scale it by the utilisation)"
    elif not ok and (close(answer, want * bytes_per_param, rel) or close(answer, want / bytes_per_param, rel)):
        hint = " (count the bytes: parameters times bytes per parameter)"
    return verdict("the decode bound", answer, want, ok, " tokens/s", hint)


def check_mbu(answer: float, tokens_per_s: float, bytes_per_token: float, bytes_per_s: float,
              rel: float = 0.03) -> bool:
    """Chapter 10, Check yourself: model bandwidth utilisation as a fraction (0.5 for half).

    A decode step must read ``bytes_per_token`` bytes; at ``tokens_per_s`` steps per second that is
    ``tokens_per_s * bytes_per_token`` bytes per second, over the bandwidth ``bytes_per_s``.
    """
    _positive(tokens_per_s=tokens_per_s, bytes_per_token=bytes_per_token, bytes_per_s=bytes_per_s)
    want = tokens_per_s * bytes_per_token / bytes_per_s
    ok = close(answer, want, rel)
    hint = ""
    if not ok and close(answer, 100 * want, rel):
        hint = " (give a fraction, not a percentage)"
    elif not ok and close(answer, 1 / want, rel):
        hint = " (upside down: achieved bytes per second over the bandwidth)"
    return verdict("the model bandwidth utilisation", answer, want, ok, "", hint)


def check_ridge_point(answer: float, flops_per_s: float, bytes_per_s: float, rel: float = 0.03) -> bool:
    """Chapter 10, Check yourself: a machine's ridge point, FLOP per byte.

    The two roofs meet where ``intensity * bytes_per_s = flops_per_s``: at ``flops_per_s / bytes_per_s``.
    """
    _positive(flops_per_s=flops_per_s, bytes_per_s=bytes_per_s)
    want = flops_per_s / bytes_per_s
    ok = close(answer, want, rel)
    hint = " (upside down: FLOP/s over bytes/s)" if not ok and close(answer, 1 / want, rel) else ""
    return verdict("the ridge point", answer, want, ok, " FLOP/byte", hint)


def check_batch_at_ridge(answer: float, flops_per_s: float, bytes_per_s: float, bytes_per_param: float,
                         rel: float = 0.05) -> bool:
    """Chapter 10, Check yourself: the batch at which a dense model's decode step reaches the ridge point.

    A step over a batch of ``b`` sequences does two FLOPs per weight per sequence and reads each
    weight's ``bytes_per_param`` bytes once (the KV cache left out), an intensity of
    ``2 b / bytes_per_param``; it equals the ridge ``flops_per_s / bytes_per_s`` at
    ``b = flops_per_s / bytes_per_s * bytes_per_param / 2``.
    """
    _positive(flops_per_s=flops_per_s, bytes_per_s=bytes_per_s, bytes_per_param=bytes_per_param)
    return rows_at_ridge(answer, flops_per_s, bytes_per_s, bytes_per_param, rel, "the batch at the ridge",
                         " sequences", "sequence")


def check_attainable(answer: float, intensity: float, flops_per_s: float, bytes_per_s: float,
                     rel: float = 0.03) -> bool:
    """Chapter 10, Exercises: the roofline's attainable rate, ``min(flops_per_s, intensity * bytes_per_s)``."""
    _positive(intensity=intensity, flops_per_s=flops_per_s, bytes_per_s=bytes_per_s)
    memory, compute = intensity * bytes_per_s, flops_per_s
    want = min(memory, compute)
    ok = close(answer, want, rel)
    hint = ""
    if not ok and close(answer, max(memory, compute), rel):
        hint = " (the roofline is the lower of the two roofs, not the higher)"
    return verdict("the attainable rate", answer, want, ok, " FLOP/s", hint)
