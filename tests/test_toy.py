import math

import pytest
import torch

from inferlab.errors import BadRequest
from inferlab.records import STAGES
from inferlab.toy import TOY_VOCABULARY, ToyGenerator, greedy_pick, stable_softmax


def test_vocabulary_has_57_distinct_symbols():
    assert len(TOY_VOCABULARY) == len(set(TOY_VOCABULARY)) == 57


def test_stable_softmax_matches_torch_and_survives_huge_scores():
    logits = [1.0, -2.0, 0.5, 3.0]
    expected = torch.softmax(torch.tensor(logits, dtype=torch.float64), 0).tolist()
    assert stable_softmax(logits) == pytest.approx(expected, rel=1e-12)
    huge = stable_softmax([1000.0, 999.0])  # math.exp(1000) alone would overflow
    assert huge == pytest.approx([1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1))])
    with pytest.raises(ValueError):
        stable_softmax([])


def test_greedy_breaks_ties_towards_the_smallest_id():
    assert greedy_pick([0.1, 0.4, 0.4, 0.1]) == 1
    assert greedy_pick([0.25] * 4) == 0


def test_same_seed_same_output_different_seed_different_output():
    first = ToyGenerator(seed=7).generate("Hello", 8)
    again = ToyGenerator(seed=7).generate("Hello", 8)
    other = ToyGenerator(seed=8).generate("Hello", 8)
    assert first.text == again.text and first.token_ids == again.token_ids
    assert other.text != first.text
    assert len(first.text) == 8 and all(c in TOY_VOCABULARY for c in first.text)


def test_next_token_depends_only_on_previous_token():
    toy = ToyGenerator(seed=3)
    assert toy.next_token_probs([5, 9]) == toy.next_token_probs([9])


def test_result_records_stages_in_order_and_its_simulations():
    result = ToyGenerator().generate("Hi", 3)
    stages = [t.stage for t in result.timings]
    assert stages == ["request_parse", "tokenize", "encode"] + ["forward_pass", "sample"] * 3 + [
        "decode", "response_format"]
    assert set(stages) == set(STAGES)
    assert [t.step for t in result.timings if t.stage == "forward_pass"] == [0, 1, 2]
    assert result.simulated_stages == ["forward_pass", "sampling_distribution", "kv_cache"]
    assert result.prompt_ids == [TOY_VOCABULARY.index("H"), TOY_VOCABULARY.index("i")]


def test_rejects_characters_outside_the_vocabulary_and_bad_requests():
    with pytest.raises(BadRequest, match="'3'"):
        ToyGenerator().generate("abc3", 2)
    with pytest.raises(BadRequest):
        ToyGenerator().generate("", 2)
    with pytest.raises(ValueError):
        ToyGenerator(vocabulary="aab")
