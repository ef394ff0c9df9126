"""Record every GPU experiment of the book in one run, with provenance, into data/gpu/.

    .venv/bin/python scripts/gpu_runs.py                  # on a machine with CUDA: the full set
    .venv/bin/python scripts/gpu_runs.py --device cpu --quick --out /tmp/gpu   # the same code, tiny, on a CPU

The chapters never need a GPU: where a GPU changes the lesson they show the JSON this script
wrote, with its provenance, and say plainly when none exists. Each experiment writes one file,
``<out>/<name>.json``; an experiment that fails is recorded with its error and the others still
run. Sized to finish in under eight minutes on one datacentre GPU.

Experiments (chapter that shows each):
- ``sync`` (Chapter 7): a clock read after launching matrix products without waiting, with
  ``torch.cuda.synchronize``, and with CUDA events.
- ``suite`` (Chapter 7): the book's benchmark suite (read bandwidth, a square matmul, a prefill, a
  cached decode step) as a benchmark record comparable with ``inferlab bench compare``.
- ``phases`` (Chapter 8): prefill time against prompt length, decode step time against context.
- ``roofline`` (Chapter 10): read bandwidth and matmul FLOP/s per dtype.
- ``decode`` (Chapters 10 and 11): batch-1 greedy decode per dtype (float32, bfloat16): transformers'
  ``generate``, the engine's decode-optimised path and its ``compile_decode`` path (not in
  ``--quick``); per path the seconds per decode step, the weight bytes per token and the GB/s they
  imply; the GPU's datasheet bandwidth (by ``torch.cuda.get_device_name``; None for an unknown part),
  the bfloat16 weight-read floor and each step over it, against the goal of a step within 2x of it.
- ``launch`` (Chapter 11): the time per operation of a chain of small in-place additions against
  the tensor's size, run eagerly, replayed as a CUDA graph (CUDA only), and compiled with
  ``torch.compile(mode="reduce-overhead")`` (not in ``--quick``): where launching, not the work,
  sets the time.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from inferlab.bench.harness import BenchRecord, measure  # noqa: E402
from inferlab.bench.steps import prefilled_cache, repeatable_decode_step  # noqa: E402
from inferlab.provenance import machine_facts  # noqa: E402

MODEL = "smollm2-135m"


def environment(device: str) -> dict[str, Any]:
    """What ran the experiments: machine, accelerator, library versions."""
    import transformers

    facts: dict[str, Any] = {"device": device, "machine": machine_facts(), "torch": torch.__version__,
                             "transformers": transformers.__version__, "python": sys.version.split()[0],
                             "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        facts.update(gpu=props.name, gpu_memory_bytes=props.total_memory, cuda=torch.version.cuda,
                     multiprocessors=props.multi_processor_count, capability=f"{props.major}.{props.minor}")
    return facts


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def exp_sync(device: str, quick: bool) -> dict[str, Any]:
    """Launch-only time, synchronised time and CUDA-event time of the same queued products."""
    n, launches = (256, 4) if quick else (4096, 20)
    a = torch.randn(n, n, device=device)

    def launch() -> None:
        for _ in range(launches):
            a @ a

    cuda = device.startswith("cuda")
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    launch(); sync()  # warm-up
    unwaited, waited, events = [], [], []
    for _ in range(3 if quick else 10):
        sync()
        start = time.perf_counter(); launch(); unwaited.append(time.perf_counter() - start)
        sync()
        start = time.perf_counter(); launch(); sync(); waited.append(time.perf_counter() - start)
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record(); launch(); end.record(); end.synchronize()
            events.append(begin.elapsed_time(end) / 1e3)
    return {"matrix": n, "launches": launches, "flop": 2 * n**3 * launches, "unwaited_s": unwaited,
            "waited_s": waited, "cuda_events_s": events}


def exp_suite(device: str, quick: bool, loaded: Any) -> dict[str, Any]:
    """The book's suite on this device, as a benchmark record."""
    from inferlab.bench.suite import suite_measurements

    measurements = suite_measurements(loaded, threads=(1,), repeats=6 if quick else 15, warmup=2)
    record = BenchRecord("inferlab bench suite (GPU)", measurements,
                         loaded.provenance.with_run(device, 1).to_dict(), settings={"device": device})
    return record.to_dict()


def exp_phases(device: str, quick: bool, loaded: Any) -> dict[str, Any]:
    """Prefill against prompt length; one cached decode step against context length."""
    from inferlab.models.hf import TransformersLM

    model = TransformersLM(loaded.model, loaded.context)
    lengths = [1, 8, 64] if quick else [1, 8, 32, 128, 512, 1024, 2048, 4096]
    lengths = [n for n in lengths if n < loaded.context]
    prefill, decode = {}, {}
    for n in lengths:
        ids = torch.randint(0, model.vocab_size, (1, n), device=device)
        with torch.inference_mode():
            prefill[n] = measure(lambda: model(ids, last_only=True), repeats=5 if quick else 11, warmup=2,
                                 device=device).seconds
            step = repeatable_decode_step(model, ids[:, -1:], torch.tensor([[n]], device=device),
                                          prefilled_cache(model, ids))
            decode[n] = measure(step, repeats=5 if quick else 21, warmup=3, device=device).seconds
    return {"dtype": str(next(loaded.model.parameters()).dtype), "prefill_s": prefill, "decode_step_s": decode}


def exp_roofline(device: str, quick: bool) -> dict[str, Any]:
    """Read bandwidth (a sum over a large tensor) and matmul FLOP/s for float32, TF32 and bfloat16."""
    n_bytes = (64 if quick else 4096) * 2**20
    data = torch.ones(n_bytes // 4, device=device)
    read = measure(data.sum, repeats=5 if quick else 21, warmup=3, device=device).seconds
    size = 256 if quick else 8192
    rates = {}
    for name, dtype, tf32 in (("float32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bfloat16", torch.bfloat16, False)):
        if name == "tf32" and not device.startswith("cuda"):
            continue
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            a = torch.randn(size, size, device=device, dtype=dtype)
            rates[name] = measure(lambda: a @ a, repeats=5 if quick else 21, warmup=3, device=device).seconds
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
    return {"read_bytes": n_bytes, "read_s": read, "matmul_size": size, "matmul_flop": 2 * size**3,
            "matmul_s": rates}


#: The path whose tokens every other path of the decode experiment is compared with.
REFERENCE_PATH = "float32/transformers generate"

#: Part II's goal for a GPU (the issue's): a batch-1 decode step within this factor of the bfloat16 weight-read floor.
GPU_GOAL_FACTOR = 2.0


def datasheet_bandwidth(device_name: str | None) -> tuple[str | None, float | None]:
    """The datasheet part and memory bandwidth (bytes/s) of a GPU named as ``torch.cuda.get_device_name`` names it.

    Only parts whose name says which datasheet row applies: "Tesla T4"; "NVIDIA A100-SXM4-40GB" or
    "A100-PCIE-40GB" (both 1,555 GB/s); "NVIDIA A100-SXM4-80GB"; "NVIDIA H100 80GB HBM3" or "H100 SXM";
    "NVIDIA H200". The part is matched as a whole word of the name, so that "NVIDIA GH200 480GB" (a
    Grace Hopper superchip, whose memory is not the H200's) is not taken for an H200. Anything else
    (an A100 80GB PCIe, an H100 PCIe or NVL, an H200 NVL, a GH200, any CPU) gives (None, None): the
    record then says that no datasheet figure was found, rather than guess one.
    """
    from inferlab.bench.memory import DATASHEET_BANDWIDTH

    name = (device_name or "").upper().replace("-", " ")
    words = set(name.split())
    key = None
    if "T4" in words:
        key = "T4"
    elif "A100" in words and "40GB" in words:
        key = "A100 40GB"
    elif "A100" in words and "80GB" in words and any(w.startswith("SXM") for w in words):
        key = "A100 80GB SXM"
    elif ("H100" in words and (any(w.startswith("SXM") for w in words) or "HBM3" in words)
          and "PCIE" not in words and "NVL" not in words):
        key = "H100 SXM"
    elif "H200" in words and "NVL" not in words:
        key = "H200"
    return (key, DATASHEET_BANDWIDTH[key]) if key else (None, None)


def decode_summary(step_s: dict[str, float | None], weight_bytes: dict[str, int], device_name: str | None,
                   factor: float = GPU_GOAL_FACTOR) -> dict[str, Any]:
    """Achieved GB/s per dtype and path, the bfloat16 weight-read floor, and each step over it (Chapter 11).

    ``step_s``: "dtype/path" -> median seconds per decode step (None where the path failed);
    ``weight_bytes``: dtype -> weight bytes read per token. The floor is bfloat16's weight bytes over
    the datasheet bandwidth of the GPU (None when the part is unknown); the goal is a step within
    ``factor`` of it.
    """
    part, bandwidth = datasheet_bandwidth(device_name)
    floor = weight_bytes["bfloat16"] / bandwidth if bandwidth and "bfloat16" in weight_bytes else None
    rows = {}
    for key, seconds in step_s.items():
        dtype = key.split("/", 1)[0]
        row: dict[str, Any] = {"step_s": seconds}
        if seconds:
            row["achieved_bytes_per_s"] = weight_bytes[dtype] / seconds
            row["step_over_bf16_floor"] = seconds / floor if floor else None
            row["within_goal"] = seconds <= factor * floor if floor else None
        rows[key] = row
    return {"device_name": device_name, "datasheet_part": part, "datasheet_bytes_per_s": bandwidth,
            "datasheet_note": ("data/datasheets.yml, inferlab.bench.memory.DATASHEET_BANDWIDTH" if part else
                               "no datasheet bandwidth for this device: floor and ratios are None"),
            "bf16_weight_read_floor_s": floor, "goal": f"decode step <= {factor} x the bfloat16 weight-read floor",
            "paths": rows}


def exp_decode(device: str, quick: bool) -> dict[str, Any]:
    """Batch-1 greedy decode per dtype: transformers, the engine's decode-optimised path, compiled (Chapters 10, 11).

    Per dtype (float32, bfloat16) and path: the median over rounds of the seconds per decode step
    (time of token N minus time of token 1, over N - 1: :mod:`inferlab.bench.decode`'s measure; each
    token reaches the host before the next step, which synchronises the device), the tokens, and
    whether they equal transformers' in float32 (None if that path failed); then :func:`decode_summary`
    against the datasheet. Neither engine path uses a CUDA graph: ``compile_decode`` compiles in
    inductor's default mode, so the compiled path measures fusion, not the removal of launches.
    """
    from inferlab.analysis.sizing import decode_weight_bytes
    from inferlab.bench.decode import PROMPT, time_engine, time_transformers
    from inferlab.engine import Engine
    from inferlab.engine.backends import decode_backend
    from inferlab.models.registry import load_model

    new_tokens, rounds = (6, 1) if quick else (64, 5)
    device_name = torch.cuda.get_device_name(device) if device.startswith("cuda") else None
    results: dict[str, Any] = {"new_tokens": new_tokens, "rounds": rounds, "batch": 1, "paths": {}}
    step_s: dict[str, float | None] = {}
    weight_bytes: dict[str, int] = {}
    reference = None
    for dtype in ("float32", "bfloat16"):
        loaded = load_model(MODEL, device=device, dtype=dtype)
        ids = list(loaded.tokenizer(PROMPT, add_special_tokens=False).input_ids)
        weight_bytes[dtype] = decode_weight_bytes(loaded.model)
        paths: dict[str, Callable[[], Any]] = {
            "transformers generate": lambda loaded=loaded, ids=ids: time_transformers(loaded.model, ids, new_tokens)}
        for compiled in ((False,) if quick else (False, True)):  # quick: compiling is tested in tests/test_decode.py
            try:
                if compiled:
                    torch._dynamo.reset()
                backend = decode_backend(loaded, layout="streamed" if compiled else "in_out", compiled=compiled)
                engine = Engine(backend, kv_cache="static")
            except Exception as error:  # one path failing must not lose the others
                results["paths"][f"{dtype}/engine{' compiled' if compiled else ''}"] = {
                    "error": f"{type(error).__name__}: {error}"}
                continue
            paths[f"engine decode-optimised{' compiled' if compiled else ''}"] = (
                lambda engine=engine, ids=ids: time_engine(engine, ids, new_tokens))
        for name, run in paths.items():
            key = f"{dtype}/{name}"
            try:
                started = time.perf_counter()
                run()  # warm-up (and compilation)
                warm_up_s = time.perf_counter() - started
                timed = [run() for _ in range(rounds)]
                if key == REFERENCE_PATH:  # the reference is float32 transformers' tokens, never another path's
                    reference = timed[0].tokens
                step_s[key] = statistics.median(t.decode_s_per_token for t in timed)
                results["paths"][key] = {
                    "decode_s_per_token_rounds": [t.decode_s_per_token for t in timed],
                    "ttft_s_rounds": [t.ttft_s for t in timed], "warm_up_s": warm_up_s,
                    "tokens": timed[0].tokens,
                    # None when float32 transformers failed: there is then nothing to compare with
                    "tokens_equal_float32_transformers": None if reference is None else timed[0].tokens == reference}
            except Exception as error:
                step_s[key] = None
                results["paths"][key] = {"error": f"{type(error).__name__}: {error}"}
        del loaded
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    results["weight_bytes_per_token"] = weight_bytes
    results["summary"] = decode_summary(step_s, weight_bytes, device_name)
    return results


def exp_launch(device: str, quick: bool) -> dict[str, Any]:
    """Time per operation of a chain of in-place additions, eager, as a CUDA graph and compiled, against size."""
    ops = 20 if quick else 100
    sizes = [1, 1024] if quick else [1, 1024, 2**16, 2**20, 2**24]

    def chain(x: torch.Tensor) -> torch.Tensor:
        for _ in range(ops):
            x.add_(1e-4)
        return x

    def chain_out_of_place(x: torch.Tensor) -> torch.Tensor:
        for _ in range(ops):
            x = x + 1e-4
        return x

    rows: dict[int, dict[str, Any]] = {}
    for size in sizes:
        x = torch.zeros(size, device=device)
        row: dict[str, Any] = {"ops": ops, "bytes_per_op": 2 * 4 * size}  # each op reads and writes the tensor
        row["eager_s"] = measure(lambda: chain(x), repeats=5 if quick else 21, warmup=2, device=device).seconds
        if device.startswith("cuda"):
            graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # warm-up on a side stream before capture, three iterations, as in the
                for _ in range(3):            # "Whole-network capture" example of PyTorch's notes on CUDA semantics
                    chain(x)
            torch.cuda.current_stream().wait_stream(stream)
            with torch.cuda.graph(graph):
                chain(x)
            row["graph_s"] = measure(graph.replay, repeats=21, warmup=2, device=device).seconds
        else:
            row["graph_s"] = None  # CUDA graphs exist only on CUDA devices
        if not quick:
            # out of place: inductor fuses the chain into one kernel, and its CUDA graphs would skip a graph that
            # mutates an input. With the default triton.cudagraph_support_input_mutation=True that skip happens at run
            # time: the CUDA graph trees (torch/_inductor/cudagraph_trees.py, _update_non_cudagraph_managed_mutation)
            # call check_for_mutation (cudagraph_utils.py), log "skipping cudagraphs due to mutated inputs" once and run
            # that function without a graph. (output_code.py checks mutation at compile time only when that option is
            # off.) On a CPU it makes no graph at all.
            compiled = torch.compile(chain_out_of_place, mode="reduce-overhead")
            for _ in range(3):  # compilation, then the recordings of its CUDA graph (cudagraph trees warm up first)
                compiled(x)
            row["compiled_s"] = measure(lambda: compiled(x), repeats=21, warmup=2, device=device).seconds
        rows[size] = row
    return {"note": ("seconds per whole chain; divide by ops for the time per operation; compiled_s is an "
                     "out-of-place chain that inductor fuses (one kernel, in a CUDA graph on CUDA)"), "sizes": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default=str(ROOT / "data" / "gpu"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the code, measures nothing useful")
    parser.add_argument("--only", nargs="+", help="run only these experiments")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_runs: no CUDA device here; run with --device cpu --quick to check the script", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from functools import cache

    from inferlab.models.registry import load_model

    model = cache(lambda: load_model(MODEL, device=args.device, dtype="float32"))  # loaded once, when first needed
    experiments: dict[str, Callable[[], dict[str, Any]]] = {
        "sync": lambda: exp_sync(args.device, args.quick),
        "suite": lambda: exp_suite(args.device, args.quick, model()),
        "phases": lambda: exp_phases(args.device, args.quick, model()),
        "roofline": lambda: exp_roofline(args.device, args.quick),
        "decode": lambda: exp_decode(args.device, args.quick),
        "launch": lambda: exp_launch(args.device, args.quick),
    }
    failed = 0
    env = environment(args.device)
    for name, run in experiments.items():
        if args.only and name not in args.only:
            continue
        started = time.perf_counter()
        try:
            result, error = run(), None
        except Exception:
            result, error = None, traceback.format_exc(limit=3)
            failed += 1
        record = {"experiment": name, "quick": args.quick, "environment": env, "model": MODEL,
                  "seconds": time.perf_counter() - started, "result": result, "error": error}
        (out / f"{name}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
        print(f"{name}: {'failed' if error else 'ok'} in {record['seconds']:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
