"""Comparison engines in a child process (Chapter 12): a crash there is one line and one failure, never the session.

The workers are the stand-ins of tests/child_workers.py, loaded by path in a fresh interpreter as
llama.cpp's worker is. A crash is forced the way a native one arrives: the child dies of a signal.
"""
import os
import signal
from pathlib import Path

import pytest

from inferlab.bench.child import ChildEngine, EngineCrashed, EngineError, describe_exit

WORKER = Path(__file__).with_name("child_workers.py")


@pytest.fixture()
def child():
    engine = ChildEngine("toy engine", WORKER)
    yield engine
    engine.close()


def test_a_call_runs_in_another_process_and_keeps_its_state(child):
    assert child.call("pid") == child.pid != os.getpid()
    assert child.call("echo", {"ids": [1, 2, 3]}) == {"ids": [1, 2, 3]}
    child.call("echo", None)
    assert child.call("count") == 2


def test_a_python_error_in_the_engine_is_reported_and_the_child_lives_on(child):
    with pytest.raises(EngineError, match="toy engine: ValueError: bad input"):
        child.call("fail")
    assert child.call("echo", 5) == 5


def test_a_child_killed_by_sigill_is_one_line_and_the_session_goes_on(child):
    with pytest.raises(EngineCrashed) as crash:
        child.call("crash", "SIGILL")
    assert str(crash.value) == "toy engine could not run on this processor: killed by SIGILL"
    assert crash.value.signal == "SIGILL" and "\n" not in str(crash.value)
    with pytest.raises(EngineCrashed) as again:  # the dead child stays dead, with the same report
        child.call("echo", 1)
    assert again.value is crash.value
    with ChildEngine("toy engine", WORKER) as fresh:  # and this process can start another
        assert fresh.call("echo", 2) == 2


def test_a_crash_while_loading_raises_at_construction():
    with pytest.raises(EngineCrashed, match="^toy engine crashed: killed by SIGSEGV$"):
        ChildEngine("toy engine", WORKER, die_on_init="SIGSEGV")


def test_a_child_that_stops_answering_is_killed():
    with ChildEngine("toy engine", WORKER, timeout_s=0.5) as slow:
        with pytest.raises(EngineCrashed, match="^toy engine stopped answering and was killed$"):
            slow.call("sleep", 30)


def test_private_methods_are_not_callable(child):
    with pytest.raises(ValueError, match="private method"):
        child.call("__class__")


@pytest.mark.parametrize("returncode, line, name", [
    (-signal.SIGILL, "x could not run on this processor: killed by SIGILL", "SIGILL"),
    (-signal.SIGABRT, "x crashed: killed by SIGABRT", "SIGABRT"),
    (3, "x exited unexpectedly with status 3", None),
    (None, "x stopped answering and was killed", None),
])
def test_describe_exit(returncode, line, name):
    assert describe_exit("x", returncode) == (line, name)


def test_a_llama_cpp_crash_ends_its_comparison_with_one_line(monkeypatch, tiny_models, loaded_tiny):
    """bench quant with a llama.cpp that dies of SIGILL at its first token: the engine's paths are still measured."""
    import inferlab.bench.llamacpp as llamacpp
    import inferlab.bench.quant as quant

    monkeypatch.setattr(llamacpp, "WORKER", WORKER)
    monkeypatch.setattr(llamacpp, "llama_cpp_version", lambda: "stand-in")
    monkeypatch.setattr(quant, "gguf_for", lambda fmt: WORKER)
    block = quant.measure_threads(loaded_tiny(tiny_models["gpt2"]), ["float32", "q8_0"], ["q8_0"], 1, [1, 2, 3],
                                  new_tokens=3, rounds=1)
    assert block["crashed"] == {"llama.cpp q8_0": "llama.cpp could not run on this processor: killed by SIGILL"}
    assert list(block["paths"]) == ["float32", "q8_0"] and block["comparisons"] == {}
    record = {"model": "tiny", "prompt_tokens": 3, "new_tokens": 3, "rounds": 1, "llama_cpp_version": "stand-in",
              "results": [block]}
    assert "  llama.cpp could not run on this processor: killed by SIGILL" in quant.format_quant(record).splitlines()
