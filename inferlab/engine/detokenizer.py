"""Incremental detokenization: text for each new token without decoding the whole answer again (Chapter 6).

Decoding every generated id at every step costs time that grows with the answer (quadratic in its
length over a whole generation). Instead, as ``detokenize_incrementally`` in vLLM's
``detokenizer_utils.py`` does (a scheme it took from Hugging Face's text-generation-inference), keep
two offsets into the ids:
``prefix_offset`` where a short window of already-released text starts, and ``read_offset`` where
the unreleased ids start. Each step decodes only that window twice, with and without the new ids,
and releases the difference. A window that ends inside a multi-byte character decodes to the
replacement character U+FFFD: the whole characters before it are released, and the incomplete
bytes wait for the ones that complete them. (vLLM holds back the whole window in that case; this
releases a finished character one token earlier.)

For valid UTF-8 the released pieces add up to exactly the full decode. Bytes that never form a
character still come out as U+FFFD, but how many replacement characters a run of invalid bytes
becomes can depend on where the window starts, so such text may differ from a full decode in the
number of U+FFFD characters only (vLLM's detokenizer behaves the same way).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

#: How many prompt ids give the first generated token its left context (vLLM's
#: ``INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET`` is the same 5).
CONTEXT_IDS = 5
REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Releases the text of a growing list of ids, a piece per token, decoding a short window (Chapter 6)."""

    def __init__(self, decode: Callable[[list[int]], str], prompt_ids: Sequence[int] = ()):
        self.decode = decode
        # The last few prompt ids decode with the first new ids, so that a tokenizer whose text for a
        # token depends on its left neighbour (a leading space, a byte pair) still decodes correctly.
        self.ids: list[int] = list(prompt_ids[-CONTEXT_IDS:])
        self.prefix_offset = 0
        self.read_offset = len(self.ids)
        self.released = 0  # characters of the current window, after its prefix, already released
        self.text = ""

    def push(self, token_id: int) -> str:
        """Add one id; return the whole characters it completes ('' if none) (Chapter 6).

        When the window ends inside a character, the characters before it are released and the
        offsets stay where they are, so that the incomplete bytes are decoded again with the next id.
        """
        self.ids.append(token_id)
        prefix = self.decode(self.ids[self.prefix_offset:self.read_offset])
        window = self.decode(self.ids[self.prefix_offset:])
        incomplete = window.endswith(REPLACEMENT)
        complete = window.rstrip(REPLACEMENT) if incomplete else window
        delta = complete[len(prefix) + self.released:]
        if incomplete:
            self.released += len(delta)
        elif len(window) > len(prefix):
            self.prefix_offset, self.read_offset, self.released = self.read_offset, len(self.ids), 0
        self.text += delta
        return delta

    def flush(self) -> str:
        """Release whatever is held back, even an incomplete character, when generation ends (Chapter 6)."""
        prefix = self.decode(self.ids[self.prefix_offset:self.read_offset])
        delta = self.decode(self.ids[self.prefix_offset:])[len(prefix) + self.released:]
        self.prefix_offset = self.read_offset = len(self.ids)
        self.released = 0
        self.text += delta
        return delta


class FullDecodeDetokenizer:
    """The plain path that :class:`IncrementalDetokenizer` replaces: decode every id again at each step (Chapter 6).

    It has the same interface and releases the same text for valid UTF-8 (whole characters only,
    incomplete bytes held back until they complete), but each ``push`` decodes the whole answer, so
    its cost grows with the answer's length. The engine takes it as ``Engine(..., detokenizer=...)``
    so that the two can be timed against each other in the same loop.
    """

    def __init__(self, decode: Callable[[list[int]], str], prompt_ids: Sequence[int] = ()):
        self.decode = decode
        # The same left context as the incremental detokenizer, so that both decode the same text.
        self.ids: list[int] = list(prompt_ids[-CONTEXT_IDS:])
        self.start = len(decode(self.ids))
        self.text = ""

    def push(self, token_id: int) -> str:
        """Add one id, decode every id so far, and return the whole characters not yet released (Chapter 6)."""
        self.ids.append(token_id)
        delta = self.decode(self.ids)[self.start:].rstrip(REPLACEMENT)[len(self.text):]
        self.text += delta
        return delta

    def flush(self) -> str:
        """Release whatever is held back, even an incomplete character, when generation ends (Chapter 6)."""
        delta = self.decode(self.ids)[self.start:][len(self.text):]
        self.text += delta
        return delta
