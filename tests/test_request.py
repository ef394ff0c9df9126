import pytest

from inferlab.errors import BadRequest
from inferlab.request import check_prompt_ids


def test_a_prompt_that_fits_is_returned_as_a_list():
    assert check_prompt_ids((0, 5, 119), 4, vocab_size=120, context=7) == [0, 5, 119]
    assert check_prompt_ids([3], 10_000, vocab_size=4, context=None) == [3]  # no context limit (the toy)


@pytest.mark.parametrize("ids, new, message", [
    ([], 1, "no token ids"),
    ("abc", 1, "no token ids"),
    ([1, True], 1, "whole numbers"),
    ([1, 2.0], 1, "whole numbers"),
    ([-1], 1, r"must lie in \[0, 120\), got -1..-1"),
    ([0, 120], 1, r"must lie in \[0, 120\), got 0..120"),
    ([0] * 60, 5, "the prompt has 60 tokens and asks for 5 more, but the model's context holds 64 positions"),
])
def test_what_no_model_can_continue_is_refused(ids, new, message):
    with pytest.raises(BadRequest, match=message):
        check_prompt_ids(ids, new, vocab_size=120, context=64)
