import pytest

from inferlab.errors import BadRequest
from inferlab.request import MAX_NEW_TOKENS_LIMIT, check_context, parse_request


def test_accepts_a_normal_request():
    request = parse_request("Hello", 8)
    assert (request.prompt, request.max_new_tokens) == ("Hello", 8)


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t"])
def test_rejects_empty_prompts(prompt):
    with pytest.raises(BadRequest, match="empty"):
        parse_request(prompt, 4)


def test_rejects_a_prompt_that_is_not_text():
    with pytest.raises(BadRequest, match="text"):
        parse_request(b"bytes", 4)


@pytest.mark.parametrize("bad", [0, -3])
def test_rejects_non_positive_lengths(bad):
    with pytest.raises(BadRequest, match="at least 1"):
        parse_request("hi", bad)


@pytest.mark.parametrize("bad", [2.5, "8", True, None])
def test_rejects_lengths_that_are_not_whole_numbers(bad):
    with pytest.raises(BadRequest, match="whole number"):
        parse_request("hi", bad)


def test_rejects_huge_lengths_but_accepts_the_limit():
    parse_request("hi", MAX_NEW_TOKENS_LIMIT)
    with pytest.raises(BadRequest, match="more than"):
        parse_request("hi", MAX_NEW_TOKENS_LIMIT + 1)


def test_context_check():
    check_context(1000, 24, 1024)
    check_context(10**6, 10, None)
    with pytest.raises(BadRequest, match="1000 tokens and asks for 25 more.*1024 positions"):
        check_context(1000, 25, 1024)
