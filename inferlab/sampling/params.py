"""Per-request sampling parameters: the decoding rule, seed, stop strings and token budget (Chapter 6).

One frozen object says everything a request asks of the choice of tokens, and is validated when
it is made, so the engine never meets a malformed request half-way through a generation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inferlab.errors import BadRequest
from inferlab.sampling.rule import DecodingRule

#: The most new tokens one request may ask for; larger values are almost always a typo (Chapter 1).
MAX_NEW_TOKENS_LIMIT = 4096
#: The most samples one request may ask for (Chapter 5).
MAX_SAMPLES = 256


def _whole(value: object, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name} must be a whole number, got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise BadRequest(f"{name} must be {bound}, got {value}")
    return value


@dataclass(frozen=True)
class SamplingParams:
    """What one request asks of the choice of tokens (Chapter 6; ``n`` in Chapter 5).

    ``rule`` is a Chapter 5 :class:`DecodingRule` (greedy by default). ``seed`` seeds the request's
    own random generator; a sampled request without one gets a fresh seed, recorded in its result so
    that the run can be replayed. Sample ``i`` of ``n`` uses ``seed + i``. ``stop`` holds stop
    strings (one string or several). ``ignore_eos`` keeps generating past end-of-sequence tokens, so
    that every sample has exactly ``max_new_tokens`` tokens.
    """

    max_new_tokens: int = 16
    rule: DecodingRule = field(default_factory=DecodingRule)
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    n: int = 1

    def __post_init__(self) -> None:
        _whole(self.max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS_LIMIT)
        _whole(self.n, "n", 1, MAX_SAMPLES)
        if self.seed is not None:
            _whole(self.seed, "seed", 0, 2**63 - 1 - MAX_SAMPLES)
        if not isinstance(self.rule, DecodingRule):
            raise BadRequest(f"rule must be a DecodingRule, got {type(self.rule).__name__}")
        stops = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        if any(not isinstance(s, str) or not s for s in stops):
            raise BadRequest("stop strings must be non-empty text")
        object.__setattr__(self, "stop", stops)
        if not isinstance(self.ignore_eos, bool):
            raise BadRequest(f"ignore_eos must be True or False, got {self.ignore_eos!r}")

    def to_dict(self, seed: int | None) -> dict[str, Any]:
        """The parameters as run, with the seed actually used, for a result record (Chapter 6)."""
        return {"rule": self.rule.label(), **self.rule.settings(), "seed": seed, "stop": list(self.stop),
                "max_new_tokens": self.max_new_tokens, "ignore_eos": self.ignore_eos, "n": self.n}
