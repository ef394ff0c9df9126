"""Token ids up close: each token's bytes, special tokens, and chat templates encoded on ids (Chapter 3).

Works with the book's real tokenizers (Hugging Face, byte-level: GPT-2 and SmolLM2) and with
:class:`inferlab.text.bpe.BPETokenizer`. The coloured HTML view of tokens is book-only (:mod:`inferbook.tokens`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from inferlab.text.bpe import BPETokenizer, byte_to_char
from inferlab.errors import BadRequest


@dataclass(frozen=True)
class TokenRow:
    """One token of an encoded text: position, id, the bytes it stands for, special or not (Chapter 3)."""

    index: int
    token_id: int
    raw: bytes
    special: bool

    @property
    def shown(self) -> str:
        """The token as text, with bytes that are not complete UTF-8 written as \\xNN escapes."""
        try:
            text = self.raw.decode("utf-8")
        except UnicodeDecodeError:
            return "".join(f"\\x{b:02x}" for b in self.raw)
        return text.replace("\n", "↵").replace("\t", "⇥")


def is_byte_level(tokenizer: Any) -> bool:
    """Whether a Hugging Face tokenizer writes its tokens in GPT-2's byte alphabet (Chapter 3)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    parts = [getattr(backend, "decoder", None), getattr(backend, "pre_tokenizer", None)]
    return any(part is not None and '"ByteLevel"' in json.dumps(json.loads(part.__getstate__()))
               for part in parts)


_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def token_bytes(tokenizer: Any, token_id: int) -> tuple[bytes, bool]:
    """The bytes one token stands for, and whether it is a special token (Chapter 3).

    Byte-level tokenizers (GPT-2, SmolLM2) map back exactly. For others, SentencePiece-style
    conventions are undone: ``▁`` is a space and ``<0xNN>`` a single byte.
    """
    if isinstance(tokenizer, BPETokenizer):
        return tokenizer.decode_bytes([token_id]), False
    if not 0 <= token_id < len(tokenizer):
        raise BadRequest(f"token id {token_id} is not in this tokenizer's vocabulary of {len(tokenizer)} ids")
    added = getattr(tokenizer, "added_tokens_decoder", {}).get(token_id)
    if added is not None and getattr(added, "special", False):
        return str(added).encode("utf-8"), True
    piece = str(tokenizer.convert_ids_to_tokens(token_id))
    if is_byte_level(tokenizer):  # every character stands for one byte in GPT-2's visible alphabet
        from_char = {c: b for b, c in byte_to_char().items()}
        if all(c in from_char for c in piece):
            return bytes(from_char[c] for c in piece), False
        return piece.encode("utf-8"), False  # an added, non-special token is stored as plain text
    fallback = _BYTE_FALLBACK.fullmatch(piece)
    if fallback:
        return bytes([int(fallback.group(1), 16)]), False
    return piece.replace("\u2581", " ").encode("utf-8"), False


def token_rows(tokenizer: Any, ids: list[int]) -> list[TokenRow]:
    """One :class:`TokenRow` per id, for tables and coloured views (Chapter 3)."""
    rows = []
    for index, token_id in enumerate(ids):
        raw, special = token_bytes(tokenizer, int(token_id))
        rows.append(TokenRow(index, int(token_id), raw, special))
    return rows


def encode_plain(tokenizer: Any, text: str) -> list[int]:
    """Token ids of text with no special tokens added, for either kind of tokenizer (Chapter 3)."""
    if isinstance(tokenizer, BPETokenizer):
        return tokenizer.encode(text)
    return list(tokenizer.encode(text, add_special_tokens=False))


def _check_chat(tokenizer: Any, messages: list[dict[str, str]]) -> None:
    """Refuse a tokenizer without a chat template and messages that are not role/content strings (Chapter 3)."""
    if not getattr(tokenizer, "chat_template", None):
        raise BadRequest(f"{getattr(tokenizer, 'name_or_path', 'this tokenizer')} has no chat template: "
                         "it belongs to a base model, which reads plain text")
    if not messages or not all(isinstance(m, dict) and {"role", "content"} <= set(m)
                               and isinstance(m["role"], str) and isinstance(m["content"], str) for m in messages):
        raise BadRequest("messages must be a non-empty list of {'role': ..., 'content': ...} dictionaries of strings")


def added_token_pattern(tokenizer: Any) -> re.Pattern[str]:
    """A pattern that finds the text of any added token, longest first, as one captured group (Chapter 3)."""
    texts = sorted((token.content for token in tokenizer.added_tokens_decoder.values()), key=len, reverse=True)
    return re.compile("(" + ("|".join(map(re.escape, texts)) or "(?!)") + ")")


def encode_untrusted(tokenizer: Any, text: str) -> list[int]:
    """Token ids of text with special-token parsing off: a typed ``<|im_end|>`` stays text (Chapter 3).

    ``split_special_tokens`` stops only *special* added tokens from being matched, so a tokenizer with
    added tokens that are not special is refused: user text could still produce those. The flag that
    transformers sets on the Rust tokenizer for this call is restored afterwards.
    """
    if not text:
        return []
    loose = sorted(str(t) for t in getattr(tokenizer, "added_tokens_decoder", {}).values()
                   if not getattr(t, "special", True))
    if loose:
        raise BadRequest(f"this tokenizer has added tokens that are not special ({', '.join(loose[:4])}); "
                         "user text could still be encoded as them, so it cannot be kept apart from control tokens")
    backend = getattr(tokenizer, "backend_tokenizer", None)
    before = getattr(backend, "encode_special_tokens", None)
    try:
        return [int(i) for i in tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]]
    finally:
        if before is not None:
            backend.encode_special_tokens = before


def _template_pieces(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool) -> list[str]:
    """The chat template's own text before, between and after the messages' contents (Chapter 3).

    The template is rendered with a placeholder in place of each content, and cut at the placeholders;
    the pieces with the real contents put back must be exactly what the template renders.
    """
    marks = [f"\ue000content {k}\ue001" for k in range(len(messages))]
    placeholders = [{**message, "content": mark} for message, mark in zip(messages, marks)]
    rendered = tokenizer.apply_chat_template(placeholders, add_generation_prompt=add_generation_prompt, tokenize=False)
    pieces, rest = [], rendered
    for mark in marks:
        head, found, rest = rest.partition(mark)
        if not found or rendered.count(mark) != 1:
            raise BadRequest("this chat template does not write each message's content once and in order, "
                             "so its control tokens cannot be told apart from the contents")
        pieces.append(head)
    pieces.append(rest)
    whole = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)
    if "".join(p + m["content"] for p, m in zip(pieces, messages)) + pieces[-1] != whole:
        raise BadRequest("this chat template rewrites the messages' contents (trims or edits them); "
                         "chat_ids needs a template that copies each content as it is")
    return pieces


def chat_ids(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> list[int]:
    """The token ids a chat model sees for a conversation, through its chat template (Chapter 3).

    Only the template writes control tokens. Its added tokens become their ids; each run of text
    between two of them, the template's text and the contents together, is encoded with special-token
    parsing off, so a message that contains ``<|im_end|>`` stays text. The tokenizer itself cuts a
    whole string at added tokens before it applies BPE, so for ordinary messages the ids equal
    ``apply_chat_template(messages, tokenize=True)``.
    """
    _check_chat(tokenizer, messages)
    control = added_token_pattern(tokenizer)
    if any(control.search(m["role"]) for m in messages):
        raise BadRequest("a message's role contains a special token's text; roles are written into the template")
    pieces = _template_pieces(tokenizer, messages, add_generation_prompt)
    contents = [m["content"] for m in messages] + [""]
    ids: list[int] = []
    text = ""
    for piece, content in zip(pieces, contents):
        for k, part in enumerate(control.split(piece)):
            if k % 2:  # a control token written by the template itself
                ids += encode_untrusted(tokenizer, text) + [int(tokenizer.convert_tokens_to_ids(part))]
                text = ""
            else:
                text += part
        text += content
    return ids + encode_untrusted(tokenizer, text)
