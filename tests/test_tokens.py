from inferlab.text.counts import count_units, load_tokenizer


def test_gpt2_tokenizer_from_package_gives_gpt2_ids(gpt2_tokenizer):
    # Published GPT-2 ids: "Hello world" is [15496, 995]; <|endoftext|> is 50256.
    assert gpt2_tokenizer.encode("Hello world") == [15496, 995]
    assert gpt2_tokenizer.eos_token_id == 50256 and len(gpt2_tokenizer) == 50257


def test_counts_characters_bytes_and_tokens(gpt2_tokenizer):
    [row] = count_units({"ja": "日本語"}, {"gpt2": gpt2_tokenizer})
    assert (row.characters, row.utf8_bytes) == (3, 9)
    assert row.tokens["gpt2"] == len(gpt2_tokenizer.encode("日本語"))
    assert gpt2_tokenizer.decode(gpt2_tokenizer.encode("日本語")) == "日本語"


def test_load_tokenizer_by_model_name():
    import pytest

    from inferlab.errors import ModelUnavailable

    assert load_tokenizer("gpt2").encode("Hello world") == [15496, 995]
    assert len(load_tokenizer("smollm2-135m")) == 49152
    with pytest.raises(ModelUnavailable):
        load_tokenizer("nope")
