"""The engine: one generation loop around pluggable backends (Chapter 6; Chapter 1's faces).

``Engine.step()`` = schedule (:mod:`.scheduler`), run the model (:mod:`.runner`), choose tokens (the
request's :class:`inferlab.sampling.SamplingParams`), post-process (:mod:`.stopping`,
:mod:`.detokenizer`). Per-request state lives in :class:`.sequence.Sequence`.
"""
from inferlab.engine.backends import Backend, end_of_sequence_ids, native_backend, toy_backend, transformers_backend
from inferlab.engine.detokenizer import FullDecodeDetokenizer, IncrementalDetokenizer
from inferlab.engine.faces import RealModelRunner, TokenGenerator, ToyGenerator
from inferlab.engine.llm_engine import Engine
from inferlab.engine.runner import CausalLM, ModelRunner
from inferlab.engine.scheduler import OneRequestScheduler
from inferlab.engine.sequence import Sequence, Status
from inferlab.engine.stopping import find_stop, held_back

__all__ = ["Backend", "CausalLM", "Engine", "FullDecodeDetokenizer", "IncrementalDetokenizer", "ModelRunner",
           "OneRequestScheduler", "RealModelRunner", "Sequence", "Status", "TokenGenerator", "ToyGenerator",
           "end_of_sequence_ids", "find_stop", "held_back", "native_backend", "toy_backend", "transformers_backend"]
