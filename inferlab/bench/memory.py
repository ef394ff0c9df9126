"""Memory bandwidth: what a datasheet promises and what this machine reads (Chapter 2).

Chapter 2's decode bound divides the bytes of a model's weights by a memory bandwidth: at batch 1
every decode step reads every weight once, so no step can take less than ``weight bytes /
bandwidth``. For an accelerator the bandwidth is the vendor's datasheet figure
(:data:`DATASHEET_BANDWIDTH`). For the CPU that the book's chapters measure, :func:`measure_read_bandwidth`
times one operation over a tensor far larger than the caches.

What the measurement is, and is not: the median rate at which ``torch.sum`` reads a contiguous
float32 tensor with the given number of threads. It estimates the bandwidth that a simple streaming
read *achieves* here, not the memory's peak (the kind of figure a datasheet gives): more threads,
other instructions or another tensor size may read faster. No chapter measures the memory's peak:
the roofline chapter takes the same kind of achieved rate (a ``torch.sum`` read) as its roof, and
that is enough to put a floor under a decode step.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from inferlab.timing import intra_op_threads

#: Datasheet memory bandwidth of some accelerators, in bytes per second (Chapter 2). Each is the
#: vendor's figure for the named part: NVIDIA T4 datasheet (16 GB GDDR6, 320 GB/s); NVIDIA A100
#: datasheet (A100 40GB: 1,555 GB/s; A100 80GB SXM: 2,039 GB/s); NVIDIA H100 datasheet (H100 SXM:
#: 3.35 TB/s); NVIDIA H200 datasheet (4.8 TB/s). Peaks, which kernels approach but do not reach.
DATASHEET_BANDWIDTH: dict[str, float] = {
    "T4": 320e9,
    "A100 40GB": 1_555e9,
    "A100 80GB SXM": 2_039e9,
    "H100 SXM": 3.35e12,
    "H200": 4.8e12,
}

#: Datasheet memory of the same accelerators, in bytes (10^9 bytes per GB), from the same
#: datasheets: T4 16 GB GDDR6; A100 40GB and A100 80GB; H100 SXM 80 GB HBM3; H200 141 GB HBM3e.
DATASHEET_MEMORY: dict[str, float] = {
    "T4": 16e9,
    "A100 40GB": 40e9,
    "A100 80GB SXM": 80e9,
    "H100 SXM": 80e9,
    "H200": 141e9,
}

#: Smallest size of the tensor read: 256 MiB. :func:`read_size_for_cache` raises it to eight times
#: the last-level cache where that cache is larger than 32 MiB, so that the reads come from memory.
DEFAULT_BYTES = 256 * 2**20


@dataclass(frozen=True)
class TimedRead:
    """Repeated timings of one pass that reads ``bytes_read`` bytes (Chapter 2)."""

    bytes_read: int
    seconds: tuple[float, ...]
    threads: int

    @property
    def median_s(self) -> float:
        """The median time of one pass (Chapter 2)."""
        return statistics.median(self.seconds)

    @property
    def bytes_per_s(self) -> float:
        """Bytes read per second, at the median time (Chapter 2)."""
        return self.bytes_read / self.median_s


@dataclass(frozen=True)
class ReadBandwidth(TimedRead):
    """The timings of :func:`measure_read_bandwidth` and what they read (Chapter 2)."""

    operation: str = "torch.sum over a contiguous float32 tensor"

    @property
    def best_bytes_per_s(self) -> float:
        """Bytes read per second in the fastest repeat: interference only slows a read (Chapter 2)."""
        return self.bytes_read / min(self.seconds)


def read_size_for_cache(cache_bytes: int | None) -> int:
    """Bytes to read so that a read comes from memory: ``max(DEFAULT_BYTES, 8 x cache_bytes)`` (Chapter 2).

    ``cache_bytes`` is the last-level cache (:func:`last_level_cache_bytes`); ``None`` (unknown)
    gives :data:`DEFAULT_BYTES`.
    """
    if cache_bytes is not None and cache_bytes < 0:
        raise ValueError(f"cache_bytes must be >= 0, got {cache_bytes}")
    return max(DEFAULT_BYTES, 8 * (cache_bytes or 0))


def measure_read_bandwidth(n_bytes: int | None = None, repeats: int = 7, threads: int | None = None) -> ReadBandwidth:
    """Time ``torch.sum`` over a float32 tensor of about ``n_bytes`` bytes, ``repeats`` times (Chapter 2).

    ``n_bytes=None`` reads ``read_size_for_cache(last_level_cache_bytes())``: at least 256 MiB, and
    at least eight times the last-level cache. The tensor holds ``n_bytes // 4`` float32 elements, written once before the clock starts (so
    that no page is first touched while timed), and one untimed sum warms the code path. Each timed
    repeat reads every element once and writes one number. ``threads`` sets torch's intra-op
    threads for the measurement and is restored afterwards; ``None`` keeps the current setting.
    """
    import torch

    if n_bytes is None:
        n_bytes = read_size_for_cache(last_level_cache_bytes())
    if n_bytes < 4:
        raise ValueError(f"n_bytes must be at least 4 (one float32), got {n_bytes}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    with intra_op_threads(threads):
        x = torch.full((n_bytes // 4,), 1.0, dtype=torch.float32)
        x.sum()
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            x.sum()
            seconds.append(time.perf_counter() - start)
        used = torch.get_num_threads()
        bytes_read = x.numel() * x.element_size()
    return ReadBandwidth(bytes_read, tuple(seconds), used)


@dataclass(frozen=True)
class MatvecSweep(TimedRead):
    """The timings of :func:`measure_matvec_sweep`: one-row products with every weight matrix (Chapter 2).

    One pass is a sweep over all the matrices; ``bytes_read`` is their weight bytes.
    """

    matrices: int


def measure_matvec_sweep(model, repeats: int = 7, threads: int | None = None) -> MatvecSweep:
    """Multiply one row by every weight matrix of ``model``, outside the model, and time it (Chapter 2).

    The matrices are those of ``inferlab.analysis.sizing.matmul_modules`` (each ``nn.Linear``, the
    LM head included, and GPT-2's ``Conv1D``), each shared tensor once. Each is multiplied as its
    module does it, without the bias: ``F.linear(x, W)`` for a ``Linear``, ``torch.mm(x, W)`` for a
    ``Conv1D`` (whose weight is stored transposed), with ``x`` one row of ones in the weight's dtype.
    One untimed sweep warms the code paths; each of the ``repeats`` timed sweeps runs every product
    once, in the model's order. Nothing else of a forward pass runs (no norms, attention,
    activations, KV cache, or module dispatch), so a sweep separates what the products' kernels cost
    from what the rest of a decode step adds. ``threads`` as in :func:`measure_read_bandwidth`.
    """
    import torch

    from inferlab.analysis.sizing import matmul_modules

    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    products, seen = [], set()
    for module in matmul_modules(model):
        weight = module.weight.detach()
        if id(weight) in seen:
            continue
        seen.add(id(weight))
        if isinstance(module, torch.nn.Linear):
            products.append((torch.nn.functional.linear, torch.ones(1, weight.shape[1], dtype=weight.dtype), weight))
        else:  # Conv1D: y = x @ W with W of shape (in, out)
            products.append((torch.mm, torch.ones(1, weight.shape[0], dtype=weight.dtype), weight))
    if not products:
        raise ValueError("the model has no weight matrices to multiply by")
    with intra_op_threads(threads), torch.inference_mode():
        seconds = []
        for repeat in range(repeats + 1):
            start = time.perf_counter()
            for op, x, weight in products:
                op(x, weight)
            if repeat:  # the first sweep is the warm-up
                seconds.append(time.perf_counter() - start)
        used = torch.get_num_threads()
    return MatvecSweep(sum(w.numel() * w.element_size() for _, _, w in products), tuple(seconds), used, len(products))


def last_level_cache_bytes(cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """The largest CPU cache that Linux reports for the first core, in bytes; ``None`` elsewhere (Chapter 2)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    sizes = []
    for entry in cache_dir.glob("index*/size"):
        text = entry.read_text().strip()
        if text[:-1].isdigit() and text[-1] in units:
            sizes.append(int(text[:-1]) * units[text[-1]])
        elif text.isdigit():
            sizes.append(int(text))
    return max(sizes) if sizes else None


def decode_time_floor_s(weight_bytes: float, bytes_per_s: float) -> float:
    """The decode bound: the least time of a batch-1 step that reads ``weight_bytes`` (Chapter 2).

    It counts the weights only: reading the KV cache and activations adds to it, and arithmetic
    can bind first, so a real step takes longer.
    """
    if weight_bytes < 0 or not bytes_per_s > 0 or not math.isfinite(bytes_per_s):
        raise ValueError(f"need weight_bytes >= 0 and a positive, finite bandwidth, got {weight_bytes}, {bytes_per_s}")
    return weight_bytes / bytes_per_s
