"""Logits processors: the parts of a decoding rule that rescale or mask scores (Chapter 5).

A processor is ``processor(input_ids, logits) -> logits``; removed tokens get ``-inf``.
``input_ids`` has shape ``(batch, length)`` and ``logits`` ``(batch, vocab)``; a single sequence
may also be passed as 1-D tensors. Processors never change the forward pass: every rule reuses the
same logits, which is why choosing a rule changes the text and not the cost.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from inferlab.errors import BadRequest

if TYPE_CHECKING:
    import torch

NEG_INF = float("-inf")
#: The smallest temperature accepted: below it, float32 logits divided by T overflow to infinities and
#: the softmax returns NaN (for the limit T -> 0, use greedy decoding).
MIN_TEMPERATURE = 1e-4


def _as_batch(input_ids: torch.Tensor | None, logits: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor, bool]:
    """Give 1-D inputs a batch dimension; report whether they had one (Chapter 5)."""
    single = logits.dim() == 1
    if single:
        logits = logits.unsqueeze(0)
        if input_ids is not None and input_ids.dim() == 1:
            input_ids = input_ids.unsqueeze(0)
    return input_ids, logits, single


def _check_keep(min_tokens_to_keep: object) -> None:
    """Refuse a ``min_tokens_to_keep`` that is not a whole number of at least 1 (Chapter 5)."""
    if isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
        raise BadRequest(f"min_tokens_to_keep must be a whole number of at least 1, got {min_tokens_to_keep!r}")


def _keep_at_least(logits: torch.Tensor, remove: torch.Tensor, count: int) -> torch.Tensor:
    """Unmark the ``count`` highest-scoring tokens of each row in ``remove`` (Chapter 5)."""
    import torch

    if count == 1:  # top-p and min-p never remove the most probable token: nothing to do
        return remove
    count = min(count, logits.shape[-1])
    top = torch.topk(logits, count, dim=-1).indices
    return remove.scatter(-1, top, False)


@runtime_checkable
class LogitsProcessor(Protocol):
    """Anything that maps ``(input_ids, logits)`` to new logits of the same shape (Chapter 5)."""

    def __call__(self, input_ids: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
        """Return processed logits; removed tokens are ``-inf``."""
        ...


@dataclass(frozen=True)
class Temperature:
    """Divide the logits by ``temperature`` (at least ``MIN_TEMPERATURE``): below 1 sharpens, above 1 flattens (Chapter 5)."""

    temperature: float

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0 or t == float("inf"):
            raise BadRequest(
                f"temperature must be a finite number greater than 0, got {t!r}; "
                "for the most probable token every time, use greedy decoding (do_sample=False)"
            )
        if t < MIN_TEMPERATURE:
            raise BadRequest(
                f"temperature {t!r} is below {MIN_TEMPERATURE:g}: float32 logits divided by it overflow and the "
                "probabilities become NaN; for the most probable token every time, "
                "use greedy decoding (do_sample=False)"
            )

    def __call__(self, input_ids: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
        return logits / float(self.temperature)


@dataclass(frozen=True)
class TopK:
    """Keep the ``k`` highest logits, and every token tied with the k-th; mask the rest (Chapter 5)."""

    k: int
    min_tokens_to_keep: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise BadRequest(f"top_k must be a whole number of at least 1, got {self.k!r}")
        _check_keep(self.min_tokens_to_keep)

    def __call__(self, input_ids: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
        import torch

        _, scores, single = _as_batch(None, logits)
        k = min(max(self.k, self.min_tokens_to_keep), scores.shape[-1])
        kth = torch.topk(scores, k, dim=-1).values[..., -1:]  # the k-th largest value of each row
        out = scores.masked_fill(scores < kth, NEG_INF)      # ties with the k-th value survive
        return out[0] if single else out


@dataclass(frozen=True)
class TopP:
    """Nucleus: keep the most probable tokens until their mass reaches ``p`` (Chapter 5).

    A token is kept when the probability of the tokens strictly more probable than it is below
    ``p``, so tokens tied in probability are kept or removed together; ``p = 1`` keeps all.
    This departs from transformers' ``TopPLogitsWarper`` on exact ties only: transformers ranks tied
    tokens by their position in a sort and may keep some of a tie and drop the rest (logits
    ``[2, 1, 1, 0]`` at ``p = 0.7``: transformers keeps ids 0 and 2, the lab ids 0, 1 and 2).
    """

    p: float
    min_tokens_to_keep: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.p, bool) or not isinstance(self.p, (int, float)) or not 0 < self.p <= 1:
            raise BadRequest(f"top_p must be in (0, 1], got {self.p!r}")
        _check_keep(self.min_tokens_to_keep)

    def __call__(self, input_ids: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
        import torch

        _, scores, single = _as_batch(None, logits)
        if self.p >= 1.0:
            return logits
        sorted_probs, order = torch.sort(torch.softmax(scores, dim=-1), dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the tokens ranked before each one
        # tokens tied in probability all get the mass above the first of them
        new_value = torch.ones_like(sorted_probs, dtype=torch.bool)
        new_value[..., 1:] = sorted_probs[..., 1:] != sorted_probs[..., :-1]
        positions = torch.arange(sorted_probs.shape[-1], device=scores.device).expand_as(sorted_probs)
        first_of_value = torch.where(new_value, positions, 0).cummax(dim=-1).values
        remove_sorted = before.gather(-1, first_of_value) >= self.p
        remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
        remove = _keep_at_least(scores, remove, self.min_tokens_to_keep)
        out = scores.masked_fill(remove, NEG_INF)
        return out[0] if single else out


@dataclass(frozen=True)
class MinP:
    """Keep tokens whose probability is at least ``p`` times the top token's (Chapter 5)."""

    p: float
    min_tokens_to_keep: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.p, bool) or not isinstance(self.p, (int, float)) or not 0 <= self.p <= 1:
            raise BadRequest(f"min_p must be in [0, 1], got {self.p!r}")
        _check_keep(self.min_tokens_to_keep)

    def __call__(self, input_ids: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
        import torch

        _, scores, single = _as_batch(None, logits)
        probs = torch.softmax(scores, dim=-1)
        threshold = self.p * probs.amax(dim=-1, keepdim=True)
        remove = _keep_at_least(scores, probs < threshold, self.min_tokens_to_keep)
        out = scores.masked_fill(remove, NEG_INF)
        return out[0] if single else out


@dataclass(frozen=True)
class RepetitionPenalty:
    """Make every token already in ``input_ids`` less likely: divide a positive logit by ``penalty``,
    multiply a negative one (Chapter 5). Counts each token once, the prompt included."""

    penalty: float

    def __post_init__(self) -> None:
        p = self.penalty
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not p > 0 or p == float("inf"):
            raise BadRequest(f"repetition_penalty must be a finite number greater than 0, got {p!r} "
                             "(1.0 is no penalty)")

    def __call__(self, input_ids: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
        import torch

        ids, scores, single = _as_batch(input_ids, logits)
        if ids is None:
            raise BadRequest("the repetition penalty needs the input ids of each row")
        seen = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, ids.long(), True)
        penalised = torch.where(scores < 0, scores * self.penalty, scores / self.penalty)
        out = torch.where(seen, penalised, scores)
        return out[0] if single else out


def apply_processors(processors: Sequence[LogitsProcessor], input_ids: torch.Tensor | None,
                     logits: torch.Tensor) -> torch.Tensor:
    """Run processors in order, each on the previous one's output (Chapter 5)."""
    for processor in processors:
        logits = processor(input_ids, logits)
    return logits
