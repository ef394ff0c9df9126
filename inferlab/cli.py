"""The command line: ``python -m inferlab generate PROMPT --max-new-tokens N`` (Chapter 1).

Every generation goes through the Chapter 6 engine, whatever the backend; the decoding rules of
Chapter 5 are flags. Bad input prints one line, ``inferlab: error: ...``, and exits with status 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from inferlab.errors import BadRequest, InferlabError
from inferlab.sampling.params import MAX_NEW_TOKENS_LIMIT, SamplingParams
from inferlab.sampling.rule import DecodingRule

BACKENDS = ("toy", "transformers", "native")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a malformed command line as the lab's one-line error, status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InferlabError(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every ``inferlab`` subcommand (Chapter 1)."""
    parser = _Parser(prog="inferlab", description="Inference Lab: timed generation requests.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    gen = sub.add_parser("generate", help="generate tokens after a prompt and time every stage")
    gen.add_argument("prompt")
    gen.add_argument("--max-new-tokens", type=int, default=8, help=f"1 to {MAX_NEW_TOKENS_LIMIT} (default 8)")
    gen.add_argument("--model", help="a registered model name (see: inferlab models); implies a real backend")
    gen.add_argument("--real", action="store_true", help="use the default real model (same as --model default)")
    gen.add_argument("--backend", choices=BACKENDS,
                     help="toy (default without a model), transformers (default with one) or native")
    gen.add_argument("--repeat", type=int, default=1, help="send the same request K times to one loaded model")
    gen.add_argument("--threads", type=int, help="PyTorch intra-op threads while generating")
    gen.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda where present)")
    gen.add_argument("--toy-seed", type=int, default=7, help="seed of the toy's table (default 7)")
    gen.add_argument("--weights-seed", type=int, default=0, help="seed of *-random weights (default 0, as in the book)")
    rules = gen.add_argument_group("decoding (Chapter 5); greedy unless a sampling option is given")
    rules.add_argument("--temperature", type=float, help="sample, dividing the logits by T (> 0)")
    rules.add_argument("--top-k", type=int, help="sample from the K most probable tokens")
    rules.add_argument("--top-p", type=float, help="sample from the smallest set holding probability P")
    rules.add_argument("--min-p", type=float, help="sample from tokens at least P times as probable as the top one")
    rules.add_argument("--repetition-penalty", type=float, help="penalise tokens already present (1.0: none)")
    rules.add_argument("--presence-penalty", type=float, default=0.0,
                       help="subtract P from the logit of every token already generated, -2 to 2 (0: none)")
    rules.add_argument("--frequency-penalty", type=float, default=0.0,
                       help="subtract F times its count from each generated token's logit, -2 to 2 (0: none)")
    rules.add_argument("--seed", type=int, help="seed of a sampled request (default: a fresh seed, recorded)")
    gen.add_argument("--stop", action="append", default=[], metavar="STR", help="stop when the text reaches STR (repeatable)")
    gen.add_argument("--stream", action="store_true", help="print text as it is produced")
    gen.add_argument("--json", action="store_true", help="print the full records as JSON")
    sub.add_parser("models", help="list the model names the lab knows")
    bench = sub.add_parser("bench", help="benchmarks with comparable records (Chapter 7)")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True, parser_class=_Parser)
    run = bench_sub.add_parser("run", help="take the book's benchmark suite on this machine and save the record")
    run.add_argument("--out", required=True, help="where to write the JSON record")
    run.add_argument("--model", default="default", help="a registered model name (default: the default model)")
    run.add_argument("--threads", type=int, nargs="+", default=[1], help="thread counts to measure (default 1)")
    run.add_argument("--repeats", type=int, default=9, help="timed repetitions per measurement (at least 6)")
    run.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda where present)")
    compare = bench_sub.add_parser("compare", help="set two benchmark records side by side, with their noise")
    compare.add_argument("mine", help="your record (from: inferlab bench run)")
    compare.add_argument("theirs", help="the record to compare with, e.g. data/ch07_bench_record.json")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    from inferlab.bench.decode import add_decode_arguments

    add_decode_arguments(bench_sub.add_parser(
        "decode", help="the engine's fastest CPU decode against transformers' generate (Chapter 10)"))
    from inferlab.bench.quant import add_quant_arguments

    add_quant_arguments(bench_sub.add_parser(
        "quant", help="the engine's quantised decode paths against llama.cpp on the same GGUF weights (Chapter 12)"))
    return parser


def sampling_params(args: argparse.Namespace) -> SamplingParams:
    """The request's :class:`SamplingParams` from the command line's flags (Chapter 6)."""
    sampled = any(getattr(args, k) is not None for k in ("temperature", "top_k", "top_p", "min_p"))
    rule = DecodingRule(do_sample=sampled, temperature=1.0 if args.temperature is None else args.temperature,
                        top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                        repetition_penalty=args.repetition_penalty,
                        presence_penalty=args.presence_penalty, frequency_penalty=args.frequency_penalty)
    if args.seed is not None and not sampled:
        raise BadRequest("--seed applies to sampled requests: add --temperature, --top-k, --top-p or --min-p")
    return SamplingParams(max_new_tokens=args.max_new_tokens, rule=rule, seed=args.seed, stop=tuple(args.stop))


def _generate(args: argparse.Namespace) -> int:
    params = sampling_params(args)  # refuse bad flags before loading anything
    if args.repeat < 1:
        raise BadRequest(f"--repeat must be at least 1, got {args.repeat}")
    if args.stream and args.json:
        raise BadRequest("--stream prints text as it arrives; it cannot be combined with --json")
    model = args.model or ("default" if args.real else None)
    backend_name = args.backend or ("transformers" if model else "toy")
    if backend_name == "toy" and (model or args.device):
        raise BadRequest("the toy backend has no model or device: drop --model/--real/--device, or pick "
                         "--backend transformers or native")
    if backend_name != "toy" and not model:
        raise BadRequest(f"--backend {backend_name} needs a model: add --model NAME or --real")
    if not args.prompt.strip():
        raise BadRequest("the prompt is empty: give at least one non-space character")
    from inferlab.engine import Engine, native_backend, toy_backend, transformers_backend

    load_seconds: float | None = None
    if backend_name == "toy":
        backend = toy_backend(args.toy_seed)
    else:
        from inferlab.models.registry import load_model

        loaded = load_model(model, device=args.device, seed=args.weights_seed, verbose=not args.json)
        load_seconds = loaded.load_seconds
        backend = (transformers_backend if backend_name == "transformers" else native_backend)(loaded)
    engine = Engine(backend, threads=args.threads)
    if args.stream:
        for _ in range(args.repeat):
            for event in engine.stream(args.prompt, params):
                if event.done and event.result is not None:
                    print(f"\n[{event.result.stop_reason}, {event.elapsed_s:.3f} s]")
                else:
                    print(event.text, end="", flush=True)
        return 0
    results = [engine.generate(args.prompt, params) for _ in range(args.repeat)]
    from inferlab.bench import format_summary, summarise_timings

    summary = summarise_timings(results)
    if args.json:
        payload = {"load_seconds": load_seconds, "results": [r.to_dict() for r in results],
                   "summary": [vars(row) for row in summary]}
        print(json.dumps(payload, indent=2, ensure_ascii=False))
        return 0
    for index, result in enumerate(results):
        label = f"[{index + 1}/{len(results)}] " if len(results) > 1 else ""
        print(f"{label}{result.prompt}\u2192{result.text!r}  ({result.stop_reason}, {result.total_seconds():.3f} s)")
    if load_seconds is not None:
        print(f"model load: {load_seconds:.2f} s")
    print(format_summary(summary))
    if results[0].simulated_stages:
        print("simulated stages: " + ", ".join(results[0].simulated_stages))
    return 0


def _models() -> int:
    from inferlab.models.registry import REGISTRY, RANDOM_SUFFIX, available_models

    for name in available_models():
        base = name.removesuffix(RANDOM_SUFFIX)
        if name.endswith(RANDOM_SUFFIX):
            note = f"architecture of {base}, seeded random weights"
        else:
            note = REGISTRY[base].description if base in REGISTRY else "gpt2 where it loads, else smollm2-135m"
        print(f"{name:<22}{note}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from inferlab.bench.harness import BenchRecord, compare, context_differences, format_comparison

    if args.bench_command == "decode":
        from inferlab.bench.decode import run_decode

        return run_decode(args)
    if args.bench_command == "quant":
        from inferlab.bench.quant import run_quant

        return run_quant(args)
    if args.bench_command == "run":
        if args.repeats < 6:
            raise BadRequest(f"--repeats must be at least 6 for a 95% interval around a median, got {args.repeats}")
        if min(args.threads) < 1:
            raise BadRequest(f"--threads must be at least 1, got {args.threads}")
        from inferlab.bench.suite import run_suite

        path = run_suite(args.model, args.threads, args.repeats, args.device).save(args.out)
        print(f"saved {path}")
        return 0
    mine, theirs = BenchRecord.load(args.mine), BenchRecord.load(args.theirs)
    rows, differences = compare(mine, theirs), context_differences(mine, theirs)
    if args.json:
        print(json.dumps({"rows": [vars(r) for r in rows],
                          "differences": {k: list(v) for k, v in differences.items()}}, indent=2, default=str))
    else:
        print(format_comparison(rows, differences))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; bad input prints ``inferlab: error: ...`` and returns 2 (Chapter 1)."""
    try:
        args = build_parser().parse_args(argv)
        commands = {"models": lambda: _models(), "bench": lambda: _bench(args), "generate": lambda: _generate(args)}
        return commands[args.command]()
    except InferlabError as error:
        print(f"inferlab: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
