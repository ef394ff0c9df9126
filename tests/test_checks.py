import dataclasses
import random

from inferbook.checks.ch01 import check_toy_sampling, has_stop_reason, same_output_twice
from inferlab.toy import greedy_pick, stable_softmax
from inferlab.toy import ToyGenerator


class UnseededSampler(ToyGenerator):
    """A wrong answer to exercise 1: sampling with a generator that is never reseeded."""

    def __init__(self):
        super().__init__(seed=7)
        self.rng = random.Random(1)

    def next_token_probs(self, ids):
        size = len(super().next_token_probs(ids))
        pick = self.rng.randrange(size)
        return [1.0 if i == pick else 0.0 for i in range(size)]


def test_same_output_twice_tells_right_from_wrong(capsys):
    assert same_output_twice(ToyGenerator()) is True
    assert same_output_twice(UnseededSampler()) is False
    assert "different tokens" in capsys.readouterr().out


def test_has_stop_reason():
    result = ToyGenerator().generate("Hi", 2)
    assert has_stop_reason(result) is False

    @dataclasses.dataclass
    class WithReason:
        stop_reason: str

    assert has_stop_reason(WithReason("eos")) is True
    assert has_stop_reason(WithReason("tired")) is False


class SeededSampler(ToyGenerator):
    """A right answer to exercise 1: a per-request generator with its own sampling seed."""

    def __init__(self, seed=7, sample_seed=0):
        super().__init__(seed=seed)
        self.sample_seed = sample_seed

    def generate(self, prompt, max_new_tokens):
        self.rng = random.Random(self.sample_seed)
        return super().generate(prompt, max_new_tokens)

    def next_token_probs(self, ids):
        probs = stable_softmax(self.table[ids[-1]])
        pick = self.rng.choices(range(len(probs)), weights=probs)[0]
        return [1.0 if i == pick else 0.0 for i in range(len(probs))]


def test_check_toy_sampling_tells_right_from_wrong(capsys):
    assert check_toy_sampling(lambda s: SeededSampler(seed=7, sample_seed=s)) is True
    assert check_toy_sampling(lambda seed: ToyGenerator(seed=7)) is False  # greedy, not sampling
    assert check_toy_sampling(lambda seed: UnseededSampler()) is False     # not repeatable
    assert greedy_pick([0.2, 0.8]) == 1
