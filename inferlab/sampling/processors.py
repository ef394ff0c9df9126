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
#: The smallest temperature accepted (Chapter 5). It is a choice, not an overflow guard for real logits:
#: float32 logits divided by T overflow to inf only when |z| / T exceeds 3.4e38 (for a top logit of 22,
#: below T = 6.5e-38), and only then does the softmax return NaN (inf - inf). At T = 1e-4 a float32
#: softmax already gives probability exactly 0 to every token more than about 104 T = 0.0104 below the
#: top logit (exp(-104) is below half the smallest float32), so a smaller T is greedy decoding except
#: among near-ties, and the lab asks for greedy decoding instead. Above the floor, z / T stays finite in
#: float32 for every |z| below 3.4e34.
MIN_TEMPERATURE = 1e-4
#: How far below the top logit, in units of T, a float32 softmax gives a token probability exactly 0:
#: exp(x) rounds to 0 in float32 for x < ln(2**-150) = -103.97 (Chapter 5).
FLOAT32_ZERO_GAP = 103.97


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
                f"temperature {t!r} is below {MIN_TEMPERATURE:g}, where sampling is greedy decoding except among "
                f"near-ties (in float32, at T = {MIN_TEMPERATURE:g} every token more than "
                f"{FLOAT32_ZERO_GAP * MIN_TEMPERATURE:.4f} below the top logit already has probability 0, and at "
                f"T = {t:g} every token more than {FLOAT32_ZERO_GAP * t:.2g}); for the most probable token every time, "
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
    multiply a negative one (Chapter 5). Counts each token once, the prompt included, as
    transformers' ``RepetitionPenaltyLogitsProcessor`` does.

    Unlike the softmax, it is not invariant to adding a constant to every logit: a seen token whose
    logit is exactly 0 is not penalised at all, and the larger its distance from 0, the larger the cut.
    """

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


#: The range OpenAI's API and vLLM accept for the presence and frequency penalties (Chapter 5).
ADDITIVE_PENALTY_RANGE = (-2.0, 2.0)


def _check_additive(value: object, name: str) -> None:
    """Refuse a presence or frequency penalty that is not a finite number in [-2, 2] (Chapter 5)."""
    low, high = ADDITIVE_PENALTY_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise BadRequest(f"{name} must be a number in [{low:g}, {high:g}], got {value!r} (0 is no penalty)")


def token_counts(output_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """How often each id occurs in each row of ``output_ids``, as float ``(batch, vocab)``; negative ids are padding (Chapter 5)."""
    import torch

    ids = output_ids.long()
    counts = torch.zeros(ids.shape[0], vocab_size, dtype=torch.float32, device=ids.device)
    if ids.numel():
        counts.scatter_add_(-1, ids.clamp(min=0), (ids >= 0).to(torch.float32))
    return counts


@dataclass(frozen=True)
class FrequencyPenalty:
    """Subtract ``penalty`` times the number of times a token was *generated* from its logit (Chapter 5).

    OpenAI's documented formula, ``mu[j] -= c[j] * alpha_frequency``, where ``c[j]`` counts the
    samples of token ``j`` before the current position; vLLM (``apply_penalties`` in
    ``vllm/model_executor/layers/utils.py``) counts output tokens only. The ids given to this
    processor are therefore the generated ids alone, not the prompt: :meth:`DecodingRule.next_tokens`
    slices them off with ``prompt_length``. Additive, so unlike :class:`RepetitionPenalty` it does not
    depend on where zero sits in the logits.
    """

    penalty: float

    def __post_init__(self) -> None:
        _check_additive(self.penalty, "frequency_penalty")

    def __call__(self, output_ids: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
        ids, scores, single = _as_batch(output_ids, logits)
        if ids is None:
            raise BadRequest("the frequency penalty needs the generated ids of each row")
        out = scores - self.penalty * token_counts(ids, scores.shape[-1]).to(scores.dtype)
        return out[0] if single else out


@dataclass(frozen=True)
class PresencePenalty:
    """Subtract ``penalty`` once from the logit of every token *generated* at least once (Chapter 5).

    OpenAI's documented ``mu[j] -= float(c[j] > 0) * alpha_presence``; like :class:`FrequencyPenalty`
    it is given the generated ids alone.
    """

    penalty: float

    def __post_init__(self) -> None:
        _check_additive(self.penalty, "presence_penalty")

    def __call__(self, output_ids: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
        ids, scores, single = _as_batch(output_ids, logits)
        if ids is None:
            raise BadRequest("the presence penalty needs the generated ids of each row")
        present = (token_counts(ids, scores.shape[-1]) > 0).to(scores.dtype)
        out = scores - self.penalty * present
        return out[0] if single else out


#: Processors that read the generated ids only, never the prompt (Chapter 5).
OUTPUT_ONLY = (FrequencyPenalty, PresencePenalty)


def apply_processors(processors: Sequence[LogitsProcessor], input_ids: torch.Tensor | None,
                     logits: torch.Tensor, output_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Run processors in order, each on the previous one's output (Chapter 5).

    Every processor reads ``input_ids`` (prompt and generated ids), except the presence and
    frequency penalties, which read ``output_ids`` (the generated ids alone, padded with -1).
    """
    for processor in processors:
        if isinstance(processor, OUTPUT_ONLY):
            if output_ids is None:
                raise BadRequest("the presence and frequency penalties count generated tokens only: "
                                 "give the generated ids (or the prompt length) as well as the ids so far")
            logits = processor(output_ids, logits)
        else:
            logits = processor(input_ids, logits)
    return logits
