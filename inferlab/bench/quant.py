"""Quantised decode: the engine's packed formats against llama.cpp on the same GGUF weights (Chapter 12).

One command, ``python -m inferlab bench quant``, answers Chapter 12's speed question: at batch 1,
greedy, same prompt, same thread count and number of new tokens, how many tokens per second does
the engine's compiled decode path produce from each weight format (:data:`inferlab.models.quantized.FORMATS`,
and float32), against llama.cpp (through ``llama-cpp-python``) running GGUF files of the same bit
width: the bundled Q4_1 file itself, and a Q8_0 file that llama.cpp's own quantiser writes from it
(:func:`gguf_for`). The engine's ``q4_1`` and ``q8_0`` paths hold the same codes as those files
(the float32 model *is* the bundled file dequantised), so the two engines multiply by the same
weights; they differ in their kernels, and in that llama.cpp's CPU products also quantise the
activation row to 8 bits.

Method, as :mod:`inferlab.bench.decode`: for each thread count every path runs a short untimed
request (the engine's compilation happens there, timed), then all paths run in turn, ``rounds``
times, the order reversed every other round. A path's number is its median decode tokens/s after the
first token over the rounds. The record names, per bit width, the ratio of llama.cpp's rate to the
engine's fastest path of that width (:data:`GOAL`: within 2x), and each path's greedy agreement with
the engine's float32 tokens (the length of the common prefix, and the share of equal positions).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from inferlab.bench.child import EngineCrashed
from inferlab.bench.decode import PROMPT, WARM_UP_TOKENS, Timed, alternating_rounds, check_settings, time_engine, usable_cpus
from inferlab.bench.llamacpp import LlamaCpp, gguf_for, llama_cpp_version
from inferlab.errors import BadRequest
from inferlab.models.registry import LoadedModel

#: The issue's goal: llama.cpp's decode tokens/s over the engine's fastest path of the same bit width.
GOAL = {"llama_cpp_over_engine_at_most": 2.0}
#: The engine's paths: float32, then each packed format; their bit widths for the comparison.
ENGINE_PATHS = {"float32": None, "int8": "int8", "q8_0": "q8_0", "int4": "int4", "q4_1": "q4_1"}
BITS = {"float32": 32, "int8": 8, "q8_0": 8, "int4": 4, "q4_1": 4}


def gguf_tensor_bytes(path: Path | str) -> int:
    """Bytes of a GGUF file's tensors: its weights, without the file's metadata and tokenizer (Chapter 12)."""
    import gguf

    return sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)
def agreement(tokens: Sequence[int], reference: Sequence[int]) -> dict[str, Any]:
    """Greedy agreement: the common prefix's length and the share of equal positions (Chapter 12).

    After the first difference the two texts condition on different tokens, so the share of equal
    positions beyond it says little; the prefix is the number to read.
    """
    prefix = next((i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b), min(len(tokens), len(reference)))
    equal = sum(a == b for a, b in zip(tokens, reference)) / max(len(reference), 1)
    return {"common_prefix": prefix, "equal_share": equal, "identical": list(tokens) == list(reference)}


def _engine(loaded: LoadedModel, format: str | None, threads: int) -> Any:
    from inferlab.engine import Engine
    from inferlab.engine.backends import decode_backend

    return Engine(decode_backend(loaded, layout="streamed", compiled=True, quantization=format), threads=threads,
                  kv_cache="static")


def measure_threads(loaded: LoadedModel, paths: Sequence[str], llama_formats: Sequence[str], threads: int,
                    prompt_ids: list[int], new_tokens: int, rounds: int) -> dict[str, Any]:
    """One thread count: build and warm every path, run them in alternating rounds, summarise (Chapter 12)."""
    import torch

    from inferlab.models.quantized import weight_bytes

    started = time.perf_counter()
    torch.set_num_threads(threads)
    torch._dynamo.reset()  # compiled kernels are specialised to the thread count
    runners: dict[str, Callable[[], Timed]] = {}
    info: dict[str, dict[str, Any]] = {}
    for name in paths:
        engine = _engine(loaded, ENGINE_PATHS[name], threads)
        start = time.perf_counter()
        time_engine(engine, prompt_ids, WARM_UP_TOKENS)  # compiles the format's step
        info[name] = {"engine": "inferlab", "bits": BITS[name], "weight_bytes": weight_bytes(engine.backend.model),
                      "compile_and_warm_up_s": time.perf_counter() - start}
        runners[name] = lambda e=engine: time_engine(e, prompt_ids, new_tokens)
    crashed: dict[str, str] = {}  # llama.cpp runs in a child process: a crash there ends that path only
    llama_runners: dict[str, LlamaCpp] = {}
    for fmt in llama_formats:
        name = f"llama.cpp {fmt}"
        try:
            path = gguf_for(fmt)
            llama_runners[name] = runner = LlamaCpp(path, threads)
            runner.generate(prompt_ids, WARM_UP_TOKENS)
        except EngineCrashed as crash:
            crashed[name] = str(crash)
            continue
        info[name] = {"engine": f"llama.cpp (llama-cpp-python {llama_cpp_version()})", "bits": BITS[fmt],
                      "gguf": path.name, "file_bytes": path.stat().st_size, "weight_bytes": gguf_tensor_bytes(path)}
        runners[name] = lambda r=runner: r.generate(prompt_ids, new_tokens)
    load_before = os.getloadavg()[0]
    try:
        while True:
            try:
                runs = alternating_rounds(runners, rounds)
                break
            except EngineCrashed as crash:  # mid-run: the rounds start again without the engine that died
                name = next(n for n, r in llama_runners.items() if r.engine.crashed is crash)
                crashed[name] = str(crash)
                del runners[name]
    finally:
        for runner in llama_runners.values():
            runner.close()
    reference = runs["float32"][0].tokens if "float32" in runs else None
    rows = {}
    for name, timed in runs.items():
        rates = [1 / t.decode_s_per_token for t in timed]
        rows[name] = {**info[name], "decode_tok_s": statistics.median(rates), "decode_tok_s_rounds": rates,
                      "ttft_s": statistics.median(t.ttft_s for t in timed), "tokens": timed[0].tokens,
                      "same_tokens_every_round": all(t.tokens == timed[0].tokens for t in timed)}
        if reference is not None:
            rows[name]["agreement_with_float32"] = agreement(timed[0].tokens, reference)
    comparisons = {}
    for fmt in llama_formats:
        bits = BITS[fmt]
        mine = [n for n in paths if BITS[n] == bits]
        if not mine or f"llama.cpp {fmt}" not in rows:
            continue
        best = max(mine, key=lambda n: rows[n]["decode_tok_s"])
        theirs = rows[f"llama.cpp {fmt}"]["decode_tok_s"]
        ratio = theirs / rows[best]["decode_tok_s"]
        comparisons[f"{bits}-bit"] = {"engine_path": best, "llama_cpp": f"llama.cpp {fmt}", "llama_cpp_over_engine": ratio,
                                      "goal_met": ratio <= GOAL["llama_cpp_over_engine_at_most"]}
    return {"threads": threads, "load_average_before_after": [load_before, os.getloadavg()[0]], "paths": rows,
            "comparisons": comparisons, "crashed": crashed, "wall_s": time.perf_counter() - started}


def measure_quant(loaded: LoadedModel, threads: Sequence[int] = (1,), new_tokens: int = 32, rounds: int = 3,
                  paths: Sequence[str] = tuple(ENGINE_PATHS), llama_formats: Sequence[str] | None = None,
                  prompt: str | list[int] = PROMPT) -> dict[str, Any]:
    """Time the engine's paths and llama.cpp's, interleaved, at each thread count; a JSON-able record (Chapter 12).

    ``llama_formats`` (default: ``("q4_1", "q8_0")`` when llama-cpp-python is installed and the model
    is the bundled SmolLM2, else none) names the GGUF files llama.cpp runs (:func:`gguf_for`).
    """
    import torch

    started = time.perf_counter()
    prompt_ids = (list(loaded.tokenizer(prompt, add_special_tokens=False).input_ids) if isinstance(prompt, str)
                  else list(prompt))
    check_settings(threads, new_tokens, rounds, prompt_ids)
    unknown = [p for p in paths if p not in ENGINE_PATHS]
    if unknown or not paths:
        raise BadRequest(f"unknown engine paths {unknown}; have {', '.join(ENGINE_PATHS)}")
    if loaded.device != "cpu" or next(loaded.model.parameters()).dtype != torch.float32:
        raise BadRequest("the quantisation benchmark starts from the float32 model on the CPU; load it with "
                         "device='cpu', dtype='float32'")
    if llama_formats is None:
        llama_formats = ("q4_1", "q8_0") if llama_cpp_version() and loaded.name == "smollm2-135m" else ()
    elif llama_formats and loaded.name != "smollm2-135m":
        raise BadRequest("llama.cpp runs the bundled SmolLM2 GGUF file; load smollm2-135m to compare with it")
    elif llama_formats and not llama_cpp_version():
        raise BadRequest("llama-cpp-python is not installed (scripts/setup.sh builds it)")
    previous = torch.get_num_threads()
    try:
        blocks = [measure_threads(loaded, paths, llama_formats, count, prompt_ids, new_tokens, rounds)
                  for count in threads]
    finally:
        torch.set_num_threads(previous)
        torch._dynamo.reset()
    return {
        "benchmark": "quantised decode against llama.cpp (Chapter 12)",
        "model": loaded.name, "device": "cpu", "batch": 1, "decoding": "greedy", "prompt_tokens": len(prompt_ids),
        "new_tokens": new_tokens, "rounds": rounds, "llama_cpp_version": llama_cpp_version(),
        "method": ("decode tok/s = (N-1) / (time of token N - time of token 1), median over rounds run in "
                   "alternating order after a short warm-up each (the engine's compilation included in it); "
                   "agreement = common prefix with the engine's float32 greedy tokens"),
        "goal": GOAL, "results": blocks, "wall_s": time.perf_counter() - started,
        "provenance": loaded.provenance.to_dict(),
    }


def format_quant(record: dict[str, Any]) -> str:
    """The record as a table per thread count, and the comparisons at each bit width (Chapter 12)."""
    lines = [f"{record['model']}, batch 1, greedy, {record['prompt_tokens']} prompt + {record['new_tokens']} new tokens, "
             f"median of {record['rounds']} alternating rounds; llama-cpp-python {record['llama_cpp_version']}"]
    for block in record["results"]:
        lines.append(f"\n{block['threads']} thread(s)")
        lines.append(f"  {'path':<16}{'bits':>5}{'weights MB':>12}{'decode tok/s':>14}{'TTFT ms':>9}{'same prefix':>13}")
        for name, row in block["paths"].items():
            size = row.get("weight_bytes", row.get("file_bytes", 0)) / 1e6
            prefix = row.get("agreement_with_float32", {}).get("common_prefix", "")
            lines.append(f"  {name:<16}{row['bits']:>5}{size:>12.1f}{row['decode_tok_s']:>14.1f}"
                         f"{row['ttft_s'] * 1e3:>9.0f}{prefix!s:>13}")
        for message in block.get("crashed", {}).values():
            lines.append(f"  {message}")
        for width, c in block["comparisons"].items():
            verdict = "met" if c["goal_met"] else "not met"
            lines.append(f"  {width}: {c['llama_cpp']} / engine {c['engine_path']} = {c['llama_cpp_over_engine']:.2f}x "
                         f"decode tok/s (goal: at most {GOAL['llama_cpp_over_engine_at_most']:.0f}x; {verdict})")
    return "\n".join(lines)


def add_quant_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``inferlab bench quant`` (Chapter 12)."""
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="thread counts (default: 1 and all usable cores)")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paths", nargs="+", default=list(ENGINE_PATHS), choices=list(ENGINE_PATHS))
    parser.add_argument("--no-llama-cpp", action="store_true", help="time the engine's paths only")
    parser.add_argument("--json", action="store_true", help="print the whole record as JSON")


def run_quant(args: argparse.Namespace) -> int:
    """``inferlab bench quant``: load the model, measure, print the table or the JSON record (Chapter 12)."""
    from inferlab.models.registry import load_model

    threads = args.threads or sorted({1, usable_cpus()})
    loaded = load_model(args.model, device="cpu", dtype="float32")
    record = measure_quant(loaded, threads=threads, new_tokens=args.new_tokens, rounds=args.rounds, paths=args.paths,
                           llama_formats=() if args.no_llama_cpp else None)
    print(json.dumps(record, indent=1) if args.json else format_quant(record))
    return 0
