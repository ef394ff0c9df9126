"""A decoding rule: processors then a sampler, named as in transformers (Chapter 5)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from inferlab.sampling.processors import (
    LogitsProcessor,
    MinP,
    RepetitionPenalty,
    Temperature,
    TopK,
    TopP,
    apply_processors,
)
from inferlab.sampling.samplers import Greedy, Multinomial

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DecodingRule:
    """A complete rule with transformers' parameter names and order of application (Chapter 5).

    Greedy when ``do_sample`` is false (only the repetition penalty then applies); otherwise the
    repetition penalty, temperature, top-k, top-p and min-p, in that order, then a draw. Each part
    keeps the same tokens as transformers' processor, except top-p on exact ties (see :class:`TopP`).
    """

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    processors: tuple[LogitsProcessor, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts: list[LogitsProcessor] = []
        if self.repetition_penalty is not None and self.repetition_penalty != 1.0:
            parts.append(RepetitionPenalty(self.repetition_penalty))
        warpers: list[LogitsProcessor] = []
        temperature = Temperature(self.temperature)  # validated even when greedy: a bad value is an error
        if self.temperature != 1.0:
            warpers.append(temperature)
        if self.top_k is not None:
            warpers.append(TopK(self.top_k))
        if self.top_p is not None:
            top_p = TopP(self.top_p)  # validated even at 1, where it keeps every token and is left out
            if self.top_p < 1.0:
                warpers.append(top_p)
        if self.min_p is not None:
            warpers.append(MinP(self.min_p))
        if self.do_sample:
            parts += warpers
        object.__setattr__(self, "processors", tuple(parts))

    @property
    def needs_history(self) -> bool:
        """Whether a processor of this rule reads the ids so far; of the lab's, only the repetition penalty does (Chapter 6)."""
        return any(isinstance(p, RepetitionPenalty) for p in self.processors)

    @property
    def sampler(self) -> Greedy | Multinomial:
        """The sampler this rule ends with (Chapter 5)."""
        return Multinomial() if self.do_sample else Greedy()

    def label(self) -> str:
        """A short name such as ``'T=0.7, top_p=0.9'`` or ``'greedy'`` (Chapter 5)."""
        parts = [] if self.do_sample else ["greedy"]
        if self.do_sample and self.temperature != 1.0:
            parts.append(f"T={self.temperature:g}")
        for name in ("top_k", "top_p", "min_p", "repetition_penalty"):
            value = getattr(self, name)
            if value is not None and (self.do_sample or name == "repetition_penalty"):
                parts.append(f"{name}={value:g}")
        return ", ".join(parts) or "T=1"

    def hf_kwargs(self) -> dict[str, Any]:
        """The same rule as keyword arguments of transformers' ``generate`` (Chapter 5)."""
        kwargs: dict[str, Any] = {"do_sample": self.do_sample}
        if self.repetition_penalty is not None:
            kwargs["repetition_penalty"] = float(self.repetition_penalty)
        if self.do_sample:
            kwargs.update(temperature=float(self.temperature), top_k=self.top_k or 0,
                          top_p=1.0 if self.top_p is None else float(self.top_p))
            if self.min_p is not None:
                kwargs["min_p"] = float(self.min_p)
        return kwargs

    def next_tokens(self, input_ids: torch.Tensor, logits: torch.Tensor,
                    generators: Sequence[torch.Generator] | None = None) -> torch.Tensor:
        """Process the last position's logits of each row and pick one token per row (Chapter 5)."""
        return self.sampler(apply_processors(self.processors, input_ids, logits), generators)

    def distribution(self, input_ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """The probabilities the sampler would draw from (one-hot for greedy) (Chapter 5)."""
        import torch

        processed = apply_processors(self.processors, input_ids, logits)
        if not self.do_sample:
            return torch.nn.functional.one_hot(torch.argmax(processed, dim=-1), processed.shape[-1]).float()
        return torch.softmax(processed.float(), dim=-1)
