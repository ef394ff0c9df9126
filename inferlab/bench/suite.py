"""The book's benchmark suite: a few measurements every reader can repeat and compare (Chapter 7).

``python -m inferlab bench run --out MINE.json`` takes them on the reader's machine;
``python -m inferlab bench compare MINE.json data/ch07_bench_record.json`` sets them beside the
book's. Each measurement isolates one thing a request spends its time on: reading memory, a
matrix product that is all arithmetic, a forward pass over a prompt (prefill), and one step of
cached decoding, at each thread count asked for.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inferlab.bench.harness import BenchRecord, Measurement, measure
from inferlab.bench.memory import last_level_cache_bytes, read_size_for_cache
from inferlab.bench.steps import prefilled_cache, repeatable_decode_step
from inferlab.models.hf import TransformersLM

#: The prompt of the suite's prefill and decode measurements.
SUITE_PROMPT = "An inference engine takes a trained model and a request, and it must turn them into"

#: Side of the square float32 matrices of the suite's compute-bound product.
MATMUL_SIZE = 1024


def suite_measurements(loaded: Any, threads: Sequence[int], repeats: int = 9, warmup: int = 2) -> dict[str, Measurement]:
    """Read bandwidth, a square matmul, a prefill and a cached decode step at each thread count (Chapter 7).

    Names end in ``@Nt`` (N threads). The model is transformers' forward pass, as loaded; the LM head
    projects the last position only. The decode step feeds one token with the prompt's KV cache and
    then drops that position from the cache again, so every repetition times the same step.
    """
    import torch

    device = loaded.device
    ids = loaded.tokenizer(SUITE_PROMPT, return_tensors="pt")["input_ids"].to(device)
    n_bytes = read_size_for_cache(last_level_cache_bytes())
    data = torch.ones(n_bytes // 4, device=device)
    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=device)
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=device)
    model = TransformersLM(loaded.model, loaded.context)  # one call under transformers 4.57 and 5.x
    length = ids.shape[1]
    decode_step = repeatable_decode_step(model, ids[:, -1:], torch.tensor([[length]], device=device),
                                         prefilled_cache(model, ids))

    def prefill() -> None:
        with torch.inference_mode():
            model(ids, last_only=True)

    results: dict[str, Measurement] = {}
    for t in threads:
        results[f"read_bandwidth@{t}t"] = measure(data.sum, name="torch.sum over float32", repeats=repeats,
                                                  warmup=warmup, device=device, threads=t, work=n_bytes, unit="bytes")
        results[f"matmul_{MATMUL_SIZE}@{t}t"] = measure(lambda: a @ b, name=f"{MATMUL_SIZE}x{MATMUL_SIZE} float32 matmul",
                                                        repeats=repeats, warmup=warmup, device=device, threads=t,
                                                        work=2 * MATMUL_SIZE**3, unit="FLOP")
        results[f"prefill_{length}@{t}t"] = measure(prefill, name=f"forward over {length} prompt tokens",
                                                    repeats=repeats, warmup=warmup, device=device, threads=t,
                                                    work=length, unit="tokens")
        results[f"decode_step@{t}t"] = measure(decode_step, name=f"one cached decode step after {length} tokens",
                                               repeats=repeats, warmup=warmup, device=device, threads=t,
                                               work=1, unit="tokens")
    return results


def run_suite(model_name: str = "default", threads: Sequence[int] = (1,), repeats: int = 9,
              device: str | None = None) -> BenchRecord:
    """Load a model and take :func:`suite_measurements` with the run's provenance (Chapter 7)."""
    from inferlab.models.registry import load_model

    if not threads or min(threads) < 1:
        raise ValueError(f"thread counts must be at least 1, got {list(threads)}")
    from inferlab.bench.load import others_load

    loaded = load_model(model_name, device=device)
    with others_load({"cpus": None}) as others:  # other processes' load while the suite ran, as Chapter 7 records it
        measurements = suite_measurements(loaded, threads, repeats)
    provenance = loaded.provenance.with_run(loaded.device, max(threads)).to_dict()
    return BenchRecord("inferlab bench suite", measurements, provenance,
                       settings={"model": loaded.name, "threads": list(threads), "repeats": repeats,
                                 "prompt": SUITE_PROMPT, "matmul_size": MATMUL_SIZE,
                                 "other_processes_cpus": None if others["cpus"] is None else round(others["cpus"], 2)})
