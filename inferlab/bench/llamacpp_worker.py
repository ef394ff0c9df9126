"""llama.cpp's side of the comparison, run inside a child process by :mod:`inferlab.bench.child` (Chapter 12).

This module is loaded by path in a fresh interpreter, so it imports only the standard library,
NumPy and ``llama_cpp`` (never ``inferlab``, whose ``__init__`` imports torch). The parent-side
wrappers live in :mod:`inferlab.bench.llamacpp`.
"""
from __future__ import annotations

import time
from typing import Any

import llama_cpp


class Worker:
    """One GGUF file loaded by llama.cpp (or none, for the calls that need no model) (Chapter 12).

    ``temp=0`` selects llama.cpp's greedy sampler and ``repeat_penalty=1`` turns off the penalty its
    ``generate`` applies by default (``llama_cpp/llama.py``, ``Llama._init_sampler``); ``generate``
    yields tokens until the caller stops, with no end-of-sequence stop of its own, so every run gives
    exactly N tokens. ``reset()`` before each request empties the KV cache, so the prompt is always
    prefilled. With ``logits_all=True`` ``Llama.scores`` [n_ctx, vocab] keeps the logits of every
    evaluated position (``Llama.eval``): row i holds the raw logits after token i.
    """

    def __init__(self, model_path: str | None = None, threads: int = 1, context: int = 512,
                 logits_all: bool = False) -> None:
        self.model = None
        if model_path is not None:
            batch = context if logits_all else 512
            self.model = llama_cpp.Llama(model_path=model_path, n_ctx=context, n_batch=batch, n_ubatch=batch,
                                         n_threads=threads, n_threads_batch=threads, logits_all=logits_all, seed=0,
                                         verbose=False)

    def generate(self, prompt_ids: list[int], new_tokens: int) -> tuple[list[int], float, list[float]]:
        """N greedy tokens; the start time and each token's time, all read from one clock in this process."""
        assert self.model is not None, "no model loaded"
        self.model.reset()
        tokens: list[int] = []
        stamps: list[float] = []
        start = time.perf_counter()
        for token in self.model.generate(list(prompt_ids), top_k=1, temp=0.0, repeat_penalty=1.0, reset=True):
            stamps.append(time.perf_counter())
            tokens.append(int(token))
            if len(tokens) == new_tokens:
                break
        return tokens, start, stamps

    def logits(self, ids: list[int]) -> Any:
        """The float32 logits [len(ids), vocab] of one window evaluated from an empty cache."""
        assert self.model is not None, "no model loaded"
        self.model.reset()
        self.model.eval(list(ids))
        return self.model.scores[: len(ids)].copy()

    def quantize(self, source: str, target: str, ftype: int) -> int:
        """``llama_model_quantize`` from ``source`` to ``target`` (requantising allowed); its status code."""
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.allow_requantize = True
        return int(llama_cpp.llama_model_quantize(source.encode(), target.encode(), params))

    def system_info(self) -> str:
        """``llama_print_system_info()``: the CPU features and backends this build of llama.cpp has."""
        return bytes(llama_cpp.llama_print_system_info()).decode()
