"""The book's exercise checkers (package inferbook) tell right answers from wrong ones."""
import dataclasses
import random

import torch

from inferbook.checks.ch01 import check_toy_sampling, has_stop_reason, same_output_twice
from inferbook.checks.ch05 import check_distinct_n, check_top_p
from inferlab.engine import ToyGenerator


@dataclasses.dataclass
class Result:
    """The two fields the Chapter 1 checkers read from a generation result."""

    token_ids: list[int]
    text: str


class SeededSampler:
    """A right answer to Chapter 1, exercise 1: a generator made per request from its own sampling seed."""

    def __init__(self, sample_seed: int):
        self.sample_seed = sample_seed

    def generate(self, prompt: str, max_new_tokens: int) -> Result:
        rng = random.Random(self.sample_seed)
        ids = [rng.randrange(57) for _ in range(max_new_tokens)]
        return Result(ids, "".join(chr(65 + i % 26) for i in ids))


class UnseededSampler(SeededSampler):
    """A wrong answer: one generator made once, so the second request continues its stream."""

    def __init__(self, sample_seed: int = 1):
        super().__init__(sample_seed)
        self.rng = random.Random(sample_seed)

    def generate(self, prompt: str, max_new_tokens: int) -> Result:
        self.sample_seed = self.rng.randrange(2**32)
        return super().generate(prompt, max_new_tokens)


def test_same_output_twice_tells_right_from_wrong(capsys):
    assert same_output_twice(ToyGenerator()) is True
    assert same_output_twice(UnseededSampler()) is False
    assert "different tokens" in capsys.readouterr().out


def test_has_stop_reason():
    @dataclasses.dataclass
    class WithReason:
        stop_reason: str

    assert has_stop_reason(WithReason("eos")) is True
    assert has_stop_reason(WithReason("tired")) is False
    assert has_stop_reason(Result([1], "A")) is False


def test_check_toy_sampling_tells_right_from_wrong(capsys):
    assert check_toy_sampling(SeededSampler) is True
    assert check_toy_sampling(lambda seed: ToyGenerator(seed=7)) is False  # greedy, not sampling
    assert check_toy_sampling(lambda seed: UnseededSampler()) is False     # not repeatable
    assert "repeatable per seed: no" in capsys.readouterr().out


def rank_top_p(logits, p):
    """The book's answer to Chapter 5, exercise 1: remove a token once the mass before it reaches p."""
    sorted_probs, order = torch.sort(torch.softmax(logits, -1), descending=True)
    remove = (sorted_probs.cumsum(-1) - sorted_probs) >= p
    return logits.masked_fill(torch.zeros_like(remove).scatter(-1, order, remove), float("-inf"))


def crossing_dropped_top_p(logits, p):
    """The common mistake: ``cumsum > p`` also removes the token that crosses the threshold."""
    sorted_probs, order = torch.sort(torch.softmax(logits, -1), descending=True)
    remove = sorted_probs.cumsum(-1) > p
    return logits.masked_fill(torch.zeros_like(remove).scatter(-1, order, remove), float("-inf"))


def test_check_top_p_tells_right_from_wrong(capsys):
    assert check_top_p(rank_top_p) is True
    assert check_top_p(crossing_dropped_top_p) is False
    assert "wrong" in capsys.readouterr().out


def pooled_distinct(samples, n):
    grams = [tuple(s[i:i + n]) for s in samples for i in range(len(s) - n + 1)]
    return len(set(grams)) / len(grams)


def per_sample_distinct(samples, n):
    return sum(pooled_distinct([s], n) for s in samples) / len(samples)


def test_check_distinct_n_tells_pooled_from_per_sample(capsys):
    assert check_distinct_n(pooled_distinct) is True
    assert check_distinct_n(per_sample_distinct) is False
    assert "wrong" in capsys.readouterr().out
