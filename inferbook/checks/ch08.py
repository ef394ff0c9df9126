"""Checkers for the questions and exercises of Chapter 8: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

import math
from collections.abc import Mapping

from inferbook.checks.common import close, rows_at_ridge, verdict


def check_request_latency(answer_s: float, ttft_s: float, tpot_s: float, output_tokens: int,
                          rel: float = 0.05) -> bool:
    """Chapter 8, Check yourself: end-to-end latency of a request from its TTFT and TPOT.

    The first token arrives at TTFT; each of the other ``output_tokens - 1`` tokens takes one TPOT,
    so the answer is ``ttft_s + (output_tokens - 1) * tpot_s``.
    """
    if output_tokens < 1:
        raise ValueError(f"output_tokens must be at least 1, got {output_tokens}")
    want = ttft_s + (output_tokens - 1) * tpot_s
    ok = close(answer_s, want, rel)
    hint = ""
    if not ok and close(answer_s, ttft_s + output_tokens * tpot_s, rel / 4):
        hint = " (the first token is inside the TTFT: count n - 1 decode steps)"
    elif not ok and close(answer_s, output_tokens * tpot_s, rel):
        hint = " (did you leave out the time to first token?)"
    return verdict("the end-to-end latency", answer_s, want, ok, " s", hint)


def check_crossover_tokens(answer: float, flops_per_s: float, bytes_per_s: float, bytes_per_param: float,
                           rel: float = 0.1) -> bool:
    """Chapter 8, Check yourself: the prompt length at which a dense model's prefill becomes compute-bound.

    A pass over ``P`` tokens does two FLOPs per weight per token and reads each weight's
    ``bytes_per_param`` bytes once, so its intensity is ``2 P / bytes_per_param`` FLOP per byte; it
    reaches the ridge point ``flops_per_s / bytes_per_s`` at
    ``P* = flops_per_s / bytes_per_s * bytes_per_param / 2``.
    """
    if min(flops_per_s, bytes_per_s, bytes_per_param) <= 0:
        raise ValueError("the rates and the bytes per parameter must be positive")
    return rows_at_ridge(answer, flops_per_s, bytes_per_s, bytes_per_param, rel, "the crossover", " tokens", "token")


def check_cost_per_million(answer_dollars: float, tokens_per_s: float, dollars_per_hour: float,
                           rel: float = 0.05) -> bool:
    """Chapter 8, Check yourself: dollars per million output tokens at a rate and a price per machine-hour.

    The machine costs ``dollars_per_hour / 3600`` per second and produces ``tokens_per_s`` tokens in
    it, so a million tokens cost ``dollars_per_hour / 3600 / tokens_per_s * 1e6``.
    """
    if tokens_per_s <= 0 or dollars_per_hour < 0:
        raise ValueError("need a positive rate and a price of at least zero")
    want = dollars_per_hour / 3600 / tokens_per_s * 1e6
    ok = close(answer_dollars, want, rel)
    hint = " (per hour, not per second?)" if not ok and close(answer_dollars, want * 3600, rel) else ""
    return verdict("the cost of a million output tokens", answer_dollars, want, ok, " $", hint)


def check_context_step_ms(answer_ms: float, kv_bytes_per_token: float, context: int, bytes_per_s: float,
                          passes: int = 1, rel: float = 0.05) -> bool:
    """Chapter 8, Check yourself: the extra time of a decode step over a cache of ``context`` positions.

    From bytes alone: the step moves the cache's ``kv_bytes_per_token * context`` bytes ``passes``
    times (once if it is only read), at ``bytes_per_s``.
    """
    if passes < 1 or context < 0 or bytes_per_s <= 0:
        raise ValueError("need passes >= 1, context >= 0 and a positive bandwidth")
    want = passes * kv_bytes_per_token * context / bytes_per_s * 1e3
    ok = close(answer_ms, want, rel)
    hint = " (milliseconds, not seconds?)" if not ok and close(answer_ms * 1e3, want, rel) else ""
    return verdict("the extra time per step", answer_ms, want, ok, " ms", hint)


def _interpolate(points: Mapping[int, float], x: float) -> float:
    """Piecewise-linear reading of a curve given at a few lengths (held constant beyond its ends)."""
    keys = sorted(points)
    if x <= keys[0]:
        return points[keys[0]]
    for a, b in zip(keys, keys[1:]):
        if x <= b:
            return points[a] + (points[b] - points[a]) * (x - a) / (b - a)
    return points[keys[-1]]


def check_chunked_ttft(answer_ms: float, ttft_ms_by_length: Mapping[int, float], prompt_tokens: int, chunk: int,
                       rel: float = 0.1) -> bool:
    """Chapter 8, Exercise: TTFT of a prompt fed through the cache in chunks of ``chunk`` tokens.

    Each chunk is one forward pass over ``chunk`` positions (the last one over what remains), priced
    from the measured curve ``ttft_ms_by_length`` (prompt tokens -> milliseconds), read by straight
    lines between measured lengths: ``floor(P / c) * T(c) + T(P mod c)``, the last term only when
    ``c`` does not divide ``P``. The growing context each chunk attends to is ignored.
    """
    if chunk < 1 or prompt_tokens < 1 or not ttft_ms_by_length:
        raise ValueError("need chunk >= 1, prompt_tokens >= 1 and a measured curve")
    full, rest = divmod(prompt_tokens, chunk)
    want = full * _interpolate(ttft_ms_by_length, chunk) + (_interpolate(ttft_ms_by_length, rest) if rest else 0.0)
    ok = close(answer_ms, want, rel)
    one_pass = _interpolate(ttft_ms_by_length, prompt_tokens)
    every_chunk_full = math.ceil(prompt_tokens / chunk) * _interpolate(ttft_ms_by_length, chunk)
    hint = ""
    if not ok and close(answer_ms, one_pass, rel) and not close(one_pass, want, rel):
        hint = f" (that is one pass over all {prompt_tokens} tokens; each of the {math.ceil(prompt_tokens / chunk)} chunks pays its own pass)"
    elif not ok and rest and close(answer_ms, every_chunk_full, rel):
        hint = f" (the last chunk holds only {rest} tokens: price it at T({rest}), not T({chunk}))"
    return verdict("the chunked TTFT", answer_ms, want, ok, " ms", hint)
