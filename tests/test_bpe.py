"""Tests of the from-scratch byte-level BPE (Chapter 3) and the token views of inferlab.text.chat."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from inferlab.text.bpe import BPETokenizer, byte_order, byte_to_char, gpt2_bpe, pretokenize, train_bpe
from inferbook.tokens import tokens_html
from inferlab.text.chat import chat_ids, encode_plain, token_rows
from inferlab.errors import BadRequest, InferlabError

CORPUS = (Path(__file__).resolve().parent.parent / "data" / "ch03_corpus.txt").read_text(encoding="utf-8")

UNICODE_SAMPLES = [
    "",
    "Hello, world!",
    "  leading and trailing spaces  ",
    "tabs\tand\nnew\r\nlines\n\n\n",
    "Le modèle lit la requête",
    "Модель читает запрос",
    "मॉडल अनुरोध पढ़ता है",
    "モデルはリクエストを読み、回答を書きます。",
    "emoji 🙂👍🏽🇫🇷 and a family 👨‍👩‍👧 (zero-width joiners)",
    "combining: e\u0301 vs \u00e9; zero width space:\u200b; BOM:\ufeff; NUL:\x00; DEL:\x7f",
    "def f(x):\n    return x ** 2  # comment\n",
    "numbers 3.14159 1,000,000 2026-11-30 0x1F",
    "<|endoftext|> is only text to a tokenizer without special tokens",
    "\U0010ffff private use and the last code point",
]


def random_text(rng: random.Random, length: int) -> str:
    """Random code points from several planes, excluding surrogates (which are not text)."""
    chars = []
    for _ in range(length):
        plane = rng.choice([(0x20, 0x7F), (0x0, 0x20), (0x80, 0x800), (0x800, 0xD800), (0xE000, 0x10000),
                            (0x1F300, 0x1FAFF), (0x10000, 0x110000)])
        chars.append(chr(rng.randrange(*plane)))
    return "".join(chars)


@pytest.fixture(scope="module")
def trained() -> BPETokenizer:
    return train_bpe(CORPUS, 256 + 500)


def hf_trained(text: str, vocab_size: int):
    """The tokenizers library's BPE trainer, configured like train_bpe: byte-level, no special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=0, special_tokens=[], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer)
    return tok


def hf_merges(tok) -> list[tuple[str, str]]:
    merges = json.loads(tok.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]


# --- the byte alphabet ------------------------------------------------------------------------------

def test_byte_order_is_a_permutation_matching_gpt2_ids(gpt2_tokenizer):
    assert sorted(byte_order()) == list(range(256))
    to_char = byte_to_char()
    assert len(set(to_char.values())) == 256 and to_char[ord(" ")] == "Ġ" and to_char[ord("\n")] == "Ċ"
    # GPT-2's ids 0..255 are the bytes in this order.
    assert [gpt2_tokenizer.convert_tokens_to_ids(to_char[b]) for b in byte_order()] == list(range(256))


def test_pretokenize_keeps_spaces_with_the_following_word():
    assert pretokenize("Hello  world's 42!\n") == ["Hello", " ", " world", "'s", " 42", "!", "\n"]
    assert "".join(pretokenize(CORPUS)) == CORPUS  # nothing dropped


# --- round trips --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", UNICODE_SAMPLES)
def test_round_trip_on_unicode_samples(trained, text):
    ids = trained.encode(text)
    assert trained.decode(ids) == text
    assert all(0 <= i < len(trained) for i in ids)


def test_round_trip_on_random_unicode(trained):
    rng = random.Random(0)
    for _ in range(300):
        text = random_text(rng, rng.randrange(0, 40))
        assert trained.decode(trained.encode(text)) == text, repr(text)


def test_round_trip_on_arbitrary_bytes_including_invalid_utf8(trained):
    rng = random.Random(1)
    samples = [b"\xff\xfe", b"\x80abc\xc3", b"caf\xc3\xa9 \xe6\x97", bytes(range(256))]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(200)]
    for data in samples:
        ids = trained.encode(data)
        assert trained.decode_bytes(ids) == data, data
    assert trained.decode(trained.encode(b"\xff")) == "\ufffd"  # as text, an invalid byte is U+FFFD


def test_every_byte_is_one_token_before_any_merge():
    empty = BPETokenizer(merges=())
    data = bytes(range(256))
    assert len(empty) == 256 and len(empty.encode(data)) == 256 and empty.decode_bytes(empty.encode(data)) == data


# --- training ------------------------------------------------------------------------------------------

def test_merges_learned_in_expected_order_on_a_tiny_corpus():
    # Words (Sennrich et al.'s example with GPT-2's leading spaces): "low" x1, " low" x4, " lower" x2,
    # " newest" x6, " widest" x3. Worked by hand: e-s and s-t occur 9 times (newest + widest), and
    # (e, s) has the smaller ids (68, 82) < (82, 83), so "es" comes first, then "es"+"t" (9). Next
    # l-o and o-w tie at 7: "lo", then "low". Five pairs tie at 6; (e, w) = (68, 86) has the smallest
    # ids (the space byte, Ġ, is id 220), then "n"+"ew"; then Ġ+low (220, 259) before Ġ+new (220, 261).
    text = "low" + " low" * 4 + " lower" * 2 + " newest" * 6 + " widest" * 3
    tok = train_bpe(text, 256 + 8)
    assert tok.merges_as_text() == [("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w"), ("e", "w"), ("n", "ew"),
                                    ("Ġ", "low"), ("Ġ", "new")]
    assert tok.merge_counts == (9, 9, 7, 7, 6, 6, 6, 6)
    assert [tok.piece(i) for i in tok.encode(" lowest newer")] == ["Ġlow", "est", "Ġnew", "e", "r"]
    assert train_bpe(text, 256 + 8) == tok  # deterministic


def test_ties_break_towards_the_smallest_pair_of_ids():
    tok = train_bpe("ab cd", 256 + 1)  # pairs (a,b) and (c,d) both occur once
    assert tok.merges_as_text() == [("a", "b")]


def test_training_stops_when_no_pair_is_left():
    tok = train_bpe("ab ab", 10_000)
    assert tok.merges_as_text() == [("a", "b"), ("Ġ", "ab")] and len(tok) == 258


def test_more_merges_never_give_more_tokens_on_the_training_text():
    tok = train_bpe(CORPUS, 256 + 600)
    counts = [len(BPETokenizer(merges=tok.merges[:k]).encode(CORPUS)) for k in (0, 100, 300, 600)]
    assert counts == sorted(counts, reverse=True) and counts[0] == len(CORPUS.encode("utf-8"))


def test_bad_arguments_raise_clear_errors(trained):
    with pytest.raises(BadRequest, match="at least 256"):
        train_bpe("abc", 100)
    with pytest.raises(BadRequest, match="non-empty"):
        train_bpe("", 300)
    with pytest.raises(BadRequest, match="lone surrogate"):
        trained.encode("abc\ud800def")
    with pytest.raises(BadRequest, match="str or bytes"):
        trained.encode(123)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="not in this vocabulary"):
        trained.decode([0, len(trained)])
    with pytest.raises(BadRequest, match="not in this vocabulary"):
        trained.decode([-1])
    with pytest.raises(InferlabError, match="does not exist yet"):
        BPETokenizer(merges=((0, 300),))


# --- against the tokenizers library ------------------------------------------------------------------

@pytest.mark.parametrize("vocab_size", [256 + 50, 256 + 500, 256 + 1500])
def test_merges_identical_to_tokenizers_bpe_trainer(vocab_size):
    """Same corpus, same vocabulary size, ByteLevel pre-tokenizer, no special tokens: the same merges,
    in the same order, and the same ids (both number the 256 bytes in GPT-2's order, then merges)."""
    ours = train_bpe(CORPUS, vocab_size)
    theirs = hf_trained(CORPUS, vocab_size)
    assert ours.merges_as_text() == hf_merges(theirs)
    assert theirs.get_vocab_size() == len(ours) == vocab_size
    vocab = theirs.get_vocab()
    assert all(vocab[ours.piece(i)] == i for i in range(len(ours)))


def test_encodings_identical_to_tokenizers_on_unseen_text(trained):
    theirs = hf_trained(CORPUS, len(trained))
    rng = random.Random(2)
    texts = UNICODE_SAMPLES + [random_text(rng, 30) for _ in range(100)] + [CORPUS[:3000]]
    for text in texts:
        assert trained.encode(text) == theirs.encode(text).ids, repr(text)
        assert theirs.decode(trained.encode(text)) == text


# --- against GPT-2's real tokenizer --------------------------------------------------------------------

def test_gpt2_merges_in_our_encoder_give_gpt2_ids(gpt2_tokenizer):
    ours = gpt2_bpe()
    assert len(ours) == 50_256  # GPT-2's 50,257 ids less <|endoftext|>
    rng = random.Random(3)
    texts = [t for t in UNICODE_SAMPLES if "<|endoftext|>" not in t] + [CORPUS[:4000]]
    texts += [random_text(rng, 25) for _ in range(50)]
    for text in texts:
        assert ours.encode(text) == gpt2_tokenizer.encode(text), repr(text)
    assert ours.encode("What is the capital of France?") == [2061, 318, 262, 3139, 286, 4881, 30]


def test_real_tokenizers_round_trip_too(gpt2_tokenizer):
    from inferlab.text.counts import load_tokenizer

    smol = load_tokenizer("smollm2-135m")
    for tok in (gpt2_tokenizer, smol):
        for text in UNICODE_SAMPLES[1:]:
            if "<|endoftext|>" in text or "\r" in text:
                continue
            assert tok.decode(tok.encode(text, add_special_tokens=False)) == text, (tok.name_or_path, text)


def test_real_tokenizers_on_control_characters(gpt2_tokenizer):
    """GPT-2's vocabulary keeps all 256 bytes; SmolLM2's lacks 21, six of them ASCII control characters (Chapter 3).

    GPT-2 round-trips every control character. SmolLM2 loses exactly those six, and the two lead bytes
    0xF1 and 0xF2 of planes 4 to 11, without an error: transformers 5 drops them (its BPE model has no
    unknown token and no byte fallback), 4.57's conversion puts the unknown token ``<|endoftext|>`` in
    their place. The other 13 missing values (0xC0, 0xC1, 0xF5 to 0xFF) never occur in UTF-8.
    """
    from inferlab.text.counts import load_tokenizer

    smol = load_tokenizer("smollm2-135m")
    to_char = byte_to_char()
    gpt2_vocab, smol_vocab = gpt2_tokenizer.get_vocab(), smol.get_vocab()
    assert all(to_char[b] in gpt2_vocab for b in range(256))
    missing = [b for b in range(256) if to_char[b] not in smol_vocab]
    assert missing == [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)]
    a, b = smol.convert_tokens_to_ids("a"), smol.convert_tokens_to_ids("b")
    controls = [*range(0x20), 0x7F]
    lost = []
    for code in controls + [0x40000, 0x80000, 0x1F642]:  # a code point in plane 4, one in plane 8, an emoji
        text = f"a{chr(code)}b"
        assert gpt2_tokenizer.decode(gpt2_tokenizer.encode(text)) == text, hex(code)
        ids = smol.encode(text, add_special_tokens=False)
        if smol.decode(ids) != text:
            lost.append(code)
        if code in missing:  # a one-byte character: gone, or the unknown token in its place
            assert ids == [a, b] or ids == [a, smol.unk_token_id, b], (hex(code), ids)
    assert lost == [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0x40000, 0x80000]


# --- inferlab.text.chat --------------------------------------------------------------------------------------

def test_token_rows_reassemble_the_text(trained, gpt2_tokenizer):
    text = "Tokens 🙂 cost 1234 bytes\n    indented"
    for tok in (trained, gpt2_tokenizer):
        rows = token_rows(tok, encode_plain(tok, text))
        assert b"".join(r.raw for r in rows).decode("utf-8") == text
    emoji_rows = token_rows(gpt2_tokenizer, encode_plain(gpt2_tokenizer, "🙂"))
    assert len(emoji_rows) > 1 and "\\x" in emoji_rows[-1].shown  # a piece of a character, shown as bytes


def test_special_tokens_and_chat_template_of_smollm2():
    from inferlab.text.counts import load_tokenizer

    smol = load_tokenizer("smollm2-135m")
    ids = chat_ids(smol, [{"role": "user", "content": "Hi"}])
    rows = token_rows(smol, ids)
    specials = [(r.token_id, r.raw.decode()) for r in rows if r.special]
    assert specials[0] == (1, "<|im_start|>") and (2, "<|im_end|>") in specials
    assert ids[0] == 1 and ids[-4] == 1 and rows[-1].raw == b"\n"  # ... <|im_start|> assistant \n
    assert smol.decode(ids).endswith("<|im_start|>assistant\n")
    html = tokens_html(rows, "chat")
    assert "<script" not in html and html.count("<span") == len(ids) and "&lt;|im_start|&gt;" in html


def test_chat_ids_refuse_a_base_tokenizer_and_bad_messages(gpt2_tokenizer):
    from inferlab.text.counts import load_tokenizer

    with pytest.raises(BadRequest, match="no chat template"):
        chat_ids(gpt2_tokenizer, [{"role": "user", "content": "Hi"}])
    with pytest.raises(BadRequest, match="messages"):
        chat_ids(load_tokenizer("smollm2-135m"), [{"text": "Hi"}])
    with pytest.raises(BadRequest, match="not in this tokenizer"):
        token_rows(gpt2_tokenizer, [50257])


# --- the exercise checkers of Chapter 3 ---------------------------------------------------------------

def _prefix_and_tail(tokenizer, ids):
    """A streaming decoder that yields the valid prefix and keeps the tail from the error's start (Chapter 3, exercise 4)."""
    buffer = b""
    for i in ids:
        buffer += tokenizer.decode_bytes([i])
        try:
            text, buffer = buffer.decode("utf-8"), b""
        except UnicodeDecodeError as error:
            text, buffer = buffer[:error.start].decode("utf-8"), buffer[error.start:]
        if text:
            yield text

def test_checkers_accept_right_answers_and_reject_wrong_ones():
    import codecs

    from inferbook.checks import ch03 as checks_ch03
    from inferlab.text.counts import load_tokenizer

    def good_stream(tokenizer, ids):
        decoder = codecs.getincrementaldecoder("utf-8")()
        for i in ids:
            text = decoder.decode(tokenizer.decode_bytes([i]))
            if text:
                yield text

    def naive_stream(tokenizer, ids):
        return [tokenizer.decode([i]) for i in ids]

    def replace_past_four_bytes(tokenizer, ids):  # the old solution: breaks "ー" + part of the next character
        buffer = b""
        for i in ids:
            buffer += tokenizer.decode_bytes([i])
            try:
                text = buffer.decode("utf-8")
            except UnicodeDecodeError:
                if len(buffer) <= 4:
                    continue
                text = buffer.decode("utf-8", "replace")
            buffer = b""
            yield text

    def all_at_the_end(tokenizer, ids):
        yield tokenizer.decode(list(ids))

    def one_token_late(tokenizer, ids):
        pending = None
        for text in good_stream(tokenizer, ids):
            if pending is not None:
                yield pending
            pending = text
        if pending is not None:
            yield pending

    assert checks_ch03.streams_cleanly(good_stream) and checks_ch03.streams_cleanly(_prefix_and_tail)
    for bad in (naive_stream, replace_past_four_bytes, all_at_the_end, one_token_late):
        assert not checks_ch03.streams_cleanly(bad), bad.__name__
    smol = load_tokenizer("smollm2-135m")
    enc = lambda s: smol.encode(s, add_special_tokens=False)  # noqa: E731
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    by_hand = ([1] + enc("system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face") + [2]
               + enc("\n") + [1] + enc("user\nWhat is the capital of France?") + [2] + enc("\n") + [1]
               + enc("assistant\n"))
    assert checks_ch03.same_chat_ids(by_hand, smol, messages)
    assert not checks_ch03.same_chat_ids(by_hand[:-1], smol, messages)
    assert checks_ch03.merges_learned("ab ab ab abc bc", 256 + 3, [("a", "b"), ("Ġ", "ab"), ("b", "c")])
    assert not checks_ch03.merges_learned("ab ab ab abc bc", 256 + 3, [("a", "b"), ("b", "c"), ("Ġ", "ab")])


def test_token_bytes_of_a_tokenizer_that_is_not_byte_level():
    """A SentencePiece-style tokenizer ('▁' for a space, <0xNN> byte fallback) is not read as GPT-2 bytes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from inferlab.text.chat import is_byte_level, token_bytes

    pieces = ["<unk>", "▁", "c", "a", "f", "é", "▁c", "ca", "▁ca", "caf", "▁caf", "▁café"]
    vocab = {p: i for i, p in enumerate(pieces)} | {f"<0x{b:02X}>": len(pieces) + b for b in range(256)}
    merges = [("▁", "c"), ("▁c", "a"), ("▁ca", "f"), ("▁caf", "é")]
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend)
    ids = tok.encode(" café 日", add_special_tokens=False)
    assert not is_byte_level(tok)
    raw = [token_bytes(tok, i)[0] for i in ids]
    assert raw[0] == " café".encode("utf-8")  # 'é' is U+00E9 here, two bytes, not GPT-2's byte 0xE9
    assert b"".join(raw[-3:]) == "日".encode("utf-8")  # three byte-fallback tokens


def test_decode_bytes_takes_any_integer_type_but_not_bool_or_float(trained):
    import numpy as np

    ids = trained.encode("numpy ids")
    assert trained.decode_bytes(np.array(ids)) == b"numpy ids"
    assert trained.decode_bytes([np.int32(i) for i in ids]) == b"numpy ids"
    for bad in (True, 1.0, "1", np.int64(len(trained))):
        with pytest.raises(BadRequest, match="not in this vocabulary"):
            trained.decode_bytes([bad])


def test_merges_checker_does_not_print_the_answer(capsys):
    from inferbook.checks import ch03 as checks_ch03

    assert not checks_ch03.merges_learned("ab ab ab abc bc", 256 + 3, [("a", "b"), ("b", "c"), ("Ġ", "ab")])
    said = capsys.readouterr().out
    assert "merge 1" in said and "Ġab" not in said and "'ab'" not in said


def test_exercise_4_solution_streams_past_an_invalid_byte():
    """Chapter 3, exercise 4: the incremental decoder with errors="replace" keeps streaming after a byte
    that no UTF-8 character can contain (a lone continuation byte, which GPT-2 has as a token of its own
    and a sampler can emit), while a prefix-and-tail buffer that keeps ``buffer[error.start:]`` stalls."""
    import codecs

    from inferlab.text.bpe import gpt2_bpe

    tokenizer = gpt2_bpe()
    ids = tokenizer.encode("ok ") + tokenizer.encode(b"\x99") + tokenizer.encode(" and the rest, 日本語")
    assert tokenizer.decode_bytes(tokenizer.encode(b"\x99")) == b"\x99"

    def replace_stream(ids):  # the solution the chapter gives
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for i in ids:
            text = decoder.decode(tokenizer.decode_bytes([i]))
            if text:
                yield text

    assert "".join(replace_stream(ids)) == "ok \ufffd and the rest, 日本語"
    assert "".join(_prefix_and_tail(tokenizer, ids)) == "ok "  # an invalid byte never leaves its tail
