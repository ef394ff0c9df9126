"""Workers for tests/test_child.py: loaded by path in a child process, like inferlab/bench/llamacpp_worker.py."""
import os
import resource
import signal
import time


def die(signame: str) -> None:
    """Kill this process with a signal, as a native crash would, leaving no core file behind."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), getattr(signal, signame))


class Worker:
    """A stand-in engine: echoes, raises, sleeps, or dies of a signal on request."""

    def __init__(self, model_path: str | None = None, die_on_init: str | None = None, **_: object) -> None:
        if die_on_init:
            die(die_on_init)
        self.calls = 0

    def echo(self, value: object) -> object:
        self.calls += 1
        return value

    def pid(self) -> int:
        return os.getpid()

    def count(self) -> int:
        return self.calls

    def fail(self) -> None:
        raise ValueError("bad input")

    def crash(self, signame: str = "SIGILL") -> None:
        die(signame)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def generate(self, prompt_ids: list, new_tokens: int) -> None:  # llama.cpp's call, dying as on an AMX machine
        die("SIGILL")
