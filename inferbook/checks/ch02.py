"""Checkers for Chapter 2's exercises and "Check yourself" questions: weights, FLOPs, time and KV memory.

Each function names the exercise it checks, prints a one-line verdict and returns it as a boolean.
Answers within ``tolerance`` (relative) of the lab's own arithmetic count as right: estimates are
about the order and the first digit, not the last.
"""
from __future__ import annotations

from inferlab.analysis.sizing import (GIB, count_parameters, flops_per_token_2n, kv_bytes_per_token, kv_cache_bytes,
                                      preset, weights_bytes)
from inferlab.bench.memory import DATASHEET_BANDWIDTH, decode_time_floor_s


def _verdict(label: str, answer: float, expected: float, unit: str, tolerance: float) -> bool:
    ok = abs(answer - expected) <= tolerance * abs(expected)
    print(f"{label}: you said {answer:,.4g} {unit}; {'right' if ok else 'not quite'}"
          + ("" if ok else f" (within {tolerance:.0%} of the lab's arithmetic is right; recheck the units)"))
    return ok


def check_weights_gb(answer_gb: float, parameters: float = 13e9, dtype: str = "float16",
                     tolerance: float = 0.05) -> bool:
    """Chapter 2, exercises 1 and 5: weights memory in GB (10^9 bytes) of a model in a dtype."""
    return _verdict(f"weights of {parameters:,.0f} parameters in {dtype}", answer_gb,
                    weights_bytes(int(parameters), dtype) / 1e9, "GB", tolerance)


def check_copies(answer: int, parameters: float = 13e9, dtype: str = "float16", memory_gb: float = 80) -> bool:
    """Chapter 2, exercise 2: how many whole copies of the weights fit in a memory of ``memory_gb`` GB."""
    expected = int(memory_gb * 1e9 // weights_bytes(int(parameters), dtype))
    ok = int(answer) == expected
    print(f"copies of the weights in {memory_gb:g} GB: you said {answer}; {'right' if ok else 'not quite'}")
    return ok


def check_flops_per_token(answer_gflop: float, parameters: float = 13e9, tolerance: float = 0.05) -> bool:
    """Chapter 2, exercise 3: FLOPs per token by the 2N rule, in GFLOP."""
    return _verdict(f"2N for {parameters:,.0f} parameters", answer_gflop,
                    flops_per_token_2n(int(parameters)) / 1e9, "GFLOP", tolerance)


def check_min_time_us(answer_us: float, parameters: float = 13e9, flops_per_s: float = 300e12,
                      tolerance: float = 0.05) -> bool:
    """Chapter 2, exercise 3: the compute-bound floor of one token's time, in microseconds."""
    return _verdict(f"2N / {flops_per_s:.3g} FLOP/s", answer_us,
                    flops_per_token_2n(int(parameters)) / flops_per_s * 1e6, "µs", tolerance)


def check_bandwidth_time_ms(answer_ms: float, parameters: float = 13e9, dtype: str = "float16",
                            bytes_per_s: float = 2e12, tolerance: float = 0.05) -> bool:
    """Chapter 2, exercise 4: time to read every weight once at a memory bandwidth, in ms."""
    return _verdict(f"weights / {bytes_per_s:.3g} B/s", answer_ms,
                    weights_bytes(int(parameters), dtype) / bytes_per_s * 1e3, "ms", tolerance)


def check_kv_gib(answer_gib: float, model: str = "llama-2-70b", tokens: int = 4096, batch: int = 1,
                 dtype: str = "float16", tolerance: float = 0.05) -> bool:
    """Chapter 2, exercise 6: KV-cache memory of a preset at a length and batch, in GiB."""
    return _verdict(f"KV cache of {model}, {batch} x {tokens:,} tokens, {dtype}", answer_gib,
                    kv_cache_bytes(preset(model), tokens, batch, dtype) / GIB, "GiB", tolerance)


def check_parameter_count(answer: int, model: str = "gpt2-medium") -> bool:
    """Chapter 2, exercise 7: the exact parameter count of a preset, from the formulas."""
    expected = count_parameters(preset(model))
    ok = int(answer) == expected
    print(f"parameters of {model}: you said {int(answer):,}; {'right' if ok else 'not quite'}")
    return ok


def check_decode_bound_ms(answer_ms: float, parameters: float = 7e9, dtype: str = "float16",
                          gpu: str = "H100 SXM", tolerance: float = 0.05) -> bool:
    """Chapter 2, Check yourself: the batch-1 decode bound, weight bytes / datasheet bandwidth, in ms.

    ``gpu`` is a key of ``inferlab.bench.memory.DATASHEET_BANDWIDTH`` (``"T4"``, ``"A100 40GB"``,
    ``"A100 80GB SXM"``, ``"H100 SXM"``, ``"H200"``).
    """
    if gpu not in DATASHEET_BANDWIDTH:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(DATASHEET_BANDWIDTH)}")
    floor = decode_time_floor_s(weights_bytes(int(parameters), dtype), DATASHEET_BANDWIDTH[gpu])
    return _verdict(f"decode bound of {parameters:,.0f} parameters in {dtype} on {gpu}", answer_ms,
                    floor * 1e3, "ms", tolerance)


def check_kv_kib_per_token(answer_kib: float, model: str = "llama-3-8b", dtype: str = "bfloat16",
                           tolerance: float = 0.05) -> bool:
    """Chapter 2, Check yourself: KV-cache bytes one token keeps in a preset, in KiB (1,024 bytes)."""
    return _verdict(f"KV cache per token of {model} in {dtype}", answer_kib,
                    kv_bytes_per_token(preset(model), dtype) / 1024, "KiB", tolerance)
