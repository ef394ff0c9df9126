"""Checkers for the exercises: each says whether a reader's answer behaves as asked.

Each function names the chapter and exercise it checks, prints a one-line verdict and returns it
as a boolean, so it works both in a notebook cell and in a test.
"""
from __future__ import annotations

from .record import GenerationResult, TokenGenerator


def same_output_twice(generator: TokenGenerator, prompt: str = "Hello", max_new_tokens: int = 8) -> bool:
    """Chapter 1, exercise 1: does the generator give the same tokens for the same request twice?"""
    first = generator.generate(prompt, max_new_tokens)
    second = generator.generate(prompt, max_new_tokens)
    same = first.token_ids == second.token_ids
    print(f"{'same' if same else 'different'} tokens on two identical requests: "
          f"{first.text!r} / {second.text!r}")
    return same


def has_stop_reason(result: GenerationResult) -> bool:
    """Chapter 1, exercise 2: does a result say why generation stopped, with a known reason?"""
    reason = getattr(result, "stop_reason", None)
    ok = reason in ("length", "eos", "stop_string")
    print(f"stop_reason = {reason!r}: {'ok' if ok else 'expected one of length, eos, stop_string'}")
    return ok
