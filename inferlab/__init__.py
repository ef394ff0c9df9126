"""Inference Lab: a small, inspectable runtime for reproducible inference experiments.

Each chapter of the book adds one piece; the docstring of every public function names the chapter
that introduces it.

Chapter 1: the request record (:mod:`inferlab.records`), request checks (:mod:`inferlab.request`),
stage timing (:mod:`inferlab.timing`), the toy generator (:mod:`inferlab.toy`), the model registry
and loaders (:mod:`inferlab.models.registry`, :mod:`inferlab.models.loaders`), provenance
(:mod:`inferlab.provenance`), the real runner (:mod:`inferlab.runner`), token counts
(:mod:`inferlab.text.counts`) and the command line (:mod:`inferlab.cli`).

Chapter 2: sizing of parameters, memory and FLOPs (:mod:`inferlab.analysis.sizing`). Chapter 3: byte-level
BPE (:mod:`inferlab.text.bpe`) and chat templates on token ids (:mod:`inferlab.text.chat`). Chapter 4: native
forward passes (:mod:`inferlab.models`). Chapter 5: decoding rules (:mod:`inferlab.sampling`).
Chapter 6: the engine and its backends (:mod:`inferlab.engine`, :mod:`inferlab.engine.backends_old`).
"""
from inferlab.errors import BadRequest, InferlabError, ModelUnavailable
from inferlab.records import STAGES, GenerationResult, StageTiming, TokenGenerator
from inferlab.request import Request, parse_request
from inferlab.timing import StageClock, StageSummary, run_repeated, summarise_timings
from inferlab.toy import ToyGenerator

__version__ = "0.1.0"

__all__ = [
    "STAGES", "BadRequest", "GenerationResult", "InferlabError", "ModelUnavailable", "Request",
    "StageClock", "StageSummary", "StageTiming", "TokenGenerator", "ToyGenerator",
    "parse_request", "run_repeated", "summarise_timings",
]
