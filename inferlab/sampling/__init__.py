"""Decoding rules: logits processors, samplers, the rule that chains them, and beam search (Chapter 5).

Imports run one way inside the package: ``processors`` and ``samplers`` stand alone, ``rule`` builds
on both, ``params`` (Chapter 6) on ``rule``, and ``beam`` on none of them. Nothing here imports the
engine, the benchmarks, the models or the analysis.
"""
from inferlab.sampling.beam import BeamResult, LogitsSource, beam_search
from inferlab.sampling.params import SamplingParams
from inferlab.sampling.processors import (
    MIN_TEMPERATURE,
    NEG_INF,
    LogitsProcessor,
    MinP,
    RepetitionPenalty,
    Temperature,
    TopK,
    TopP,
    apply_processors,
)
from inferlab.sampling.rule import DecodingRule
from inferlab.sampling.samplers import Greedy, Multinomial, make_generator

__all__ = [
    "MIN_TEMPERATURE",
    "NEG_INF",
    "BeamResult",
    "DecodingRule",
    "Greedy",
    "LogitsProcessor",
    "LogitsSource",
    "MinP",
    "Multinomial",
    "RepetitionPenalty",
    "SamplingParams",
    "Temperature",
    "TopK",
    "TopP",
    "apply_processors",
    "beam_search",
    "make_generator",
]
