"""Checkers for the questions and exercises of Chapter 9: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inferbook.checks.common import close, verdict


def kv_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_element: float, tokens: int, batch: int = 1) -> float:
    """Chapter 9: bytes of a KV cache, 2 x layers x KV heads x head_dim x bytes per element x tokens x batch."""
    if min(layers, kv_heads, head_dim, tokens, batch) < 1 or bytes_per_element <= 0:
        raise ValueError("layers, heads, head_dim, tokens and batch must be at least 1, bytes per element positive")
    return 2 * layers * kv_heads * head_dim * bytes_per_element * tokens * batch


def check_kv_bytes(answer_bytes: float, layers: int, kv_heads: int, head_dim: int, bytes_per_element: float,
                   tokens: int, batch: int = 1, heads: int | None = None, rel: float = 0.02) -> bool:
    """Chapter 9, Check yourself: the KV cache of ``batch`` sequences of ``tokens`` tokens, in bytes.

    Keys and values (the factor 2), in every layer, for every key/value head (not every query
    head), ``head_dim`` elements each. Give ``heads`` (the query heads) to get a hint when the
    answer counted query heads instead.
    """
    want = kv_bytes(layers, kv_heads, head_dim, bytes_per_element, tokens, batch)
    ok = close(answer_bytes, want, rel)
    hint = ""
    if not ok and close(answer_bytes, want / 2, rel):
        hint = " (keys and values: two vectors per head, not one)"
    elif not ok and heads and heads != kv_heads and close(answer_bytes, want * heads / kv_heads, rel):
        hint = " (count the key/value heads, not the query heads)"
    elif not ok and batch > 1 and close(answer_bytes, want / batch, rel):
        hint = " (every sequence of the batch keeps its own cache)"
    return verdict("the KV cache", answer_bytes, want, ok, " bytes", hint)


def check_cache_equals_weights(answer_tokens: float, parameters: int, layers: int, kv_heads: int, head_dim: int,
                               rel: float = 0.05) -> bool:
    """Chapter 9, Check yourself: the tokens (all sequences together) at which the KV cache outweighs the weights.

    With weights and cache in the same format the bytes per element cancel:
    ``parameters x b = 2 x layers x kv_heads x head_dim x b x tokens`` gives
    ``tokens = parameters / (2 x layers x kv_heads x head_dim)``.
    """
    if min(parameters, layers, kv_heads, head_dim) < 1:
        raise ValueError("parameters, layers, heads and head_dim must be at least 1")
    want = parameters / (2 * layers * kv_heads * head_dim)
    ok = close(answer_tokens, want, rel)
    hint = " (keys and values: the factor 2)" if not ok and close(answer_tokens, 2 * want, rel) else ""
    return verdict("the cache equals the weights at", answer_tokens, want, ok, " tokens", hint)


def positions_processed(prompt_tokens: int, new_tokens: int) -> tuple[int, int]:
    """Chapter 9: positions through the model for a request, (without a cache, with a cache)."""
    if prompt_tokens < 1 or new_tokens < 1:
        raise ValueError("a request has at least one prompt token and one new token")
    without = sum(prompt_tokens + k for k in range(new_tokens))  # step k reads the prompt and k new tokens
    return without, prompt_tokens + new_tokens - 1  # the prompt once, then one position per later step


def check_positions_ratio(answer: float, prompt_tokens: int, new_tokens: int, rel: float = 0.02) -> bool:
    """Chapter 9, Check yourself: how many times more positions a request without a cache runs through the model.

    Without a cache step ``k`` (from 0) runs ``P + k`` positions; with one, the first step runs the
    ``P`` prompt positions and each of the other ``N - 1`` steps one position.
    """
    without, with_cache = positions_processed(prompt_tokens, new_tokens)
    want = without / with_cache
    ok = close(answer, want, rel)
    hint = ""
    if not ok and close(answer, (prompt_tokens + new_tokens) / 2, rel * 5):
        hint = " (count the positions of every step, then divide by the cached request's positions)"
    return verdict("the ratio of positions", answer, want, ok, "", hint)


def check_capacity(answer: int, memory_bytes: float, weight_bytes: float, bytes_each: float) -> bool:
    """Chapter 9, Check yourself and exercises: how many caches of ``bytes_each`` fit beside the weights.

    ``bytes_each`` is one sequence's cache (to count sequences) or one token's (to count tokens);
    the answer is the whole number ``floor((memory_bytes - weight_bytes) / bytes_each)``, ignoring
    activations, the framework's own memory and fragmentation.
    """
    if bytes_each <= 0:
        raise ValueError("bytes_each must be positive")
    free = memory_bytes - weight_bytes
    want = max(0, int(free // bytes_each))
    ok = int(answer) == want
    hint = ""
    if not ok and int(answer) == int(memory_bytes // bytes_each):
        hint = " (the weights take their share of the memory first)"
    elif not ok and abs(int(answer) - free / bytes_each) < 1:
        hint = " (a whole number: round down)"
    return verdict("what fits", answer, want, ok, "", hint)


def dynamic_allocation_bytes(bytes_per_token: float, prompt_tokens: int, new_tokens: int) -> float:
    """Chapter 9: bytes a growing (concatenating) cache allocates over a request, prefill included."""
    if prompt_tokens < 1 or new_tokens < 1:
        raise ValueError("a request has at least one prompt token and one new token")
    # the prefill allocates the prompt's positions; each later step allocates the whole cache again
    return bytes_per_token * sum(prompt_tokens + k for k in range(new_tokens))


def check_dynamic_allocation(answer_bytes: float, bytes_per_token: float, prompt_tokens: int, new_tokens: int,
                             rel: float = 0.02) -> bool:
    """Chapter 9, exercises: bytes a dynamic KV cache allocates over a request of ``new_tokens`` tokens.

    The prefill stores the ``P`` prompt positions; each of the ``N - 1`` later steps concatenates,
    allocating the whole cache again, ``P + k`` positions at step ``k``.
    """
    want = dynamic_allocation_bytes(bytes_per_token, prompt_tokens, new_tokens)
    ok = close(answer_bytes, want, rel)
    hint = ""
    if not ok and close(answer_bytes, bytes_per_token * (prompt_tokens + new_tokens - 1), rel):
        hint = " (that is what the cache holds at the end; each step allocates the whole cache again)"
    return verdict("the dynamic cache's allocations", answer_bytes, want, ok, " bytes", hint)


def check_crop(crop: Callable[[Any, int], None]) -> bool:
    """Chapter 9, exercises: ``crop(cache, length)`` keeps positions 0 .. length-1 of a lab KV cache.

    Tried on a dynamic and a static cache of two layers holding six known positions: after cropping
    to four, the cache must report four positions, and the next position must be stored at slot four,
    after the four kept ones.
    """
    import torch

    from inferlab.models.kv_cache import DynamicKVCache, StaticKVCache

    def filled(cache: Any) -> Any:
        for layer in range(2):
            keys = torch.arange(6.0).view(1, 1, 6, 1).repeat(1, 1, 1, 2) + 10 * layer
            cache.update(keys, -keys, layer)
        return cache

    def problem(cache: Any) -> str | None:
        kind = type(cache).__name__
        crop(cache, 4)
        if cache.length != 4:
            return f"{kind}: length is {cache.length} after cropping to 4"
        for layer in range(2):
            new = torch.full((1, 1, 1, 2), 99.0)
            keys, values = cache.update(new, -new, layer)
            expected = torch.cat([torch.arange(4.0).view(1, 1, 4, 1).repeat(1, 1, 1, 2) + 10 * layer, new], dim=2)
            if keys.shape != expected.shape or not torch.equal(keys, expected) or not torch.equal(values, -expected):
                return f"{kind}: layer {layer} does not hold positions 0..3 and then the new one"
        if cache.length != 5:
            return f"{kind}: length is {cache.length} after one more position, expected 5"
        return None

    problems = []
    for cache in (filled(DynamicKVCache(2)), filled(StaticKVCache(2, 8))):
        try:
            found = problem(cache)
        except Exception as error:  # a wrong crop can leave a cache that refuses the next position
            found = f"{type(cache).__name__}: {type(error).__name__}: {error}"
        if found:
            problems.append(found)
    if problems:
        print("not quite: " + "; ".join(problems))
        return False
    print("right: both caches keep the first positions and continue after them")
    return True
