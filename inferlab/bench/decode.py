"""Decode speed: the engine's fastest CPU path against transformers' ``generate``, step by step (Chapter 10).

One command, ``python -m inferlab bench decode``, answers Chapter 10's question: at batch 1, in
float32, greedy, with the same model, prompt, thread count and number of new tokens, how many
tokens per second does the engine's fastest decode path produce, against transformers' ``generate``
with its KV cache, and how close does it come to the bandwidth roofline (every weight read once per
token, at the read bandwidth measured at that thread count)?

Method. The model loads once. For each thread count, every path runs a short untimed request
(warm-up, and the compilation of the compiled path, timed), then all paths run in turn, ``rounds`` times, the order
reversed every other round (ABC, CBA, ...) so that a slow drift of the machine falls on every path
alike; the read bandwidth is measured in every round too. A path's number is its median over the
rounds; the load average before and after each block tells how busy the machine was. *Decode* speed counts the tokens after the first: (N - 1) / (time of token N - time of
token 1), the steady state that the roofline bounds; the time to the first token (TTFT, the
prefill) is reported beside it. transformers runs with ``eos_token_id=None``
(``GenerationConfig.update`` overwrites every key passed to ``generate``, so no end-of-sequence
criterion is built) and the engine with ``ignore_eos``: both produce exactly N tokens, and the
benchmark reports whether they are the same tokens.

Each path changes the one before, so the table shows what each change bought (:data:`STAGES`): the
plain native model recomputing every position, then a dynamic KV cache, a static one, the
decode-optimised model (fused projections, fewer small operations), its [in, out] weight layout,
then ``torch.compile`` of the streamed [out, in] product, which replaces that layout as it
compiles, and last ``torch.compile`` of the [in, out] model, whose products stay calls into the BLAS
library while inductor fuses the small operations between them. The last two are alternatives, not
steps: which is faster depends on the processor and the thread count (in Chapter 10's published
runs the compiled [in, out] path was the faster at one thread, the streamed one at two), so the
benchmark times both and names the fastest path of each run (their compilation, timed with the
warm-up, is reported apart: ``compile_and_warm_up_s``). A chapter that measures other things too can time the short selection
(:data:`SHORT_STAGES`, ``--stages short``) with fewer rounds or new tokens. ``--stages compile``
(Chapter 11) times the best eager stage against two compiled ones and prints the ratio of the faster,
"torch.compile vs eager: N.NNx decode tokens/s" (:func:`compile_vs_eager`). Timings on a shared
machine are noisy: read ratios, and the spread over the rounds that the record keeps.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from inferlab.bench.memory import measure_read_bandwidth
from inferlab.cpuinfo import processor_words
from inferlab.engine.backends import Backend, end_of_sequence_ids
from inferlab.engine.llm_engine import Engine
from inferlab.errors import BadRequest
from inferlab.models.registry import LoadedModel
from inferlab.sampling.params import SamplingParams

PROMPT = "An inference engine takes a trained model and a request, and it must turn them into"
#: New tokens of the untimed warm-up request of each path: enough for a prefill and a decode step.
WARM_UP_TOKENS = 3
#: The decode goal for the fastest path: its fraction of the measured roofline, at one thread and at all
#: cores, on either processor of the book's machine kind; its ratio to transformers, measured side by
#: side, is reported beside it.
GOAL = {"roofline_fraction_one_thread": 0.8, "roofline_fraction_all_cores": 0.7}


def goal_fraction(threads: int) -> float:
    """The roofline fraction :data:`GOAL` asks of the fastest path at this thread count (Chapter 10)."""
    return GOAL["roofline_fraction_one_thread" if threads == 1 else "roofline_fraction_all_cores"]


@dataclass(frozen=True)
class Stage:
    """One path of the ablation: which model copy, which cache, and whether it is compiled (Chapter 10)."""

    name: str
    layout: str | None  # None: the plain native model; else a layout of inferlab.models.decode.LAYOUTS
    kv_cache: bool | str
    compiled: bool = False


#: The steps from the plain native model to the fastest path, each changing the one before, in order (Chapter 10).
STAGES = (
    Stage("native, no cache", None, False),
    Stage("+ dynamic KV cache", None, True),
    Stage("+ static KV cache", None, "static"),
    Stage("+ fused, fewer ops", "out_in", "static"),
    Stage("+ [in, out] layout", "in_out", "static"),
    Stage("+ torch.compile", "streamed", "static", compiled=True),
    Stage("torch.compile, [in, out]", "in_out", "static", compiled=True),
)
#: A short selection, for a chapter that measures other things too: the plain native model with its
#: static cache, the best eager path and the two compiled ones, each against transformers.
SHORT_STAGES = (STAGES[2], STAGES[4], STAGES[5], STAGES[6])
#: The compile comparison of Chapter 11: the best eager decode-optimised stage and the compiled ones.
COMPILE_STAGES = (STAGES[4], STAGES[5], STAGES[6])
#: The selections that ``inferlab bench decode --stages`` names.
SELECTIONS = {"all": STAGES, "short": SHORT_STAGES, "compile": COMPILE_STAGES}


@dataclass(frozen=True)
class Timed:
    """One timed generation: its tokens, time to the first token, and seconds per token after it (Chapter 10)."""

    tokens: list[int]
    ttft_s: float
    decode_s_per_token: float


def decode_rate(stamps: Sequence[float]) -> float:
    """Seconds per token after the first, from the times at which each token appeared (Chapter 10)."""
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1)


def alternating_rounds(paths: dict[str, Callable[[], Timed]], rounds: int,
                       after_round: Callable[[], None] | None = None) -> dict[str, list[Timed]]:
    """Run every path once per round, the order reversed every other round (ABC, CBA, ...); results by path (Chapter 10).

    A slow drift of the machine then falls on every path alike. ``after_round`` runs after each
    round (the decode benchmark measures the read bandwidth there).
    """
    runs: dict[str, list[Timed]] = {name: [] for name in paths}
    for index in range(rounds):
        for name in (list(paths) if index % 2 == 0 else list(reversed(paths))):
            runs[name].append(paths[name]())
        if after_round is not None:
            after_round()
    return runs


class _Stamps:
    """A transformers streamer that notes when each new token arrives (the first call is the prompt)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        if self.prompt_seen:
            self.times.append(time.perf_counter())
        self.prompt_seen = True

    def end(self) -> None:
        pass


def time_transformers(model: Any, prompt_ids: list[int], new_tokens: int) -> Timed:
    """transformers' ``generate``: greedy, its KV cache, no end-of-sequence stop, exactly N tokens (Chapter 10)."""
    import torch

    ids = torch.tensor([prompt_ids], device=model.device)  # on the model's device: 4.x only warns about a mismatch
    stamps = _Stamps()
    with torch.inference_mode():
        start = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False,
                             use_cache=True, eos_token_id=None, pad_token_id=0, streamer=stamps)
    tokens = out[0, len(prompt_ids):].tolist()
    return Timed(tokens, stamps.times[0] - start, decode_rate(stamps.times))


def time_engine(engine: Engine, prompt_ids: list[int], new_tokens: int) -> Timed:
    """One greedy request through the engine's loop, exactly N tokens, timed at each streamed token (Chapter 10)."""
    stamps, tokens = [], []
    for event in engine.stream(prompt_ids, SamplingParams(max_new_tokens=new_tokens, ignore_eos=True)):
        if event.token_id is not None:
            stamps.append(event.elapsed_s)
            tokens.append(event.token_id)
    return Timed(tokens, stamps[0], decode_rate(stamps))


def stage_backend(loaded: LoadedModel, stage: Stage, native: Any) -> Backend:
    """The backend of one stage: the plain native model, or a decode-optimised copy of it (Chapter 10)."""
    from inferlab.models.decode import decode_optimised

    model = native if stage.layout is None else decode_optimised(native, stage.layout)
    return Backend(name=f"{stage.name} ({loaded.name})", model=model, tokenizer=loaded.tokenizer,
                   eos_token_ids=end_of_sequence_ids(loaded), device=loaded.device,
                   provenance={"backend": f"native (inferlab.models), {stage.name}", **loaded.provenance.to_dict()})


def usable_cpus() -> int:
    """The CPUs this process may run on (Chapter 10)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def check_settings(threads: Sequence[int], new_tokens: int, rounds: int, prompt_ids: list[int]) -> None:
    """Refuse settings the measurement cannot use (Chapter 10)."""
    usable = usable_cpus()
    if not threads or any(isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= usable for t in threads):
        raise BadRequest(f"thread counts must be whole numbers from 1 to {usable} (this machine's CPUs), "
                         f"got {list(threads)}")
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 2:
        raise BadRequest(f"new_tokens must be at least 2 (decode speed is timed after the first), got {new_tokens!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise BadRequest(f"rounds must be a whole number of at least 1, got {rounds!r}")
    if not prompt_ids:
        raise BadRequest("the prompt has no token ids")


def _summary(runs: list[Timed], reference: list[int], weight_bytes: int, bandwidth: float,
             baseline: float | None) -> dict[str, Any]:
    """Median decode tokens/s, TTFT, the spread over rounds, tokens, and the roofline fraction of one path."""
    rates = [1 / r.decode_s_per_token for r in runs]
    rate = statistics.median(rates)
    summary = {"decode_tok_s": rate, "decode_tok_s_rounds": rates, "ttft_s": statistics.median(r.ttft_s for r in runs),
               "tokens_identical": all(r.tokens == reference for r in runs),
               "roofline_fraction": rate * weight_bytes / bandwidth}
    if baseline is not None:
        summary["speedup_vs_transformers"] = rate / baseline
    return summary


def compile_vs_eager(stages: Sequence[Stage], rows: dict[str, Any]) -> dict[str, Any] | None:
    """The fastest compiled path's decode tokens/s over the fastest eager stage's, or None without both (Chapter 11).

    ``ratio`` divides the two medians over the rounds; ``round_ratios`` divides round by round (the
    rounds ran in alternating order, so each pair shares the machine's state); ``tokens_identical``
    says whether both paths gave transformers' tokens in every round.
    """
    eager = [s.name for s in stages if not s.compiled and s.name in rows]
    compiled = [s.name for s in stages if s.compiled and s.name in rows]
    if not eager or not compiled:
        return None
    e = max(eager, key=lambda name: rows[name]["decode_tok_s"])
    c = max(compiled, key=lambda name: rows[name]["decode_tok_s"])
    return {"compiled": c, "eager": e, "ratio": rows[c]["decode_tok_s"] / rows[e]["decode_tok_s"],
            "round_ratios": [a / b for a, b in zip(rows[c]["decode_tok_s_rounds"], rows[e]["decode_tok_s_rounds"])],
            "tokens_identical": rows[c]["tokens_identical"] and rows[e]["tokens_identical"]}


def measure_threads(loaded: LoadedModel, stages: Sequence[Stage], backends: Sequence[Backend], threads: int,
                    prompt_ids: list[int], new_tokens: int, rounds: int, bandwidth_bytes: int | None) -> dict[str, Any]:
    """One thread count: warm every path up, run them in alternating rounds, summarise (Chapter 10)."""
    import torch

    from inferlab.analysis.sizing import decode_weight_bytes
    from inferlab.models.decode import compile_decode

    started = time.perf_counter()
    torch.set_num_threads(threads)
    engines = {}
    for stage, backend in zip(stages, backends):
        if stage.compiled:
            torch._dynamo.reset()  # compiled kernels are specialised to the thread count: compile again
            compile_decode(backend.model)
        engines[stage.name] = Engine(backend, threads=threads, kv_cache=stage.kv_cache)
    load_before = os.getloadavg()[0]
    warm_up_s = {}
    for name, engine in engines.items():  # the compiled path compiles here
        start = time.perf_counter()
        time_engine(engine, prompt_ids, WARM_UP_TOKENS)
        warm_up_s[name] = time.perf_counter() - start
    time_transformers(loaded.model, prompt_ids, WARM_UP_TOKENS)
    paths: dict[str, Callable[[], Timed]] = {
        "transformers generate": lambda: time_transformers(loaded.model, prompt_ids, new_tokens)}
    paths.update({name: (lambda e=engine: time_engine(e, prompt_ids, new_tokens)) for name, engine in engines.items()})
    bandwidths: list[float] = []
    runs = alternating_rounds(paths, rounds, after_round=lambda: bandwidths.append(
        measure_read_bandwidth(bandwidth_bytes, repeats=5, threads=threads).bytes_per_s))
    bandwidth, weight_bytes = statistics.median(bandwidths), decode_weight_bytes(loaded.model)
    reference = runs["transformers generate"][0].tokens
    hf = _summary(runs["transformers generate"], reference, weight_bytes, bandwidth, None)
    rows = {name: _summary(runs[name], reference, weight_bytes, bandwidth, hf["decode_tok_s"]) for name in engines}
    for stage in stages:
        if stage.compiled:
            rows[stage.name]["compile_and_warm_up_s"] = warm_up_s[stage.name]
    fastest = max(rows, key=lambda name: rows[name]["decode_tok_s"])
    best = rows[fastest]
    return {"threads": threads, "load_average_before_after": [load_before, os.getloadavg()[0]],
            "read_bandwidth_bytes_per_s": bandwidth, "read_bandwidth_rounds": bandwidths,
            "roofline_tok_s": bandwidth / weight_bytes, "transformers": hf, "paths": rows, "fastest": fastest,
            "goal_roofline_fraction": goal_fraction(threads),
            "goal_met": best["roofline_fraction"] >= goal_fraction(threads) and best["tokens_identical"],
            "compile_vs_eager": compile_vs_eager(stages, rows), "wall_s": time.perf_counter() - started}


def measure_decode(loaded: LoadedModel, threads: Sequence[int] = (1,), new_tokens: int = 16, rounds: int = 3,
                   stages: Sequence[Stage] = STAGES, prompt: str | list[int] = PROMPT,
                   bandwidth_bytes: int | None = None) -> dict[str, Any]:
    """Time transformers' ``generate`` and each stage, interleaved, at each thread count; a JSON-able record (Chapter 10).

    ``loaded`` is a float32 model on the CPU (GPT-2 or Llama family). ``prompt`` is text or token
    ids. ``bandwidth_bytes`` sizes the read-bandwidth measurement (None: at least 256 MiB, see
    :func:`inferlab.bench.memory.measure_read_bandwidth`). The record names, per thread count, each
    path's median decode tokens/s, TTFT, speed-up over transformers and fraction of the roofline,
    whether its tokens equal transformers', and the fastest path; and :data:`GOAL` and whether the
    fastest path met it.
    """
    import torch

    from inferlab.analysis.sizing import decode_weight_bytes
    from inferlab.models.build import native_from_hf

    started = time.perf_counter()
    prompt_ids = (list(loaded.tokenizer(prompt, add_special_tokens=False).input_ids) if isinstance(prompt, str)
                  else list(prompt))
    check_settings(threads, new_tokens, rounds, prompt_ids)
    if loaded.device != "cpu" or next(loaded.model.parameters()).dtype != torch.float32:
        raise BadRequest("the decode benchmark compares float32 paths on the CPU; load the model with "
                         "device='cpu', dtype='float32'")
    native = native_from_hf(loaded.model)
    backends = [stage_backend(loaded, stage, native) for stage in stages]
    previous = torch.get_num_threads()
    try:
        blocks = [measure_threads(loaded, stages, backends, count, prompt_ids, new_tokens, rounds, bandwidth_bytes)
                  for count in threads]
    finally:
        torch.set_num_threads(previous)
    return {
        "benchmark": "decode (Chapter 10)",
        "model": loaded.name, "dtype": "float32", "device": "cpu", "batch": 1, "decoding": "greedy",
        "prompt_tokens": len(prompt_ids), "new_tokens": new_tokens, "rounds": rounds,
        "weight_bytes_per_token": decode_weight_bytes(loaded.model),
        "method": ("decode tok/s = (N-1) / (time of token N - time of token 1), median over rounds run in "
                   "alternating order (ABC, CBA, ...) after a short warm-up each; TTFT = time to the first token; "
                   "roofline tok/s = measured read bandwidth (torch.sum) / weight bytes read per token"),
        "goal": GOAL, "stages": [stage.name for stage in stages], "results": blocks,
        "wall_s": time.perf_counter() - started, "provenance": loaded.provenance.to_dict(),
    }


def run_decode_benchmark(model: str = "smollm2-135m", threads: Sequence[int] | None = None, new_tokens: int = 16,
                         rounds: int = 3, compile: bool = True,
                         stages: str | Sequence[Stage] = "all") -> dict[str, Any]:
    """Load ``model`` once (float32, CPU) and run :func:`measure_decode` at 1 thread and at all usable cores (Chapter 10).

    ``stages`` is a name in :data:`SELECTIONS` (``"all"``: the whole ablation; ``"short"``:
    :data:`SHORT_STAGES`, for a chapter; ``"compile"``: :data:`COMPILE_STAGES`, Chapter 11) or a sequence of :class:`Stage`; ``compile=False`` leaves
    out the compiled stage.
    """
    from inferlab.models.registry import load_model

    if threads is None:
        threads = sorted({1, usable_cpus()})
    if isinstance(stages, str):
        if stages not in SELECTIONS:
            raise BadRequest(f"unknown selection of stages {stages!r}; have {', '.join(SELECTIONS)}")
        stages = SELECTIONS[stages]
    stages = tuple(s for s in stages if compile or not s.compiled)
    check_settings(threads, new_tokens, rounds, [0])
    loaded = load_model(model, device="cpu", dtype="float32")
    return {**measure_decode(loaded, threads, new_tokens, rounds, stages), "load_s": loaded.load_seconds}


def format_decode(record: dict[str, Any]) -> str:
    """A text table of :func:`measure_decode`'s record: one block per thread count (Chapter 10)."""
    lines = [f"{record['model']}, float32, batch 1, greedy, {record['prompt_tokens']} prompt tokens + "
             f"{record['new_tokens']} new, median of {record['rounds']} rounds; decode = tokens after the first",
             f"processor: {processor_words(record.get('provenance', {}).get('machine'))}"]
    for block in record["results"]:
        lines.append("")
        before, after = block["load_average_before_after"]
        lines.append(f"{block['threads']} thread(s): read bandwidth {block['read_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s, "
                     f"roofline {block['roofline_tok_s']:.1f} tok/s; load average {before:.1f} before, {after:.1f} after "
                     f"({usable_cpus()} CPUs)")
        lines.append(f"  {'path':<24}{'decode tok/s':>13}{'TTFT ms':>9}{'x HF':>7}{'roofline':>10}{'same tokens':>13}")
        rows = [("transformers generate", block["transformers"])] + list(block["paths"].items())
        for name, row in rows:
            lines.append(f"  {name:<24}{row['decode_tok_s']:>13.1f}{row['ttft_s'] * 1e3:>9.0f}"
                         f"{row.get('speedup_vs_transformers', 1.0):>7.2f}{row['roofline_fraction']:>10.0%}"
                         f"{'yes' if row['tokens_identical'] else 'NO':>13}")
        fastest = block["paths"][block["fastest"]]
        lines.append(f"  fastest: {block['fastest']}, {fastest['speedup_vs_transformers']:.2f}x transformers, "
                     f"{fastest['roofline_fraction']:.0%} of the roofline; goal ({block['goal_roofline_fraction']:.0%} "
                     f"of the roofline) {'met' if block['goal_met'] else 'not met'}")
        ratio = block.get("compile_vs_eager")
        if ratio:
            compile_s = block["paths"][ratio["compiled"]].get("compile_and_warm_up_s")
            lines.append(f"  torch.compile vs eager: {ratio['ratio']:.2f}x decode tokens/s ({ratio['compiled']} against "
                         f"{ratio['eager']}; same tokens: {'yes' if ratio['tokens_identical'] else 'NO'}"
                         + (f"; compiling and warm-up {compile_s:.1f} s)" if compile_s is not None else ")"))
    return "\n".join(lines)


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``inferlab bench decode`` (Chapter 10)."""
    parser.add_argument("--model", default="smollm2-135m", help="a registered model (default smollm2-135m)")
    parser.add_argument("--threads", type=int, action="append",
                        help="a thread count to measure (repeatable; default: 1 and all usable cores)")
    parser.add_argument("--new-tokens", type=int, default=16, help="tokens to generate per run (default 16)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per path (default 3)")
    parser.add_argument("--stages", choices=list(SELECTIONS), default="all",
                        help="the whole ablation (all, the default), a short selection for a chapter (short), "
                        "or the best eager stage against two compiled ones (compile, Chapter 11)")
    parser.add_argument("--no-compile", action="store_true", help="leave out the torch.compile stage")
    parser.add_argument("--json", action="store_true", help="print the record as JSON")


def run_decode(args: argparse.Namespace) -> int:
    """Run ``inferlab bench decode``: print the table, or the record as JSON with ``--json`` (Chapter 10)."""
    record = run_decode_benchmark(args.model, args.threads, args.new_tokens, args.rounds, not args.no_compile,
                                  getattr(args, "stages", "all"))
    print(json.dumps(record, indent=2) if args.json else format_decode(record))
    return 0
