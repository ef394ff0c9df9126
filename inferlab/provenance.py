"""Provenance: what produced a number, recorded by the program rather than by hand (Chapter 1).

Chapter 2 returns to this record when it treats parameters as artefacts.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from inferlab.cpuinfo import cpuinfo_entries, processor_facts, processor_name
from inferlab.errors import InferlabError

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks (Chapter 1)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_files(paths: list[Path]) -> str:
    """One SHA-256 over several files, in the order given: names and bytes (Chapter 1)."""
    if len(paths) == 1:
        return sha256_file(paths[0])
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        digest.update(bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()


def sha256_parameters(model: Any) -> str:
    """SHA-256 over a model's parameter tensors, by name, for weights that have no file (Chapter 1)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        raw = tensor.detach().to("cpu").contiguous().view(-1).view(torch.uint8)
        digest.update(raw.numpy().tobytes())
    return digest.hexdigest()


#: Settings that move only the character offsets an encoding reports, never its ids.
_OFFSET_ONLY = {"trim_offsets"}
#: Parts of the BPE model's JSON hashed on their own (the other model settings are hashed as they are).
_MODEL_HASHED_ELSEWHERE = {"vocab", "merges"}


def _pipeline_step(step: Any) -> Any:
    """A pipeline step's JSON, canonical: offset-only settings dropped, an empty Sequence or "" read as none."""
    if isinstance(step, dict):
        if step.get("type") == "Sequence" and not any(step.get(k) for k in ("normalizers", "pretokenizers",
                                                                            "processors", "decoders")):
            return None
        return {k: _pipeline_step(v) for k, v in sorted(step.items()) if k not in _OFFSET_ONLY}
    if isinstance(step, list):
        return [_pipeline_step(v) for v in step]
    return None if step == "" else step


def _adds_no_tokens(processor: Any) -> bool:
    """Whether a post-processor leaves the ids alone: ByteLevel (offsets only), or a template with no special token."""
    if not isinstance(processor, dict):
        return False
    if processor.get("type") == "ByteLevel":
        return True
    if processor.get("type") == "TemplateProcessing":
        return "SpecialToken" not in json.dumps([processor.get("single"), processor.get("pair")])
    return False


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A short hash of what decides a tokenizer's ids (Chapter 1; the pipeline added in Chapter 3).

    It covers the vocabulary, the merges and the special tokens, and, where the tokenizer has a
    ``tokenizers`` backend, that backend's normalizer, pre-tokenizer and post-processor and the BPE
    model's own settings (unknown token, byte fallback...), as the library serialises them. Chapter 3
    shows why: the same vocabulary and merges behind another pre-tokenizer give other ids. Settings
    that move only offsets (``trim_offsets``, a ``ByteLevel`` post-processor) are left out, and an
    empty ``Sequence``, ``""`` or a template that adds no token counts as none, so two tokenizers with
    the same fingerprint turn every text into the same ids whichever class or library release wraps
    them. The decoder is left out: it changes text, not ids.
    """
    vocab = sorted(tokenizer.get_vocab().items())
    specials = sorted(map(str, tokenizer.all_special_tokens))
    merges: list[str] = []
    pipeline: dict[str, Any] = {}
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        state = json.loads(backend.to_str())
        model = state.get("model") or {}
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        pipeline = {part: _pipeline_step(state.get(part)) for part in ("normalizer", "pre_tokenizer", "post_processor")}
        if _adds_no_tokens(pipeline["post_processor"]):
            pipeline["post_processor"] = None
        pipeline["model"] = _pipeline_step({k: v for k, v in model.items() if k not in _MODEL_HASHED_ELSEWHERE})
    payload = json.dumps([vocab, merges, specials, pipeline], ensure_ascii=False, sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()[:16]


def _cpuinfo() -> list[dict[str, str]]:
    """The processor entries of ``/proc/cpuinfo`` (:func:`inferlab.cpuinfo.cpuinfo_entries`)."""
    return cpuinfo_entries()


def _memory_bytes() -> int | None:
    """Memory this process may use: the smaller of ``MemTotal`` and a cgroup limit, where either is known."""
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        cgroup = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if cgroup.isdigit():
            limits.append(int(cgroup))
    except OSError:
        pass
    return min(limits) if limits else None


def machine_facts() -> dict[str, Any]:
    """The machine behind a number: processor identity, cores, matmul-relevant CPU features, memory (Chapter 1).

    A virtual machine may report only a family name ("AMD EPYC"); the CPU family, model and stepping
    numbers then identify the generation, and the feature flags and the kernel PyTorch dispatches to
    (``torch.backends.cpu.get_cpu_capability()``) say what the matrix products could use.
    """
    import torch

    entries = _cpuinfo()
    cores = {(e.get("physical id", "0"), e.get("core id", e.get("processor", ""))) for e in entries}
    processor = processor_facts(entries)
    facts: dict[str, Any] = {
        **{key: processor[key] for key in ("processor", "cpu_family", "cpu_model", "stepping", "logical_cpus")},
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "physical_cores": len(cores) if entries else None,
        "matmul_features": processor["matmul_features"],
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "memory_bytes": _memory_bytes(),
    }
    return facts


def _versions() -> dict[str, str]:
    import huggingface_hub
    import tokenizers
    import torch
    import transformers

    versions = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "huggingface_hub": huggingface_hub.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": processor_name(),
        "cpus": str(os.cpu_count()),
    }
    if torch.cuda.is_available():
        versions["gpu"] = torch.cuda.get_device_name(0)
        versions["cuda"] = str(torch.version.cuda)
    return versions


@dataclass(frozen=True)
class Provenance:
    """Where a model's weights came from and what ran them; refuses to exist half-filled (Chapter 1)."""

    model: str
    source: str
    revision: str | None
    sha256: str | None
    dtype: str
    parameters: int
    tokenizer: str
    device: str
    threads: int
    versions: dict[str, str] = field(default_factory=_versions)
    #: Processor identity, cores, matmul-relevant CPU features and memory (see :func:`machine_facts`).
    machine: dict[str, Any] = field(default_factory=machine_facts)
    created_utc: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [name for name in ("model", "source", "dtype", "tokenizer", "device") if not getattr(self, name)]
        if not (self.revision or self.sha256):
            missing.append("revision or sha256")
        if self.parameters <= 0:
            missing.append("parameters")
        if self.threads <= 0:
            missing.append("threads")
        if missing:
            raise InferlabError(f"provenance for {self.model or '?'} is missing: {', '.join(missing)}")

    def with_run(self, device: str, threads: int) -> "Provenance":
        """The same record with the device and thread count of a particular run (Chapter 1)."""
        return replace(self, device=device, threads=threads)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (Chapter 1)."""
        return asdict(self)

    def short(self) -> str:
        """One line naming the model, its identity, dtype, device, threads and versions (Chapter 1)."""
        ident = f"revision {self.revision[:12]}" if self.revision else f"sha256 {self.sha256[:12]}"  # type: ignore[index]
        return (
            f"{self.model} ({self.source}; {ident}), {self.parameters:,} parameters, {self.dtype}, "
            f"{self.device}, {self.threads} thread{'s' if self.threads != 1 else ''}, "
            f"torch {self.versions['torch']}, transformers {self.versions['transformers']}"
        )
