"""A decoding rule: processors then a sampler, named as in transformers (Chapter 5)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from inferlab.errors import BadRequest
from inferlab.sampling.processors import (
    OUTPUT_ONLY,
    FrequencyPenalty,
    LogitsProcessor,
    MinP,
    PresencePenalty,
    RepetitionPenalty,
    Temperature,
    TopK,
    TopP,
    apply_processors,
)
from inferlab.sampling.samplers import Greedy, Multinomial

if TYPE_CHECKING:
    import torch


def generated_ids(input_ids: torch.Tensor, prompt_length: int | Sequence[int]) -> torch.Tensor:
    """The generated part of each row of ``input_ids`` (prompt, then generated ids), padded with -1 (Chapter 5)."""
    import torch

    ids = input_ids if input_ids.dim() == 2 else input_ids.unsqueeze(0)
    lengths = [prompt_length] * ids.shape[0] if isinstance(prompt_length, int) else list(prompt_length)
    if len(lengths) != ids.shape[0] or any(isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= ids.shape[1]
                                           for n in lengths):
        raise BadRequest(f"prompt_length must give, for each of the {ids.shape[0]} rows, a length between 0 and "
                         f"{ids.shape[1]}, got {prompt_length!r}")
    if len(set(lengths)) == 1:
        out = ids[:, lengths[0]:]
    else:
        width = ids.shape[1] - min(lengths)
        out = torch.full((ids.shape[0], width), -1, dtype=ids.dtype, device=ids.device)
        for row, n in enumerate(lengths):
            out[row, :ids.shape[1] - n] = ids[row, n:]
    return out if input_ids.dim() == 2 else out[0]


@dataclass(frozen=True)
class DecodingRule:
    """A complete rule with transformers' parameter names and order of application (Chapter 5).

    Greedy when ``do_sample`` is false (only the penalties then apply); otherwise the repetition
    penalty, the frequency and presence penalties, temperature, top-k, top-p and min-p, in that order,
    then a draw. Each part keeps the same tokens as transformers' processor, except top-p on exact
    ties (see :class:`TopP`). ``presence_penalty`` and ``frequency_penalty`` (OpenAI's and vLLM's
    names, in [-2, 2], 0 for none) are not transformers' and count the generated tokens only, so a
    rule with them needs ``prompt_length`` when it chooses a token; vLLM applies them after the
    repetition penalty and before temperature, as here.
    """

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    processors: tuple[LogitsProcessor, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts: list[LogitsProcessor] = []
        if self.repetition_penalty is not None and self.repetition_penalty != 1.0:
            parts.append(RepetitionPenalty(self.repetition_penalty))
        frequency = FrequencyPenalty(self.frequency_penalty)  # validated even at 0, where it is left out
        presence = PresencePenalty(self.presence_penalty)
        if self.frequency_penalty != 0:
            parts.append(frequency)
        if self.presence_penalty != 0:
            parts.append(presence)
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
        """Whether a processor of this rule reads the ids so far: the penalties do (Chapter 6)."""
        return any(isinstance(p, (RepetitionPenalty, *OUTPUT_ONLY)) for p in self.processors)

    @property
    def needs_prompt_length(self) -> bool:
        """Whether the rule must tell prompt ids from generated ones: the presence and frequency penalties (Chapter 5)."""
        return any(isinstance(p, OUTPUT_ONLY) for p in self.processors)

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
        for name in ("frequency_penalty", "presence_penalty"):
            if getattr(self, name) != 0:
                parts.append(f"{name}={getattr(self, name):g}")
        return ", ".join(parts) or "T=1"

    def _generate_kwargs(self) -> dict[str, Any]:
        """The transformers-named settings, without checking that transformers has them all (Chapter 5)."""
        kwargs: dict[str, Any] = {"do_sample": self.do_sample}
        if self.repetition_penalty is not None:
            kwargs["repetition_penalty"] = float(self.repetition_penalty)
        if self.do_sample:
            kwargs.update(temperature=float(self.temperature), top_k=self.top_k or 0,
                          top_p=1.0 if self.top_p is None else float(self.top_p))
            if self.min_p is not None:
                kwargs["min_p"] = float(self.min_p)
        return kwargs

    def hf_kwargs(self) -> dict[str, Any]:
        """The same rule as keyword arguments of transformers' ``generate`` (Chapter 5).

        Refused for a rule with a presence or frequency penalty: ``generate`` has neither.
        """
        if self.needs_prompt_length:
            raise BadRequest("transformers' generate has no presence or frequency penalty: this rule has no "
                             "equivalent generate arguments")
        return self._generate_kwargs()

    def settings(self) -> dict[str, Any]:
        """Every setting of the rule, for a result record: transformers' names, then the additive penalties (Chapter 5)."""
        extra = {name: float(getattr(self, name)) for name in ("presence_penalty", "frequency_penalty")
                 if getattr(self, name) != 0}
        return {**self._generate_kwargs(), **extra}

    def process(self, input_ids: torch.Tensor | None, logits: torch.Tensor,
                prompt_length: int | Sequence[int] | None = None) -> torch.Tensor:
        """The logits after every processor of the rule (Chapter 5).

        ``input_ids`` holds each row's prompt followed by its generated ids; ``prompt_length`` (one
        length, or one per row) says where the generated part starts, which the presence and
        frequency penalties need.
        """
        output_ids = None
        if self.needs_prompt_length:
            if input_ids is None or prompt_length is None:
                raise BadRequest("this rule's presence or frequency penalty counts generated tokens only: "
                                 "give the ids so far and prompt_length")
            output_ids = generated_ids(input_ids, prompt_length)
        return apply_processors(self.processors, input_ids, logits, output_ids)

    def next_tokens(self, input_ids: torch.Tensor | None, logits: torch.Tensor,
                    generators: Sequence[torch.Generator] | None = None,
                    prompt_length: int | Sequence[int] | None = None) -> torch.Tensor:
        """Process the last position's logits of each row and pick one token per row (Chapter 5)."""
        return self.sampler(self.process(input_ids, logits, prompt_length), generators)

    def distribution(self, input_ids: torch.Tensor | None, logits: torch.Tensor,
                     prompt_length: int | Sequence[int] | None = None) -> torch.Tensor:
        """The probabilities the sampler would draw from (one-hot for greedy) (Chapter 5)."""
        import torch

        processed = self.process(input_ids, logits, prompt_length)
        if not self.do_sample:
            return torch.nn.functional.one_hot(torch.argmax(processed, dim=-1), processed.shape[-1]).float()
        return torch.softmax(processed.float(), dim=-1)
