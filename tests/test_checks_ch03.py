"""Chapter 3's new checkers: the LM head's share of 2N, tokens per word, and the streaming claim of exercise 4."""
from __future__ import annotations

import pytest
from transformers import GPT2Config, LlamaConfig

from inferbook.checks import ch03
from inferlab.engine import IncrementalDetokenizer

#: SmolLM2-135M-Instruct's shape, as the bundled model's config.json gives it (no file needed here).
SMOL = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
            num_key_value_heads=3, vocab_size=49_152, max_position_embeddings=8192, tie_word_embeddings=True)


def tiny_llama(**changes) -> LlamaConfig:
    return LlamaConfig(**{**dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 num_key_value_heads=1, vocab_size=100, tie_word_embeddings=True), **changes})


def test_parameters_from_config_counts_a_tied_table_once():
    assert ch03.parameters_from_config(LlamaConfig(**SMOL)) == 134_515_008
    assert ch03.parameters_from_config(GPT2Config()) == 124_439_808
    tied, untied = tiny_llama(), tiny_llama(tie_word_embeddings=False)
    assert ch03.parameters_from_config(untied) - ch03.parameters_from_config(tied) == 16 * 100


def test_prefill_matmul_flops_charges_the_head_once():
    """2 (N_mm - hV) T + 2hV, with N_mm counted by hand from the two shapes (no model file needed)."""
    gpt2_layers = 12 * (768 * 3 * 768 + 768 * 768 + 768 * 3072 + 3072 * 768)  # c_attn, c_proj, c_fc, mlp c_proj
    smol_layers = 30 * (576 * 576 + 2 * 576 * 192 + 576 * 576 + 3 * 576 * 1536)  # q, k, v, o; gate, up, down
    for config, layers, head in ((GPT2Config(), gpt2_layers, 768 * 50_257), (LlamaConfig(**SMOL), smol_layers, 576 * 49_152)):
        for positions in (1, 31, 48):
            assert ch03.prefill_matmul_flops(config, positions) == 2 * layers * positions + 2 * head
    with pytest.raises(ValueError):
        ch03.prefill_matmul_flops(GPT2Config(), 0)


def test_head_share_vocabularies_solve_their_equations():
    smol = ch03.head_share_vocabularies(LlamaConfig(**SMOL))
    assert smol["parameters"] == 134_515_008 and smol["tables"] == 1
    assert smol["rest"] == 134_515_008 - 576 * 49_152
    assert round(smol["n_fixed"]) == 23_353 and round(smol["n_grows"]) == 20_487
    for config in (tiny_llama(), tiny_llama(tie_word_embeddings=False)):
        found = ch03.head_share_vocabularies(config)
        v = found["n_grows"]
        n_at_v = found["rest"] + found["tables"] * 16 * v  # the model's size at that vocabulary
        assert abs(16 * v / n_at_v - 0.10) < 1e-12
        # brute force: the share at a vocabulary, counted by building the model, crosses 10 % there
        below = ch03.parameters_from_config(config.__class__(**{**config.to_dict(), "vocab_size": int(v)}))
        assert 16 * int(v) / below <= 0.10 < 16 * (int(v) + 1) / (below + found["tables"] * 16)
    with pytest.raises(ValueError):
        ch03.head_share_vocabularies(tiny_llama(tie_word_embeddings=False), share=0.6)


def test_vocabulary_checkers_accept_right_answers_and_reject_wrong_ones(capsys):
    config = LlamaConfig(**SMOL)
    assert ch03.vocab_for_head_share(20_500, config, n_grows=True)
    assert ch03.vocab_for_head_share(23_400, config, n_grows=False)
    assert not ch03.vocab_for_head_share(23_400, config, n_grows=True)  # the other question's answer
    assert not ch03.vocab_for_head_share(20_500, config, n_grows=False)
    assert "too high" in capsys.readouterr().out.splitlines()[-2]
    share_now = ch03.head_share_at(config, 49_152)
    assert abs(share_now - 100 * 576 * 49_152 / 134_515_008) < 1e-9
    doubled = ch03.head_share_at(config, 2 * 49_152)
    assert abs(doubled - 100 * 576 * 98_304 / (134_515_008 + 576 * 49_152)) < 1e-9
    assert ch03.lm_head_share(round(doubled), config, 2 * 49_152)
    assert not ch03.lm_head_share(2 * share_now, config, 2 * 49_152)  # "twice the share" is the usual slip


def test_tokens_for_words():
    class Words:
        """A tokenizer that gives two tokens per word."""

        def encode(self, text, add_special_tokens=False):
            return [0, 0] * len(text.split())

    assert ch03.tokens_for_words(2000, 1000, "a b c d", Words())
    assert ch03.tokens_for_words(2200, 1000, "a b c d", Words())
    assert not ch03.tokens_for_words(1000, 1000, "a b c d", Words())


def test_the_engines_incremental_detokenizer_passes_the_streaming_checker():
    """Exercise 4 says the engine's IncrementalDetokenizer streams cleanly: it does, fed one id at a time."""

    def engine_stream(tokenizer, ids):
        detokenizer = IncrementalDetokenizer(tokenizer.decode)
        for token_id in ids:
            piece = detokenizer.push(token_id)
            if piece:
                yield piece

    assert ch03.streams_cleanly(engine_stream)
