"""The one check of a prompt's token ids, made once when a request is admitted (Chapter 1).

The engine's admission (Chapter 6) and beam search (Chapter 5) both call it; the forward pass checks
nothing about its ids, because reading the smallest and largest id back from the device at every call
would stall a GPU at every step (Chapter 4).
"""
from __future__ import annotations

from collections.abc import Sequence

from inferlab.errors import BadRequest


def check_prompt_ids(ids: Sequence[int], max_new_tokens: int, vocab_size: int, context: int | None) -> list[int]:
    """Refuse a prompt no model can continue: no ids, ids outside the vocabulary, no room in the context (Chapter 1)."""
    if not isinstance(ids, Sequence) or isinstance(ids, str) or not ids:
        raise BadRequest("the prompt has no token ids: give at least one")
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise BadRequest("prompt token ids must be whole numbers")
    low, high = min(ids), max(ids)
    if low < 0 or high >= vocab_size:
        raise BadRequest(f"token ids must lie in [0, {vocab_size}), got {low}..{high}")
    if context is not None and len(ids) + max_new_tokens > context:
        raise BadRequest(f"the prompt has {len(ids)} tokens and asks for {max_new_tokens} more, "
                         f"but the model's context holds {context} positions")
    return list(ids)
