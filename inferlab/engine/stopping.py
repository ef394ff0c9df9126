"""Stop strings: find them in the new text only, and hold back text that could begin one (Chapter 6)."""
from __future__ import annotations

from collections.abc import Sequence


def find_stop(text: str, new_chars: int, stops: Sequence[str]) -> int | None:
    """Where the earliest stop string in ``text`` starts, or None, searching only where one can be new (Chapter 6).

    The last ``new_chars`` characters of ``text`` arrived with this token and the text before them
    held no stop string, so a new match must end inside them: only the tail is searched, and the
    cost of a step does not grow with the length of the answer.
    """
    if not stops or not new_chars:
        return None
    longest = max(len(s) for s in stops)
    start = max(0, len(text) - new_chars - longest + 1)
    hits = [found for s in stops if (found := text.find(s, start)) != -1]
    return min(hits) if hits else None


def held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of ``text`` could still begin a stop string (Chapter 6).

    A streaming engine must not send those characters yet: the next token might complete the stop
    string, and text that is part of a stop string is never shown.
    """
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:size]):
                longest = max(longest, size)
                break
    return longest
