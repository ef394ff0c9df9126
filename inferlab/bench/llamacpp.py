"""llama.cpp, the comparison engine of Chapter 12, run in a child process (Chapter 12).

Every call into llama.cpp (loading a GGUF file, generating, evaluating logits, quantising, reading
its build's CPU features) happens in a child process (:class:`inferlab.bench.child.ChildEngine`,
worker :mod:`inferlab.bench.llamacpp_worker`). If llama.cpp dies there, for example of SIGILL on a
processor whose instructions its build assumed, the call raises
:class:`~inferlab.bench.child.EngineCrashed` with one line and the notebook or test session goes on.

``python -m inferlab.bench.llamacpp record SECONDS CMAKE_ARGS OUT`` is how ``scripts/setup.sh``
writes the build record: the version, the build's flags and time, the CPU features llama.cpp says
it was compiled for, and whether it ran a short greedy generation on this processor.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from inferlab.bench.child import ChildEngine, EngineCrashed
from inferlab.bench.decode import Timed, decode_rate
from inferlab.errors import BadRequest

#: The child's worker module, loaded there by path.
WORKER = Path(__file__).with_name("llamacpp_worker.py")
#: llama.cpp's GGUF type for each file the comparison writes (``llama_ftype`` in ``llama.h``).
LLAMA_FTYPES = {"q8_0": 7}
#: The name a crash is reported under.
NAME = "llama.cpp"


def llama_cpp_version() -> str | None:
    """The installed ``llama-cpp-python`` version, or None; read from its metadata, nothing loaded (Chapter 12)."""
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return None


def _child(*args: Any, **kwargs: Any) -> ChildEngine:
    if llama_cpp_version() is None:
        raise BadRequest("llama-cpp-python is not installed (scripts/setup.sh builds it)")
    return ChildEngine(NAME, WORKER, *args, **kwargs)


class LlamaCpp:
    """One GGUF file loaded by llama.cpp in a child process, generating greedily from ids, timed per token (Chapter 12).

    Greedy with no repetition penalty and no end-of-sequence stop, so every request gives exactly N
    tokens; the KV cache is emptied before each request, so the prompt is always prefilled
    (:class:`inferlab.bench.llamacpp_worker.Worker`). The token times are read in the child, so the
    pipe between the processes adds nothing to them.
    """

    def __init__(self, path: Path, threads: int, context: int = 512) -> None:
        self.path = path
        self.engine = _child(str(path), threads=threads, context=context)

    def generate(self, prompt_ids: list[int], new_tokens: int) -> Timed:
        """N greedy tokens after ``prompt_ids``; TTFT and seconds per token after the first (Chapter 12)."""
        tokens, start, stamps = self.engine.call("generate", [int(i) for i in prompt_ids], new_tokens)
        return Timed(tokens, stamps[0] - start, decode_rate(stamps))

    def close(self) -> None:
        """End the child process (Chapter 12)."""
        self.engine.close()


def llama_cpp_logits(path: Path | str, threads: int, window: int = 512) -> Any:
    """llama.cpp on a GGUF file as a ``LogitsFn`` of :mod:`inferlab.bench.quality`: ids -> [n, vocab] (Chapter 12).

    ``Llama(logits_all=True)`` keeps every evaluated position's logits; each window is evaluated
    from an empty cache (:meth:`inferlab.bench.llamacpp_worker.Worker.logits`).
    """
    import torch

    engine = _child(str(path), threads=threads, context=window, logits_all=True)

    def run(ids: Any) -> torch.Tensor:
        return torch.from_numpy(engine.call("logits", [int(i) for i in ids]))
    run.engine = engine  # type: ignore[attr-defined]  # kept alive with the function
    return run


def gguf_for(format: str) -> Path:
    """The GGUF file llama.cpp runs for a format: the bundled Q4_1 file, or a Q8_0 file written from it (Chapter 12).

    The Q8_0 file is written once by llama.cpp's own quantiser (``llama_model_quantize`` with
    ``allow_requantize``: each tensor dequantised to float32, then quantised to Q8_0) into the lab's
    cache folder, and reused.
    """
    from inferlab.models.loaders import cache_root, smollm2_gguf

    source = smollm2_gguf()
    if format == "q4_1":
        return source
    if format not in LLAMA_FTYPES:
        raise BadRequest(f"no llama.cpp file for format {format!r}; have q4_1 and {', '.join(LLAMA_FTYPES)}")
    target = cache_root() / f"{source.stem.rsplit('.', 1)[0]}.{format.upper()}.gguf"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        with _child() as engine:
            status = engine.call("quantize", str(source), str(partial), LLAMA_FTYPES[format])
        if status != 0:
            raise RuntimeError(f"llama.cpp could not write {format} from {source.name} (status {status})")
        partial.rename(target)
    return target


def parse_system_info(text: str) -> dict[str, str]:
    """``llama_print_system_info()``'s ``KEY = VALUE`` pairs, e.g. ``{"AVX512": "1", "OPENMP": "1"}`` (Chapter 12).

    llama.cpp lists a CPU feature there only when its build compiled code for it
    (``ggml_backend_cpu_get_features`` in ``ggml-cpu.cpp``), so an absent ``AMX_INT8`` means no AMX kernels.
    """
    return dict(re.findall(r"([A-Z][A-Z0-9_]*) = (\w+)", text))


def system_info() -> dict[str, Any]:
    """What this build of llama.cpp says of itself, read in a child process: raw text and features (Chapter 12)."""
    with _child() as engine:
        text = engine.call("system_info")
    return {"system_info": text.strip(), "features": parse_system_info(text)}


def smoke_test(threads: int, new_tokens: int = 4) -> dict[str, Any]:
    """A short greedy generation on the bundled GGUF file, in a child; ``{"ran": True}`` or the crash's line (Chapter 12)."""
    from inferlab.models.loaders import smollm2_gguf

    try:
        runner = LlamaCpp(smollm2_gguf(), threads=threads)
        try:
            timed = runner.generate([1, 504, 3458, 282, 4649, 314], new_tokens)  # any ids: only that it runs matters
        finally:
            runner.close()
    except EngineCrashed as crash:
        return {"ran": False, "threads": threads, "error": str(crash), "signal": crash.signal}
    return {"ran": len(timed.tokens) == new_tokens, "threads": threads}


def build_record(seconds: int, cmake_args: str) -> dict[str, Any]:
    """The record ``scripts/setup.sh`` keeps of its llama-cpp-python build (Chapter 12)."""
    from inferlab.provenance import machine_facts

    info = system_info()
    machine = machine_facts()
    return {"seconds": seconds, "version": llama_cpp_version(), "cpus": os.cpu_count(), "cmake_args": cmake_args,
            "processor": {k: machine[k] for k in ("processor", "cpu_family", "cpu_model", "matmul_features")}, **info,
            "amx_kernels": any(name.startswith("AMX") for name in info["features"]),
            "smoke_test": smoke_test(threads=os.cpu_count() or 1)}


def main(argv: list[str]) -> int:
    """``record SECONDS CMAKE_ARGS OUT``: write the build record as JSON; exit 1 if llama.cpp cannot load (Chapter 12)."""
    if len(argv) != 4 or argv[0] != "record":
        print("usage: python -m inferlab.bench.llamacpp record SECONDS CMAKE_ARGS OUT", file=sys.stderr)
        return 2
    record = build_record(int(argv[1]), argv[2])
    Path(argv[3]).write_text(json.dumps(record, indent=1))
    smoke = record["smoke_test"]
    print(f"llama.cpp {record['version']}: {'ran here' if smoke['ran'] else smoke.get('error')}; "
          f"AMX kernels {'compiled' if record['amx_kernels'] else 'not compiled'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
