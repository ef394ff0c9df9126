"""Checkers for the exercises of Chapter 3 (tokens); each prints a verdict and returns it."""
from __future__ import annotations

import codecs
from typing import Any, Callable, Iterable, Iterator

from inferlab.text.bpe import BPETokenizer, gpt2_bpe, train_bpe

#: "ラーメン" matters: GPT-2 has a token that is "ー" plus the first two bytes of the next character.
STREAM_TEXT = "Tokens arrive one by one: 日本語, ラーメンのお店, café, 🙂👍🏽 and 🇫🇷."


def _complete_text(data: bytes) -> str:
    """The longest prefix of ``data`` that is whole UTF-8 characters."""
    return codecs.getincrementaldecoder("utf-8")().decode(data, final=False)


def streams_cleanly(decode_stream: Callable[[BPETokenizer, Iterable[int]], Iterable[str]]) -> bool:
    """Chapter 3, exercise 4: does a streaming decoder yield each character as soon as its last byte arrives?

    The ids are fed one at a time, as an engine produces them; after each id the text made of whole
    characters so far must already have been yielded, with no ``\ufffd`` and nothing held back.
    """
    tokenizer = gpt2_bpe()
    ids = tokenizer.encode(STREAM_TEXT)
    ready = [_complete_text(tokenizer.decode_bytes(ids[:k])) for k in range(len(ids) + 1)]
    consumed = 0

    def feed() -> Iterator[int]:
        nonlocal consumed
        for token_id in ids:
            consumed += 1
            yield token_id

    shown, problems = "", []
    stream = iter(decode_stream(tokenizer, feed()))
    while True:
        before = consumed
        try:
            chunk = next(stream)
        except StopIteration:
            break
        late = next((j for j in range(before + 1, consumed) if ready[j] != shown), None)
        if late is not None:
            problems.append(f"read token {late + 1} before yielding the characters that token {late} completed")
        shown += chunk
        if shown != ready[consumed]:
            problems.append(f"after token {consumed} the stream showed {shown[-12:]!r}, "
                            f"but the whole characters so far end {ready[consumed][-12:]!r}")
        if problems:
            break
    late = next((j for j in range(before + 1, consumed + 1) if ready[j] != shown), None) if not problems else None
    if late is not None:
        problems.append(f"the characters that token {late} completed were never yielded")
    if not problems and (consumed < len(ids) or shown != STREAM_TEXT):
        problems.append(f"the stream ended after {consumed} of {len(ids)} tokens with {shown[-12:]!r}")
    print(f"{len(ids)} tokens; " + ("clean: each character appeared as soon as its last byte arrived"
                                     if not problems else "broken: " + problems[0]))
    return not problems


def same_chat_ids(ids: list[int], tokenizer: Any, messages: list[dict[str, str]]) -> bool:
    """Chapter 3, exercise 3: do hand-built ids equal the chat template's ids for these messages?"""
    from inferlab.text.chat import chat_ids

    expected = chat_ids(tokenizer, messages)
    same = list(ids) == expected
    first = next((i for i, (a, b) in enumerate(zip(ids, expected)) if a != b), min(len(ids), len(expected)))
    print("same ids as the chat template" if same else
          f"differs at position {first}: yours {list(ids)[first:first + 4]}, template {expected[first:first + 4]}")
    return same


def merges_learned(text: str, vocab_size: int, expected: list[tuple[str, str]]) -> bool:
    """Chapter 3, exercise 1: are these the merges (in order) that BPE learns from text?"""
    got = train_bpe(text, vocab_size).merges_as_text()
    ok = got == [tuple(m) for m in expected]
    if ok:
        print("right merges, in the right order")
    else:  # say where, not what: the answer stays the reader's to find
        mine = [tuple(m) for m in expected]
        first = next((i for i, (a, b) in enumerate(zip(got, mine)) if a != b), min(len(got), len(mine)))
        print(f"not quite: merge {first} (counting from 0) differs" if first < min(len(got), len(mine))
              else f"not quite: BPE learns {len(got)} merges here, you gave {len(mine)}")
    return ok


def parameters_from_config(config: Any) -> int:
    """Chapter 3: a causal LM's parameter count from its configuration, built on the meta device (no memory).

    A tied embedding and LM head are one tensor, and ``parameters()`` yields it once.
    """
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def prefill_matmul_flops(config: Any, positions: int) -> int:
    """Chapter 3: FLOPs of a prefill's matrix products over ``positions`` tokens, logits at the last position only.

    ``2 (N_mm - h V) T + 2 h V``: every linear layer at every position, with ``N_mm`` the weight
    entries a token is multiplied by (:func:`inferlab.analysis.sizing.matmul_parameters`, Chapter 2,
    the LM head included), and the LM head (``h x V``) once. Attention's score and value products,
    which involve no parameters and grow with the length, are left out, as the 2N rule leaves them out.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from inferlab.analysis.sizing import matmul_parameters

    if positions < 1:
        raise ValueError("a prefill has at least one position")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    head = int(config.hidden_size) * int(config.vocab_size)
    return 2 * (matmul_parameters(model) - head) * positions + 2 * head


def head_share_vocabularies(config: Any, share: float = 0.10) -> dict[str, float]:
    """Chapter 3, exercise 5: the vocabulary V at which the LM head's ``2 * hidden * V`` is ``share`` of ``2N``.

    Two questions. ``"n_fixed"``: N held at the model's present count, V = share * N / hidden.
    ``"n_grows"``: only the vocabulary changes, so the embedding table (one tensor when tied, two when
    not) grows with V and N with it; solve ``hidden * V = share * (N_rest + tables * hidden * V)``.
    """
    hidden, vocab = int(config.hidden_size), int(config.vocab_size)
    tables = 1 if getattr(config, "tie_word_embeddings", False) else 2
    n = parameters_from_config(config)
    rest = n - tables * hidden * vocab
    if not 0 < share * tables < 1:
        raise ValueError(f"share must be between 0 and {1 / tables}")
    return {"n_fixed": share * n / hidden, "n_grows": share * rest / (hidden * (1 - share * tables)),
            "parameters": n, "rest": rest, "tables": tables}


def head_share_at(config: Any, vocab: int) -> float:
    """Chapter 3, check yourself: the LM head's share of 2N (in %) if only the vocabulary became ``vocab``."""
    n = head_share_vocabularies(config)
    hidden = int(config.hidden_size)
    return 100 * hidden * vocab / (n["rest"] + n["tables"] * hidden * vocab)


def _verdict(answer: float, expected: float, tolerance: float, what: str) -> bool:
    """Print right, or too high / too low by how much (the answer itself stays the reader's to find)."""
    error = answer / expected - 1
    ok = abs(error) <= tolerance
    print(f"right: {what} (within {100 * tolerance:.0f} %)" if ok else
          f"not quite: {what}: yours is {100 * abs(error):.0f} % too {'high' if error > 0 else 'low'}")
    return ok


def vocab_for_head_share(answer: float, config: Any, n_grows: bool, share: float = 0.10,
                         tolerance: float = 0.02) -> bool:
    """Chapter 3, exercise 5: is ``answer`` the vocabulary at which the LM head is ``share`` of 2N?

    ``n_grows=False`` holds N at its present value; ``True`` lets the embedding table, and so N, grow with V.
    """
    expected = head_share_vocabularies(config, share)["n_grows" if n_grows else "n_fixed"]
    return _verdict(answer, expected, tolerance, f"vocabulary for a {100 * share:.0f} % LM head, "
                    + ("N growing with V" if n_grows else "N held fixed"))


def lm_head_share(answer_percent: float, config: Any, vocab: int, tolerance: float = 0.03) -> bool:
    """Chapter 3, check yourself: the LM head's share of 2N, in %, if only the vocabulary became ``vocab``."""
    return _verdict(answer_percent, head_share_at(config, vocab), tolerance,
                    f"LM head share of 2N at a vocabulary of {vocab:,}")


def tokens_for_words(answer: float, words: int, text: str, tokenizer: Any, tolerance: float = 0.15) -> bool:
    """Chapter 3, check yourself: tokens for ``words`` words of text like ``text``, at its tokens per word."""
    per_word = len(tokenizer.encode(text, add_special_tokens=False)) / len(text.split())
    return _verdict(answer, words * per_word, tolerance, f"tokens for {words:,} words of this kind of text")
