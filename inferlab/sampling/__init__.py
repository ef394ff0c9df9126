"""Decoding rules: logits processors, samplers, the rule that chains them, and beam search (Chapter 5).

Imports run one way inside the package: ``processors`` and ``samplers`` stand alone, ``rule`` builds
on both, ``params`` (Chapter 6) on ``rule``, and ``beam`` on none of them. Nothing here imports the
engine, the benchmarks, the models or the analysis.
"""
from inferlab.sampling.beam import BeamResult, LogitsSource, beam_search
from inferlab.sampling.params import SamplingParams
from inferlab.sampling.processors import (
    ADDITIVE_PENALTY_RANGE,
    MIN_TEMPERATURE,
    NEG_INF,
    FrequencyPenalty,
    LogitsProcessor,
    MinP,
    PresencePenalty,
    RepetitionPenalty,
    Temperature,
    TopK,
    TopP,
    apply_processors,
    token_counts,
)
from inferlab.sampling.rule import DecodingRule, generated_ids
from inferlab.sampling.samplers import Greedy, Multinomial, make_generator

__all__ = [
    "ADDITIVE_PENALTY_RANGE",
    "MIN_TEMPERATURE",
    "NEG_INF",
    "BeamResult",
    "DecodingRule",
    "FrequencyPenalty",
    "Greedy",
    "LogitsProcessor",
    "LogitsSource",
    "MinP",
    "Multinomial",
    "PresencePenalty",
    "RepetitionPenalty",
    "SamplingParams",
    "Temperature",
    "TopK",
    "TopP",
    "apply_processors",
    "beam_search",
    "generated_ids",
    "make_generator",
    "token_counts",
]
