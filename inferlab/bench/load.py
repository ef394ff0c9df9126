"""Other processes' load: how busy the rest of the machine kept its CPUs while a block ran (Chapter 7).

A timing says nothing about the machine it was taken on unless it also says how busy that machine
was. Linux counts, in the first line of ``/proc/stat``, the clock ticks every CPU has spent in each
state since boot; the ticks spent busy (user, nice, system, irq, softirq and steal, the time a
hypervisor gave to other guests) between two reads, less this process's own CPU time and that of
its finished children (``os.times``), are what the others used. Divided by the wall time, that is
the number of CPUs they kept busy on average: :func:`others_load`.

The count is coarse (ticks of 1/``SC_CLK_TCK`` seconds, usually 10 ms) and sees only this VM and
the steal time its hypervisor reports; it cannot see a neighbour that shares a core's caches or
memory bandwidth without taking its time. Chapters 7 and 11 judge their timing claims only where
it stayed below :data:`OTHERS_MAX`.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: CPUs that other processes (and steal time) may keep busy on average for the machine to count as
#: free of them (Chapter 7): a fifth of one CPU.
OTHERS_MAX = 0.2


def machine_busy_seconds(stat: Path = Path("/proc/stat")) -> float | None:
    """CPU seconds the whole machine has spent busy since boot (Linux ``/proc/stat``); ``None`` elsewhere (Chapter 7).

    Busy is user, nice, system, irq, softirq and steal; idle and iowait are not counted.
    """
    try:
        fields = stat.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """This process's CPU seconds, its finished children's included (Chapter 7)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@contextlib.contextmanager
def others_load(result: dict[str, Any],
                busy: Callable[[], float | None] = machine_busy_seconds) -> Iterator[dict[str, Any]]:
    """Put in ``result["cpus"]`` the CPUs other processes kept busy, on average, while the block ran (Chapter 7).

    ``None`` where the machine's busy time cannot be read (not Linux). ``busy`` is the machine's
    busy-seconds counter, replaceable for tests.
    """
    busy0, own0, start = busy(), own_cpu_seconds(), time.perf_counter()
    try:
        yield result
    finally:
        busy1, own1, wall = busy(), own_cpu_seconds(), time.perf_counter() - start
        if busy0 is None or busy1 is None or wall <= 0:
            result["cpus"] = None
        else:
            result["cpus"] = max(0.0, (busy1 - busy0 - (own1 - own0)) / wall)
