"""Checkers for the questions of Chapter 6: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

from collections.abc import Mapping


def _close(answer: float, want: float, rel: float) -> bool:
    return abs(answer - want) <= rel * abs(want)


def check_ttft_estimate(answer_ms: float, first_forward_ms: Mapping[int, float], engine_ms: float,
                        prompt_tokens: int, rel: float = 0.05) -> bool:
    """Chapter 6, Check yourself: time to first text for a prompt of ``prompt_tokens`` tokens, without a cache.

    The expected answer draws a straight line through the first forward pass measured at the
    shortest and the longest prompt (``first_forward_ms``: prompt tokens -> milliseconds), reads it
    at ``prompt_tokens``, and adds the engine's own work before the first text (``engine_ms``).
    """
    if len(first_forward_ms) < 2:
        raise ValueError("give the first forward pass at two prompt lengths at least")
    (n0, t0), (n1, t1) = min(first_forward_ms.items()), max(first_forward_ms.items())
    want = t0 + (t1 - t0) * (prompt_tokens - n0) / (n1 - n0) + engine_ms
    if _close(answer_ms, want, rel):
        print(f"right: about {want:.0f} ms (the line through the two first forward passes, plus the engine's work)")
        return True
    hint = (" (did you forget the engine's work before the first text?)" if _close(answer_ms, want - engine_ms, rel)
            else "")
    print(f"not quite: {answer_ms:.0f} ms, expected about {want:.0f} ms{hint}")
    return False


def check_redecode_seconds(answer_s: float, decode_us_per_id: float, answer_tokens: int, rel: float = 0.05) -> bool:
    """Chapter 6, Check yourself: total time a full re-decode spends decoding over a whole answer.

    Step ``k`` decodes ``k`` ids, at ``decode_us_per_id`` microseconds each, so the answer costs
    ``decode_us_per_id * (1 + 2 + ... + answer_tokens)``: quadratic in the answer's length.
    """
    want = decode_us_per_id * 1e-6 * answer_tokens * (answer_tokens + 1) / 2
    if _close(answer_s, want, rel):
        print(f"right: about {want:.2f} s, growing with the square of the answer's length")
        return True
    linear = decode_us_per_id * 1e-6 * answer_tokens * answer_tokens
    hint = " (each step decodes the answer so far, not the whole final answer)" if _close(answer_s, linear, rel) else ""
    print(f"not quite: {answer_s:.3g} s, expected about {want:.2f} s{hint}")
    return False


def check_batch_detok_ms(answer_ms: float, decode_us_per_id: float, streams: int, answer_tokens: int,
                         rel: float = 0.05) -> bool:
    """Chapter 6, Check yourself: one step's CPU time to re-decode ``streams`` answers of ``answer_tokens`` ids each."""
    want = decode_us_per_id * streams * answer_tokens / 1e3
    if _close(answer_ms, want, rel):
        print(f"right: about {want:.0f} ms of CPU work per step, on one core")
        return True
    print(f"not quite: {answer_ms:.3g} ms, expected about {want:.0f} ms")
    return False
