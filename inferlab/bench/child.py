"""A comparison engine in a child process: its crash ends one comparison, never the session (Chapter 12).

Engines that load native code (llama.cpp now; vLLM and OpenVINO GenAI in Part IV) can die in ways
Python cannot catch: an instruction the processor lacks (SIGILL), a bad pointer (SIGSEGV), an abort
in a C++ assertion. Inside the notebook's or the test session's own process, such a death takes the
kernel or the whole pytest run with it. :class:`ChildEngine` runs the engine in a separate Python
process and talks to it over a pipe; when the child dies, the call raises :class:`EngineCrashed`
with one line, "llama.cpp could not run on this processor: killed by SIGILL", and the caller goes on.

The child is a fresh interpreter (``python -I this_file FD WORKER``), not a fork: a fork would copy
the parent's OpenMP and PyTorch thread pools, which GNU OpenMP does not survive, and a fresh process
imports only what the worker needs (not torch, unless the worker does). ``WORKER`` is the path of a
module that defines ``Worker``; the child builds ``Worker(*args, **kwargs)`` from the first message,
then answers each ``(method, args, kwargs)`` message with ``("ok", result)`` or ``("error", text)``.
This file imports only the standard library, so the child can run it by path without importing
``inferlab`` (whose ``__init__`` imports torch).
"""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any

#: Seconds a call may take before the child is killed and the call fails (generous: a model load on
#: a busy 2-core machine takes seconds; nothing the book runs takes minutes).
DEFAULT_TIMEOUT_S = 600.0


class EngineCrashed(RuntimeError):
    """The child process of a comparison engine died or stopped answering (Chapter 12).

    ``str(error)`` is one line for the reader; ``error.stderr_tail`` keeps the child's last lines
    of standard error, and ``error.signal`` the signal's name when a signal killed it.
    """

    def __init__(self, message: str, signal_name: str | None = None, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.signal = signal_name
        self.stderr_tail = stderr_tail


class EngineError(RuntimeError):
    """The engine raised a Python exception in its child; the child lives on (Chapter 12)."""


def describe_exit(name: str, returncode: int | None) -> tuple[str, str | None]:
    """One line for how a child ended, and the signal's name if a signal ended it (Chapter 12).

    A negative return code is the signal that killed the process (``subprocess.Popen.returncode``).
    SIGILL means the code uses an instruction this processor does not run, so that line names the
    processor; other deaths are said as they are.
    """
    if returncode is None:
        return f"{name} stopped answering and was killed", None
    if returncode < 0:
        try:
            signame = signal.Signals(-returncode).name
        except ValueError:
            signame = f"signal {-returncode}"
        if signame == "SIGILL":
            return f"{name} could not run on this processor: killed by SIGILL", signame
        return f"{name} crashed: killed by {signame}", signame
    return f"{name} exited unexpectedly with status {returncode}", None


class ChildEngine:
    """A worker object living in a child process; :meth:`call` runs one of its methods there (Chapter 12).

    ``ChildEngine("llama.cpp", worker_path, model_path, threads=1)`` starts
    ``python -I child.py FD worker_path``, builds ``Worker(model_path, threads=1)`` there and waits
    for it (a crash while loading raises :class:`EngineCrashed` at once). ``call("generate", ids, 8)``
    returns what ``Worker.generate(ids, 8)`` returned, pickled across the pipe. Once the child has
    died, every later call raises the same :class:`EngineCrashed`. ``close()`` (or ``with``) ends it.
    """

    def __init__(self, name: str, worker: Path | str, *args: Any, timeout_s: float = DEFAULT_TIMEOUT_S,
                 env: dict[str, str] | None = None, **kwargs: Any) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self.crashed: EngineCrashed | None = None
        self._stderr = tempfile.TemporaryFile()
        self._conn, theirs = Pipe()
        fd = theirs.fileno()
        self._process = subprocess.Popen([sys.executable, "-I", str(Path(__file__).resolve()), str(fd), str(worker)],
                                         pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=self._stderr,
                                         stderr=self._stderr, env={**os.environ, **(env or {})})
        theirs.close()
        self._request(("__init__", args, kwargs))

    @property
    def pid(self) -> int:
        """The child's process id (Chapter 12)."""
        return self._process.pid

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``Worker.method(*args, **kwargs)`` in the child and return its result (Chapter 12).

        Raises :class:`EngineCrashed` if the child dies or does not answer within ``timeout_s``,
        :class:`EngineError` if the method raised (the child then lives on).
        """
        if method.startswith("_"):
            raise ValueError(f"cannot call the private method {method!r} of {self.name}'s worker")
        return self._request((method, args, kwargs))

    def _request(self, message: tuple[str, tuple[Any, ...], dict[str, Any]]) -> Any:
        if self.crashed is not None:
            raise self.crashed
        try:
            self._conn.send(message)
            if not self._conn.poll(self.timeout_s):
                self._process.kill()
                self._process.wait()
                raise self._crash(None)
            status, value = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise self._crash(self._process.wait()) from None
        if status == "error":
            raise EngineError(f"{self.name}: {value}")
        return value

    def _crash(self, returncode: int | None) -> EngineCrashed:
        message, signame = describe_exit(self.name, returncode)
        self._stderr.seek(0)
        tail = "\n".join(self._stderr.read().decode(errors="replace").splitlines()[-20:])
        self.crashed = EngineCrashed(message, signame, tail)
        self._conn.close()
        return self.crashed

    def close(self) -> None:
        """End the child (it exits when its pipe closes; killed if it does not within 10 s) (Chapter 12)."""
        if not self._conn.closed:
            self._conn.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._stderr.close()

    def __enter__(self) -> ChildEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_process", None) is not None and self._process.poll() is None:
            self._conn.close()


def serve(conn: Connection, worker_path: str) -> None:
    """The child's loop: build the worker from the first message, then answer every call (Chapter 12)."""
    spec = importlib.util.spec_from_file_location("_inferlab_child_worker", worker_path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no worker module at {worker_path}")
    module = importlib.util.module_from_spec(spec)
    worker: Any = None
    while True:
        try:
            method, args, kwargs = conn.recv()
        except EOFError:  # the parent closed the pipe: done
            return
        try:
            if method == "__init__":
                spec.loader.exec_module(module)
                worker = module.Worker(*args, **kwargs)
                result = None
            else:
                result = getattr(worker, method)(*args, **kwargs)
            conn.send(("ok", result))
        except Exception as error:  # noqa: BLE001 - a Python error in the engine is reported, not fatal
            traceback.print_exc()
            conn.send(("error", f"{type(error).__name__}: {error}"))


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])), sys.argv[2])
