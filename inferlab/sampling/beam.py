"""Beam search over any source of last-position logits (Chapter 5).

Beam search is the one rule here that changes the cost: every step scores several sequences. It
owns no model call of its own: a :class:`LogitsSource` (the engine's model runner, or a small
adapter in a test) runs the forward pass, and this module only chooses which rows to extend.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from inferlab.errors import BadRequest
from inferlab.request import check_prompt_ids

if TYPE_CHECKING:
    import torch

#: A scored sequence: the sum of its log-probabilities (running) or its length-normalised score
#: (finished), and its ids, prompt included.
_Hypothesis = tuple[float, list[int]]


class LogitsSource(Protocol):
    """What beam search needs from a model: last-position logits of equal-length rows (Chapter 5)."""

    vocab_size: int
    max_positions: int | None

    def logits(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Float32 logits ``[len(rows), vocab]`` of the last position of each row."""
        ...


@dataclass
class BeamResult:
    """What :func:`beam_search` returns: best sequence first, with scores and the work done (Chapter 5)."""

    sequences: list[list[int]]
    scores: list[float]
    steps: int
    rows_forwarded: int


def _check_whole(name: str, value: object) -> None:
    """Refuse a setting that is not a whole number of at least 1 (Chapter 5)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"{name} must be a whole number of at least 1, got {value!r}")


def _eos_set(eos_token_id: int | Sequence[int] | None) -> set[int]:
    """One end-of-sequence id, several, or none, as a set (Chapter 5)."""
    if eos_token_id is None:
        return set()
    return {eos_token_id} if isinstance(eos_token_id, int) else {int(t) for t in eos_token_id}


def beam_search(source: LogitsSource, prompt_ids: Sequence[int], num_beams: int, max_new_tokens: int,
                eos_token_id: int | Sequence[int] | None = None, length_penalty: float = 1.0,
                early_stopping: bool | str = False) -> BeamResult:
    """Beam search with the rules of transformers' ``generate(num_beams=..., do_sample=False)`` (Chapter 5).

    At every step each running beam is extended by every token; of the ``2 * num_beams`` best
    extensions (by summed log-probability), those among the first ``num_beams`` that end in
    end-of-sequence, or reach the length limit, become finished hypotheses scored by
    ``sum_logprobs / generated_length ** length_penalty``; the best ``num_beams`` unfinished ones keep
    running. ``early_stopping`` (transformers' ``_check_early_stop_heuristic`` and
    ``_beam_search_has_unfinished_sequences`` in ``transformers/generation/utils.py``): ``True``
    stops once ``num_beams`` hypotheses are finished; ``False`` stops when the best running beam,
    scored at its *current* length, cannot beat the worst finished one, which is a heuristic: with
    ``length_penalty > 0`` a longer continuation is divided by a larger length and can still score
    higher; ``"never"`` scores the best running beam at the maximum length instead when
    ``length_penalty > 0``, an upper bound on what it can reach, so it stops only when no better
    hypothesis is possible. Every step asks ``source`` for the logits of all running beams, which is
    the cost this rule adds.
    """
    import torch

    _check_whole("num_beams", num_beams)
    _check_whole("max_new_tokens", max_new_tokens)
    if early_stopping not in (True, False, "never"):
        raise BadRequest(f"early_stopping must be True, False or 'never', got {early_stopping!r}")
    prompt = check_prompt_ids(prompt_ids, max_new_tokens, source.vocab_size, source.max_positions)
    eos = _eos_set(eos_token_id)
    keep = max(2, 1 + len(eos)) * num_beams
    running: list[_Hypothesis] = [(0.0, prompt)]
    finished: list[_Hypothesis] = []
    can_improve = True
    rows_forwarded = 0
    step = 0
    for step in range(max_new_tokens):
        logits = source.logits([seq for _, seq in running])
        rows_forwarded += len(running)
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        totals = log_probs + torch.tensor([s for s, _ in running], device=log_probs.device)[:, None]
        vocab = totals.shape[-1]
        values, flat = torch.topk(totals.reshape(-1), min(keep, totals.numel()))
        last_step = step == max_new_tokens - 1
        generated = step + 1
        full = len(finished) == num_beams
        next_running: list[_Hypothesis] = []
        for rank, (value, index) in enumerate(zip(values.tolist(), flat.tolist(), strict=True)):
            beam, token = divmod(index, vocab)
            sequence = running[beam][1] + [token]
            if token in eos or last_step:
                if rank < num_beams and can_improve and not (full and early_stopping is True):
                    finished.append((value / generated ** length_penalty, sequence))
            elif len(next_running) < num_beams:
                next_running.append((value, sequence))
        finished = sorted(finished, key=lambda item: -item[0])[:num_beams]
        running = next_running
        if last_step or not running:
            break
        if len(finished) == num_beams:
            if early_stopping is True:
                break
            length = max_new_tokens if (early_stopping == "never" and length_penalty > 0) else generated
            best_possible = running[0][0] / length ** length_penalty
            can_improve = can_improve and best_possible > finished[-1][0]
            if not can_improve:
                break
    return BeamResult(sequences=[seq[len(prompt):] for _, seq in finished],
                      scores=[score for score, _ in finished], steps=step + 1, rows_forwarded=rows_forwarded)
