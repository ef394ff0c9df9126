"""Inference Lab: a small, inspectable runtime for reproducible inference experiments.

Each chapter of the book adds one piece; the docstring of every public function names the chapter
that introduces it. The chain, bottom to top (imports run one way, upwards):

- :mod:`inferlab.errors`, :mod:`inferlab.records`, :mod:`inferlab.timing`, :mod:`inferlab.cpuinfo`,
  :mod:`inferlab.provenance`: errors, the result and stream records, the stage clock, the processor,
  provenance (Chapter 1).
- :mod:`inferlab.text`: token counts (Chapter 1), byte-level BPE and chat templates on ids (Chapter 3).
- :mod:`inferlab.models`: the registry and loaders (Chapter 1), the one model shape (Chapter 2), the
  toy model (Chapter 1), native forward passes (Chapter 4), transformers behind the same seam (Chapter 6).
- :mod:`inferlab.sampling`: decoding rules and beam search (Chapter 5), per-request parameters (Chapter 6).
- :mod:`inferlab.analysis`: sizing and FLOPs (Chapters 2 and 4), diversity measures (Chapter 5).
- :mod:`inferlab.engine`: the one generation loop and its backends (Chapter 6; Chapter 1's faces).
- :mod:`inferlab.bench`: repeated requests and stage summaries (Chapter 1; Part II fills it).
- :mod:`inferlab.cli`: ``python -m inferlab generate ...`` (Chapter 1).
"""
from inferlab.engine import (
    Engine,
    RealModelRunner,
    TokenGenerator,
    ToyGenerator,
    native_backend,
    toy_backend,
    transformers_backend,
)
from inferlab.errors import BadRequest, InferlabError, ModelUnavailable
from inferlab.records import STAGES, STOP_REASONS, GenerationResult, StageTiming, StreamEvent
from inferlab.sampling import DecodingRule, SamplingParams

__version__ = "0.2.0"

__all__ = [
    "STAGES", "STOP_REASONS", "BadRequest", "DecodingRule", "Engine", "GenerationResult", "InferlabError",
    "ModelUnavailable", "RealModelRunner", "SamplingParams", "StageTiming", "StreamEvent", "TokenGenerator",
    "ToyGenerator", "native_backend", "toy_backend", "transformers_backend",
]
