"""llama.cpp's build (scripts/setup.sh): no AMX kernels on any processor, and a record of what it was built for.

On an Intel Xeon with AMX, llama-cpp-python 0.3.36 built with GGML_NATIVE runs tile instructions on
OpenMP workers that never asked for permission, and dies of SIGILL (ggml-org/llama.cpp PR #26954).
setup.sh adds -mno-amx-* to the compilers' flags. The first test checks the rule that makes this
work whatever processor runs the test: with those flags first, even -march=sapphirerapids (a
processor with AMX) defines none of the macros behind which ggml compiles its AMX kernels.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inferlab.bench.llamacpp import llama_cpp_version, parse_system_info

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / "scripts" / "setup.sh"
RECORD = Path(sys.prefix) / "llama-cpp-build.json"


def setup_variable(name: str) -> str:
    """A variable of setup.sh's llama.cpp build, as bash expands it."""
    lines = [line for line in SETUP.read_text().splitlines() if line.startswith(("NO_AMX=", "LLAMA_CMAKE_ARGS="))]
    script = "\n".join(lines) + f'\nprintf %s "${name}"'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout


def macros(flags: list[str]) -> set[str]:
    out = subprocess.run(["gcc", *flags, "-dM", "-E", "-x", "c", "-"], input="", capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[1] for line in out.splitlines() if line.startswith("#define")}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_the_build_flags_turn_off_amx_even_for_a_processor_that_has_it():
    no_amx = setup_variable("NO_AMX").split()
    assert no_amx == ["-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"]
    amx = {"__AMX_TILE__", "__AMX_INT8__", "__AMX_BF16__"}
    assert amx <= macros(["-march=sapphirerapids"])  # the test can fail: without the flags, AMX is on
    with_flags = macros([*no_amx, "-march=sapphirerapids"])  # the order GGML_NATIVE gives: ours, then -march
    assert not amx & with_flags and "__AVX512VNNI__" in with_flags  # AMX off, the rest of the processor kept
    for flag in ("CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS"):
        assert f"-D{flag}='{' '.join(no_amx)}'" in setup_variable("LLAMA_CMAKE_ARGS")


def test_system_info_is_read_as_features():
    text = "CPU : SSE3 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
    assert parse_system_info(text) == {"SSE3": "1", "AVX512": "1", "AVX512_VNNI": "1", "LLAMAFILE": "1",
                                       "OPENMP": "1", "REPACK": "1"}


@pytest.mark.skipif(llama_cpp_version() is None, reason="llama-cpp-python is not installed")
def test_the_installed_build_is_the_one_setup_describes_and_it_ran_here():
    record = json.loads(RECORD.read_text())
    assert record["version"] == llama_cpp_version()
    assert record["cmake_args"] == setup_variable("LLAMA_CMAKE_ARGS")
    assert not record["amx_kernels"] and not any(k.startswith("AMX") for k in record["features"])
    assert record["smoke_test"]["ran"], record["smoke_test"].get("error")
