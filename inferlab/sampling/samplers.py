"""Samplers: the part of a decoding rule that picks one token per row (Chapter 5).

A sampler is ``sampler(logits, generators) -> ids``: greedy argmax, or a multinomial draw from the
softmax with one seeded ``torch.Generator`` per row, so that each request's draws depend on its own
seed alone, whatever else shares the batch.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from inferlab.errors import BadRequest

if TYPE_CHECKING:
    import torch


def make_generator(seed: int, device: str = "cpu") -> torch.Generator:
    """A fresh ``torch.Generator`` seeded for one request: the same seed gives the same draws (Chapter 5)."""
    import torch

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise BadRequest(f"seed must be a whole number of at least 0, got {seed!r}")
    return torch.Generator(device=device).manual_seed(seed)


class Greedy:
    """Pick the highest logit of each row; ties go to the smallest id (Chapter 5)."""

    def __call__(self, logits: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> torch.Tensor:
        import torch

        return torch.argmax(logits, dim=-1)


class Multinomial:
    """Draw one token per row from the softmax of the logits, row ``i`` with ``generators[i]`` (Chapter 5).

    The draw is ``torch.multinomial(probs, 1)``. For one sample (and for any draw without
    replacement) PyTorch does not invert the cumulative distribution with one uniform number: it
    runs an exponential race, ``argmax(probs / q)`` with ``q ~ Exp(1)`` drawn for every vocabulary
    entry (``multinomial_out`` in ``aten/src/ATen/native/Distributions.cpp``). Each draw therefore
    consumes one random number per vocabulary entry from the row's generator, whatever the rule;
    Chapter 5 reproduces a draw from the same generator state.
    """

    def __call__(self, logits: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> torch.Tensor:
        import torch

        probs = torch.softmax(logits.float(), dim=-1)
        if probs.dim() == 1:
            generator = generators[0] if generators else None
            return torch.multinomial(probs, 1, generator=generator)[0]
        if generators is not None and len(generators) != probs.shape[0]:
            raise BadRequest(f"{probs.shape[0]} rows need {probs.shape[0]} generators, got {len(generators)}")
        rows = [torch.multinomial(probs[i:i + 1], 1, generator=generators[i] if generators else None)[0]
                for i in range(probs.shape[0])]
        return torch.cat(rows)
