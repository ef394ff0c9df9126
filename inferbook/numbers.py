"""The "Numbers to know" page: every figure read from ``data/``, none typed (back matter).

The page ``book/numbers.md`` writes each figure as a MyST substitution, ``{{ key }}``. The book's
Sphinx extension fills them in at build time from :func:`substitutions`, which reads the recorded
runs of the chapters (``data/chNN_*.json``, with their provenance) and the vendor datasheet figures
(``data/datasheets.yml``, each with its citation). A missing record is an error, not a blank.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Measured:
    """One figure of a chapter's recorded run: how to read it from the record and how to print it."""

    key: str
    chapter: str
    read: Callable[[dict], float]
    format: Callable[[float], str]


def _ms(x: float) -> str:
    return f"{x:.0f} ms" if x >= 10 else f"{x:.1f} ms"


def _us(x: float) -> str:
    return f"{x:.0f} µs"


def _count(x: float) -> str:
    return f"{int(x):,}"


def _median(xs: list[float]) -> float:
    ordered = sorted(xs)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _get(record: dict, path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _at(path: str) -> Callable[[dict], float]:
    return lambda record: _get(record, path)


def _bandwidth_gb_s(record: dict) -> float:
    bw = record["read_bandwidth"]
    return bw["bytes_read"] / _median(bw["seconds"]) / 1e9


def _decode_step_ms(record: dict) -> float:
    seconds = record["decode_step"]["seconds"]
    return (_median(seconds) if isinstance(seconds, list) else seconds) * 1e3


def _engine_work_us(record: dict) -> float:
    return _median([s["engine_us"] for steps in record["prompt_lengths"].values() for s in steps[1:]])


def _ceiling(name: str, threads: str) -> Callable[[dict], float]:
    """Work per second of one of Chapter 10's ceilings (bytes or FLOP), median over its rounds."""
    def read(record: dict) -> float:
        ceilings = record["ceilings"]
        key = f"{name}@{max(int(k.split('@')[1]) for k in ceilings)}" if threads == "all" else f"{name}@{threads}"
        return ceilings[key]["work"] / _median(ceilings[key]["seconds"])
    return read


def _all_cores(record: dict) -> float:
    return max(int(k.split("@")[1]) for k in record["ceilings"])


def _ridge(record: dict) -> float:
    return _ceiling("product", "1")(record) / _ceiling("read", "1")(record)


def _goal(path: str) -> Callable[[dict], float]:
    """A figure of Chapter 10's decode benchmark at one thread: transformers' or the fastest path's."""
    def read(record: dict) -> float:
        row = next(r for r in record["decode_benchmark"]["results"] if r["threads"] == 1)
        fastest = row["paths"][row["fastest"]]
        return {"transformers_tok_s": row["transformers"]["decode_tok_s"], "engine_tok_s": fastest["decode_tok_s"],
                "speedup": fastest["speedup_vs_transformers"], "fraction": fastest["roofline_fraction"]}[path]
    return read


def _request_step_ms(record: dict) -> float:
    """Median forward pass of Chapter 1's requests (no cache), over every step of every request."""
    import statistics

    return statistics.median(s for steps in record["experiment_1"]["request_step_ms"] for s in steps)


MEASURED: list[Measured] = [
    Measured("parameters_smollm2", "ch02_parameters_as_artefacts", _at("provenance.parameters"), _count),
    Measured("safetensors_mb", "ch02_parameters_as_artefacts", _at("provenance.extra.safetensors_bytes"),
             lambda b: f"{b / 1e6:.0f} MB"),
    Measured("read_bandwidth", "ch02_parameters_as_artefacts", _bandwidth_gb_s, lambda x: f"{x:.1f} GB/s"),
    Measured("decode_weight_mb", "ch02_parameters_as_artefacts", _at("decode_step.weight_bytes"),
             lambda b: f"{b / 1e6:.0f} MB"),
    Measured("decode_bound_ms", "ch02_parameters_as_artefacts", lambda r: r["decode_step"]["bound_s"] * 1e3, _ms),
    Measured("decode_step_ms", "ch02_parameters_as_artefacts", _decode_step_ms, _ms),
    Measured("ttft_ms", "ch01_what_is_inference", _at("workload_metrics.ttft_ms"), _ms),
    Measured("tpot_ms", "ch01_what_is_inference", _at("workload_metrics.tpot_ms"), _ms),
    Measured("tokens_per_s", "ch01_what_is_inference", _at("workload_metrics.tokens_per_s"), lambda x: f"{x:.1f}"),
    Measured("core_s_per_token", "ch01_what_is_inference", _at("workload_metrics.core_seconds_per_token"),
             lambda x: f"{x:.2f}"),
    Measured("forward_no_cache_ms", "ch01_what_is_inference", _request_step_ms, _ms),
    Measured("toy_forward_us", "ch01_what_is_inference", _at("toy.forward_median_us"), _us),
    Measured("first_text_ms", "ch06_the_first_complete_engine", _at("opening.first_text_ms"), _ms),
    Measured("engine_work_us", "ch06_the_first_complete_engine", _engine_work_us, _us),
    Measured("kv_bytes_per_token", "ch09_the_kv_cache", _at("bytes_per_token_float32"),
             lambda b: f"{b / 1024:.0f} KiB"),
    Measured("read_bandwidth_all", "ch10_rooflines_and_the_bandwidth_limit", _ceiling("read", "all"),
             lambda x: f"{x / 1e9:.1f} GB/s"),
    Measured("all_cores", "ch10_rooflines_and_the_bandwidth_limit", _all_cores, lambda x: f"{x:.0f}"),
    Measured("matmul_gflops", "ch10_rooflines_and_the_bandwidth_limit", _ceiling("product", "1"),
             lambda x: f"{x / 1e9:.0f} GFLOP/s"),
    Measured("ridge_cpu", "ch10_rooflines_and_the_bandwidth_limit", _ridge, lambda x: f"{x:.1f} FLOP/byte"),
    Measured("generate_tok_s", "ch10_rooflines_and_the_bandwidth_limit", _goal("transformers_tok_s"),
             lambda x: f"{x:.1f}"),
    Measured("engine_tok_s", "ch10_rooflines_and_the_bandwidth_limit", _goal("engine_tok_s"), lambda x: f"{x:.1f}"),
    Measured("engine_speedup", "ch10_rooflines_and_the_bandwidth_limit", _goal("speedup"), lambda x: f"{x:.2f}x"),
    Measured("engine_roofline", "ch10_rooflines_and_the_bandwidth_limit", _goal("fraction"), lambda x: f"{x * 100:.0f} %"),
]


def load_records(data: Path) -> dict[str, dict]:
    """Every chapter's recorded run in ``data``, by chapter stem (back matter)."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(data.glob("ch*.json"))}


def machine_line(provenance: dict) -> str:
    """One line naming the machine and software of a recorded run (back matter)."""
    m = provenance["machine"]
    v = provenance["versions"]
    features = ", ".join(f.upper().replace("_", "-") for f in m["matmul_features"] if f.startswith(("avx512", "amx")))
    return (f"{m['processor']} (family {m['cpu_family']}, model {m['cpu_model']}, stepping {m['stepping']}), "
            f"{m['physical_cores']} physical cores, {m['memory_bytes'] / 2**30:.1f} GiB memory, "
            f"{features or 'no AVX-512'}; PyTorch {v['torch']} (CPU kernels {m['torch_cpu_capability']}), "
            f"transformers {v['transformers']}, {provenance['dtype']}, {provenance['threads']} thread(s)")


def datasheet_rows(datasheets: list[dict], weights_gb: tuple[float, ...] = (14.0, 140.0)) -> dict[str, str]:
    """Datasheet figures and the decode bound they imply for weights of the given sizes (back matter).

    The bound is arithmetic, not a measurement: a batch-1 decode step reads every weight once, so
    it takes at least weight bytes / memory bandwidth.
    """
    out: dict[str, str] = {}
    for row in datasheets:
        key = row["part"].split()[1].lower()
        out[f"{key}_part"] = row["part"]
        out[f"{key}_cite"] = row["cite"]
        out[f"{key}_memory"] = f"{row['memory_gb']} GB {row['memory_kind']}"
        out[f"{key}_bandwidth"] = f"{row['bandwidth_gb_s']:,} GB/s"
        out[f"{key}_tflops"] = f"{row['dense_16bit_tflops']:,} TFLOP/s ({row['16bit_format']})"
        for gb in weights_gb:
            out[f"{key}_bound_{gb:.0f}gb"] = f"{gb / row['bandwidth_gb_s'] * 1e3:.1f} ms"
        ridge = row["dense_16bit_tflops"] * 1e12 / (row["bandwidth_gb_s"] * 1e9)
        out[f"{key}_ridge"] = f"{ridge:.0f}"
    return out


def substitutions(root: Path) -> dict[str, str]:
    """Every ``{{ key }}`` of the numbers page, read from ``root/data`` (back matter)."""
    records = load_records(root / "data")
    out: dict[str, str] = {}
    for m in MEASURED:
        out[m.key] = m.format(m.read(records[m.chapter]))
    reference = records["ch02_parameters_as_artefacts"]["provenance"]
    out["machine"] = machine_line(reference)
    out["recorded_utc"] = reference["created_utc"]
    for stem, record in records.items():
        if "provenance" in record:
            out[f"{stem[:4]}_model"] = record["provenance"]["model"]
    out.update(datasheet_rows(yaml.safe_load((root / "data" / "datasheets.yml").read_text())))
    return out
