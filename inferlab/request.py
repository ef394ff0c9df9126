"""The ``request_parse`` stage: check and normalise a generation request (Chapter 1)."""
from __future__ import annotations

from dataclasses import dataclass

from inferlab.errors import BadRequest

#: The most new tokens one request may ask for; larger values are almost always a typo.
MAX_NEW_TOKENS_LIMIT = 4096


@dataclass(frozen=True)
class Request:
    """A validated request: a non-empty prompt and a positive number of new tokens (Chapter 1)."""

    prompt: str
    max_new_tokens: int


def parse_request(prompt: object, max_new_tokens: object) -> Request:
    """Validate a prompt and a token budget, raising :class:`BadRequest` with a reason (Chapter 1)."""
    if not isinstance(prompt, str):
        raise BadRequest(f"the prompt must be text, got {type(prompt).__name__}")
    if not prompt.strip():
        raise BadRequest("the prompt is empty: give at least one non-space character")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise BadRequest(
            f"max_new_tokens must be a whole number, got {type(max_new_tokens).__name__}"
        )
    if max_new_tokens < 1:
        raise BadRequest(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    if max_new_tokens > MAX_NEW_TOKENS_LIMIT:
        raise BadRequest(
            f"max_new_tokens={max_new_tokens} is more than this lab allows ({MAX_NEW_TOKENS_LIMIT})"
        )
    return Request(prompt=prompt, max_new_tokens=max_new_tokens)


def check_context(prompt_tokens: int, max_new_tokens: int, context: int | None) -> None:
    """Refuse a request whose prompt plus new tokens cannot fit the model's context (Chapter 1)."""
    if context is None:
        return
    if prompt_tokens + max_new_tokens > context:
        raise BadRequest(
            f"the prompt has {prompt_tokens} tokens and asks for {max_new_tokens} more, "
            f"but the model's context holds {context} positions"
        )
