"""Backends for the Engine: the toy, transformers, and the lab's native forward pass (Chapter 6).

Each backend adapts one model to :class:`inferlab.engine.Backend`. They differ only in how they
compute the next token's logits; the engine around them is the same, which is what makes their
timings and tokens comparable.
"""
from __future__ import annotations

from typing import Any

from inferlab.models.registry import LoadedModel
from inferlab.toy import ToyGenerator


class ToyBackend:
    """The Chapter 1 toy behind the engine: its table row for the last token as logits (Chapter 6)."""

    device = "cpu"
    eos_token_ids: frozenset[int] = frozenset()
    context = None
    simulated_stages = ["forward_pass", "sampling_distribution", "kv_cache"]

    def __init__(self, seed: int = 7):
        self.toy = ToyGenerator(seed=seed)
        self.name = f"toy (seed {seed})"

    def tokenize(self, text: str) -> list[str]:
        """One symbol per character (Chapter 6)."""
        return list(text)

    def encode(self, pieces: list[str]) -> list[int]:
        """Ids of the toy vocabulary; unknown characters are refused (Chapter 6)."""
        return self.toy.encode("".join(pieces))

    def next_token_logits(self, ids: list[int]) -> Any:
        """The toy's score row for the last id (Chapter 6)."""
        import torch

        return torch.tensor(self.toy.table[ids[-1]], dtype=torch.float64)

    def decode(self, ids: list[int]) -> str:
        """Characters of the ids (Chapter 6)."""
        return "".join(self.toy.vocabulary[i] for i in ids)

    def describe(self) -> dict[str, Any]:
        """The toy's identity: seed and vocabulary size (Chapter 6)."""
        return {"backend": "toy", "seed": self.toy.seed, "vocabulary_size": len(self.toy.vocabulary)}


def end_of_sequence_ids(loaded: LoadedModel) -> frozenset[int]:
    """Every id that ends generation: the tokenizer's and the generation config's (Chapter 6).

    SmolLM2-Instruct, for one, ends replies with ``<|im_end|>`` but also has ``<|endoftext|>``.
    """
    ids = {loaded.tokenizer.eos_token_id}
    config = getattr(loaded.model, "generation_config", None)
    configured = getattr(config, "eos_token_id", None)
    ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
    return frozenset(i for i in ids if i is not None)


class _HFTokenizerMixin:
    """Tokenizer side shared by the backends that run a Hugging Face model (Chapter 6)."""

    loaded: LoadedModel

    def tokenize(self, text: str) -> list[str]:
        """The tokenizer's symbols, no special tokens added (Chapter 6)."""
        return self.loaded.tokenizer.tokenize(text)

    def encode(self, pieces: list[str]) -> list[int]:
        """Ids of the symbols (Chapter 6)."""
        return list(self.loaded.tokenizer.convert_tokens_to_ids(pieces))

    def decode(self, ids: list[int]) -> str:
        """Text of the ids (Chapter 6)."""
        return self.loaded.tokenizer.decode(ids)

    def _setup(self, loaded: LoadedModel) -> None:
        self.loaded = loaded
        self.device = loaded.device
        self.eos_token_ids = end_of_sequence_ids(loaded)
        self.context = loaded.context
        self.simulated_stages: list[str] = []


class TransformersBackend(_HFTokenizerMixin):
    """transformers' own forward pass, the whole sequence every step, no cache (Chapter 6)."""

    def __init__(self, loaded: LoadedModel):
        self._setup(loaded)
        self.name = f"transformers ({loaded.name})"

    def next_token_logits(self, ids: list[int]) -> Any:
        """Last-position logits of ``model(ids)`` (Chapter 6)."""
        import torch

        with torch.inference_mode():
            batch = torch.tensor([ids], device=self.device)
            return self.loaded.model(input_ids=batch, use_cache=False).logits[0, -1]

    def describe(self) -> dict[str, Any]:
        """Provenance of the weights, and the implementation (Chapter 6)."""
        return {"backend": "transformers", **self.loaded.provenance.to_dict()}


class NativeBackend(_HFTokenizerMixin):
    """The lab's own forward pass from Chapter 4, on the same weights (Chapter 6).

    With ``last_only`` (the default) the LM head projects only the last position, which is all
    generation needs; ``last_only=False`` projects every position, as the transformers call does,
    so the two settings isolate the cost of that one shortcut.
    """

    def __init__(self, loaded: LoadedModel, last_only: bool = True):
        from inferlab.models import NativeCausalLM

        self._setup(loaded)
        self.native = NativeCausalLM.from_hf(loaded.model)
        self.last_only = last_only
        self.name = f"native ({loaded.name}{'' if last_only else ', full LM head'})"

    def next_token_logits(self, ids: list[int]) -> Any:
        """Last-position logits of the native model (Chapter 6)."""
        import torch

        with torch.inference_mode():
            batch = torch.tensor([ids], device=self.device)
            if self.last_only:
                return self.native.last_logits(batch)[0]
            return self.native(batch)[0, -1]

    def describe(self) -> dict[str, Any]:
        """Provenance of the weights, and the implementation (Chapter 6)."""
        return {"backend": "native (inferlab.models)", "last_only": self.last_only,
                **self.loaded.provenance.to_dict()}
