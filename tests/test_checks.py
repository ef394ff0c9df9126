import dataclasses
import random

from inferlab.checks import has_stop_reason, same_output_twice
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
