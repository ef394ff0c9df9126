"""The scheduler decides which sequences share the next model call (Chapter 6).

Part I runs one request at a time: its ``n`` samples (one, unless a request asks for more) run
together until all have stopped, then the next request starts. Part III replaces this class
(static batches in Chapter 14, continuous batching in Chapter 15); the loop that calls it stays.
"""
from __future__ import annotations

from collections import deque

from inferlab.engine.sequence import Sequence, Status


class OneRequestScheduler:
    """First come, first served, one request (all its samples) at a time (Chapter 6)."""

    def __init__(self) -> None:
        self.waiting: deque[list[Sequence]] = deque()
        self.running: list[Sequence] = []

    def add(self, group: list[Sequence]) -> None:
        """Queue the samples of one request (Chapter 6)."""
        self.waiting.append(group)

    def schedule(self) -> list[Sequence]:
        """The sequences to run next: the current request's unfinished samples (Chapter 6)."""
        self.running = [s for s in self.running if not s.finished]
        if not self.running and self.waiting:
            self.running = self.waiting.popleft()
            for sequence in self.running:
                sequence.status = Status.RUNNING
        return list(self.running)

    def abort(self, request_id: int) -> None:
        """Drop a request, running or waiting (Chapter 6)."""
        self.running = [s for s in self.running if s.request_id != request_id]
        self.waiting = deque(g for g in self.waiting if g[0].request_id != request_id)

    def has_unfinished(self) -> bool:
        """Whether any request is waiting or running (Chapter 6)."""
        return bool(self.waiting) or any(not s.finished for s in self.running)
