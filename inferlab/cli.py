"""The command line: ``python -m inferlab generate PROMPT --max-new-tokens N`` (Chapter 1)."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from inferlab.errors import InferlabError
from inferlab.request import MAX_NEW_TOKENS_LIMIT, parse_request
from inferlab.timing import format_summary, run_repeated, summarise_timings


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every ``inferlab`` subcommand (Chapter 1)."""
    parser = argparse.ArgumentParser(prog="inferlab", description="Inference Lab: timed generation requests.")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="generate tokens after a prompt and time every stage")
    gen.add_argument("prompt")
    gen.add_argument("--max-new-tokens", type=int, default=8, help=f"1 to {MAX_NEW_TOKENS_LIMIT} (default 8)")
    gen.add_argument("--real", action="store_true", help="use a real model (the default model unless --model)")
    gen.add_argument("--model", help="a registered model name; implies --real (see: inferlab models)")
    gen.add_argument("--repeat", type=int, default=1, help="send the same request K times to one loaded model")
    gen.add_argument("--threads", type=int, help="PyTorch intra-op threads for the real model")
    gen.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda where present)")
    gen.add_argument("--seed", type=int, default=7, help="seed of the toy generator's table (default 7)")
    gen.add_argument("--weights-seed", type=int, default=0, help="seed of *-random weights (default 0, as in the book)")
    gen.add_argument("--backend", choices=["runner", "transformers", "native"], default="runner",
                     help="runner: Chapter 1's RealModelRunner (default); transformers or native: the "
                          "Chapter 6 engine with that backend")
    gen.add_argument("--stop", action="append", default=[], metavar="STR",
                     help="stop when the text reaches STR (repeatable; engine backends and the toy)")
    gen.add_argument("--stream", action="store_true", help="print text as it is produced (engine)")
    gen.add_argument("--json", action="store_true", help="print the full record as JSON")
    sub.add_parser("models", help="list the model names the lab knows")
    return parser


def _generate(args: argparse.Namespace) -> int:
    parse_request(args.prompt, args.max_new_tokens)  # refuse bad input before loading anything
    if args.repeat < 1:
        raise InferlabError(f"--repeat must be at least 1, got {args.repeat}")
    if args.threads is not None and args.threads < 1:
        raise InferlabError(f"--threads must be at least 1, got {args.threads}")
    if not (args.real or args.model) and (args.threads is not None or args.device):
        raise InferlabError("--threads and --device apply to real models only: add --real or --model")
    uses_engine = args.backend != "runner" or args.stop or args.stream
    real = args.real or args.model
    if args.stream and args.json:
        raise InferlabError("--stream prints text as it arrives; it cannot be combined with --json")
    if real and uses_engine and args.backend == "runner":
        raise InferlabError("--stop and --stream need the engine: add --backend transformers or native")
    if not real and args.backend != "runner":
        raise InferlabError("--backend applies to real models: add --real or --model")
    if real:
        from inferlab.models.registry import load_model

        loaded = load_model(args.model or "default", device=args.device, seed=args.weights_seed,
                            verbose=not args.json)
        load_seconds: float | None = loaded.load_seconds
        if uses_engine:
            from inferlab.engine.backends_old import NativeBackend, TransformersBackend
            from inferlab.engine import Engine

            backend = TransformersBackend(loaded) if args.backend == "transformers" else NativeBackend(loaded)
            generator: object = Engine(backend, threads=args.threads)
        else:
            from inferlab.runner import RealModelRunner

            generator = RealModelRunner(loaded, threads=args.threads)
    else:
        load_seconds = None
        if uses_engine:
            from inferlab.engine.backends_old import ToyBackend
            from inferlab.engine import Engine

            generator = Engine(ToyBackend(seed=args.seed))
        else:
            from inferlab.toy import ToyGenerator

            generator = ToyGenerator(seed=args.seed)
    if args.stream:
        for _ in range(args.repeat):
            for event in generator.stream(args.prompt, args.max_new_tokens, stop=args.stop):  # type: ignore[attr-defined]
                if event.done:
                    print(f"\n[{event.result.stop_reason}, {event.elapsed_s:.3f} s]")
                else:
                    print(event.text, end="", flush=True)
        return 0
    if args.stop:
        results = [generator.generate(args.prompt, args.max_new_tokens, stop=args.stop)  # type: ignore[attr-defined]
                   for _ in range(args.repeat)]
    else:
        results = run_repeated(generator, args.prompt, args.max_new_tokens, args.repeat)
    summary = summarise_timings(results)
    if args.json:
        payload = {
            "load_seconds": load_seconds,
            "results": [r.to_dict() for r in results],
            "summary": [vars(row) for row in summary],
        }
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        for index, result in enumerate(results):
            label = f"[{index + 1}/{len(results)}] " if len(results) > 1 else ""
            print(f"{label}{result.prompt}\u2192{result.text!r}  ({result.total_seconds():.3f} s)")
        if load_seconds is not None:
            print(f"model load: {load_seconds:.2f} s")
        print(format_summary(summary))
        if results[0].simulated_stages:
            print("simulated stages: " + ", ".join(results[0].simulated_stages))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; bad input prints ``inferlab: error: ...`` and returns 2 (Chapter 1)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "models":
            from inferlab.models.registry import REGISTRY, available_models

            for name in available_models():
                base = name.removesuffix("-random")
                note = REGISTRY[base].description if base in REGISTRY else "gpt2 where it loads, else smollm2-135m"
                if name.endswith("-random"):
                    note = f"architecture of {base}, seeded random weights"
                print(f"{name:<22}{note}")
            return 0
        return _generate(args)
    except InferlabError as error:
        print(f"inferlab: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
