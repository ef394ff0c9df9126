"""One cached decode step that can be timed again and again (Chapter 7; Chapters 8 to 10 use it).

A decode step adds its position to the KV cache, so the next call of the same step would run at a
context one longer. :func:`repeatable_decode_step` removes that position after each call
(``cache.crop(-n)``, which the lab's caches and transformers' take alike), so every repetition times
the same step on the same cache. :func:`prefilled_cache` makes the cache of a real prompt;
:func:`random_cache` one of any length, filled with random keys and values, for steps at contexts too
long to prefill within a chapter's time budget (Chapter 8 checks the steps it times this way against
real requests). :func:`operator_seconds` splits one call of such a step by the operators it ran.
"""
from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import torch

from inferlab.models.shape import ModelShape


def prefilled_cache(model: Any, input_ids: torch.Tensor, cache: Any = None) -> Any:
    """Run ``input_ids`` through ``model`` into ``cache`` (a new one if None) and return the cache (Chapter 7).

    ``model`` is any model behind the lab's seam, ``model(ids, positions, cache, last_only)``: a native
    model or :class:`inferlab.models.hf.TransformersLM`.
    """
    if cache is None:
        cache = model.new_cache()
    with torch.inference_mode():
        model(input_ids, cache=cache, last_only=True)
    return cache


def repeatable_decode_step(model: Any, input_ids: torch.Tensor, positions: torch.Tensor, cache: Any) -> Callable[[], None]:
    """A callable that runs one cached step of ``input_ids`` at ``positions``, then drops them from ``cache`` (Chapter 7).

    The cache must hold the positions before ``positions`` and nothing after them; each call leaves it
    as it found it, so a harness can time the same step as often as it likes.
    """
    if input_ids.shape != positions.shape:
        raise ValueError(f"ids {tuple(input_ids.shape)} and positions {tuple(positions.shape)} must have the same shape")
    new = input_ids.shape[1]

    def step() -> None:
        with torch.inference_mode():
            model(input_ids, positions, cache, last_only=True)
            cache.crop(-new)  # remove the step's positions again

    return step


def random_cache(cache: Any, shape: ModelShape, length: int, seed: int = 0, batch: int = 1,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> Any:
    """Fill an empty ``cache`` with ``length`` positions of random keys and values and return it (Chapter 8).

    For timing only, never for text: the keys match no token. The random numbers come from a
    generator seeded with ``seed`` on the CPU, so the same seed gives the same cache on every device.
    """
    if length < 1:
        raise ValueError(f"a random cache needs at least one position, got {length}")
    gen = torch.Generator().manual_seed(seed)
    size = (batch, shape.kv_heads, length, shape.head_dim)
    for layer in range(shape.layers):
        keys = torch.randn(size, generator=gen, dtype=dtype).to(device)
        values = torch.randn(size, generator=gen, dtype=dtype).to(device)
        cache.update(keys, values, layer)
    return cache


def operator_seconds(call: Callable[[], object], repeats: int = 1) -> list[dict[str, float]]:
    """Self CPU seconds of each operator, one dictionary per call of ``call``, from ``torch.profiler`` (Chapter 8).

    Self time leaves out an operator's children, so the values of one call add up to the profiled
    call's time in operators, the profiler's own cost per operator included. That cost is the same
    for two calls that run the same operators, so differences between such calls are the operators'.
    """
    from torch.profiler import ProfilerActivity, profile

    from inferlab.analysis.flops import _quiet_native_stderr  # the profiler library's own log lines

    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    out = []
    for _ in range(repeats):
        with _quiet_native_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
            call()
        seconds: dict[str, float] = collections.defaultdict(float)
        for event in prof.key_averages():
            seconds[event.key] += event.self_cpu_time_total / 1e6
        out.append(dict(seconds))
    return out
