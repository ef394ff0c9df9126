"""The processor, read from ``/proc/cpuinfo`` with the standard library only (Chapter 1).

:mod:`inferlab.provenance` records these facts beside every number; ``scripts/processor.py`` loads
this file by path (before any environment exists) so that CI can name the processor first. Machines
of one kind can come with different processors (an AMD EPYC or an Intel Xeon), and the matrix
kernels a library picks, and so its timings and the last bits of its floating-point results,
depend on which.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

#: CPU features that decide which matrix-multiplication kernels a library can use (x86 and Arm names).
MATMUL_FEATURES = ("avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                   "amx_tile", "amx_bf16", "amx_int8", "asimd", "asimdhp", "sve", "sve2", "bf16", "i8mm")


def cpuinfo_entries() -> list[dict[str, str]]:
    """The processor entries of ``/proc/cpuinfo``, one dictionary per logical CPU; empty where there is none (Chapter 1)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    entries = []
    for block in text.strip().split("\n\n"):
        entry = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            entry[key.strip()] = value.strip()
        entries.append(entry)
    return entries


def processor_name(entries: list[dict[str, str]] | None = None) -> str:
    """The processor's model name ("AMD EPYC", "Intel(R) Xeon(R) Processor"), or the platform's word for it (Chapter 1)."""
    for entry in cpuinfo_entries() if entries is None else entries:
        if entry.get("model name"):
            return entry["model name"]
    return platform.processor() or platform.machine()


def processor_facts(entries: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """Name, family, model and stepping numbers, logical CPUs and the matmul-relevant features (Chapter 1).

    A virtual machine may report only a family name; the family and model numbers then identify
    the generation (AMD family 25 is Zen 3 or 4; Intel family 6 model 207 is Emerald Rapids).
    """
    entries = cpuinfo_entries() if entries is None else entries
    first = entries[0] if entries else {}
    flags = set((first.get("flags") or first.get("Features") or "").split())
    return {"processor": processor_name(entries), "cpu_family": first.get("cpu family"), "cpu_model": first.get("model"),
            "stepping": first.get("stepping"), "logical_cpus": os.cpu_count(),
            "matmul_features": [f for f in MATMUL_FEATURES if f in flags]}


def processor_words(facts: dict[str, Any] | None) -> str:
    """A processor by name, family and model: "AMD EPYC (family 25, model 17)", from these facts or a record's (Chapter 1).

    ``facts`` is :func:`processor_facts`'s dictionary or a provenance record's ``machine``; None gives
    "an unrecorded machine".
    """
    if not facts:
        return "an unrecorded machine"
    numbers = ", ".join(f"{word} {facts[key]}" for word, key in (("family", "cpu_family"), ("model", "cpu_model"))
                        if facts.get(key) is not None)
    return f"{facts.get('processor')}" + (f" ({numbers})" if numbers else "")


def describe(facts: dict[str, Any] | None = None) -> str:
    """One line for a log: "Intel(R) Xeon(R) Processor (family 6, model 207), 2 CPUs; matmul features: ..." (Chapter 1)."""
    facts = processor_facts() if facts is None else facts
    return (f"{processor_words(facts)}, {facts['logical_cpus']} CPUs; "
            f"matmul features: {' '.join(facts['matmul_features']) or 'none listed'}")
