"""Quality of a quantised model: perplexity on held-out text and greedy agreement with float32 (Chapter 12).

Two measures, one per question a quantised model must answer:

- :func:`perplexity`: how well the model still predicts text it has not seen. For token ids
  ``x_0 .. x_{n-1}``, perplexity is ``exp(mean_j -log p(x_j | x_<j))`` over the scored tokens
  ``j = 1 .. n-1``. A model has a finite context, so the text is read in windows of ``window``
  tokens; after the first, each window scores the next ``stride`` tokens (:func:`window_spans`),
  so every token is scored once and every token after the first window sees at least
  ``window - stride`` tokens of context. ``stride = window - 1`` is the cheapest setting (the
  windows overlap by one token); a smaller stride gives each token more context for more work.
- :func:`agreement_over_prompts`: for several prompts, the length of the common prefix of a
  model's greedy tokens with the float32 model's (:func:`inferlab.bench.quant.agreement`).

Any model that maps token ids to logits can be measured: :func:`model_logits` wraps a PyTorch
model whose ``model(ids)`` returns logits at every position (the transformers model, or the
engine's decode-optimised and quantised models, whose forward over several positions is a
prefill); :func:`inferlab.bench.llamacpp.llama_cpp_logits` (imported here) wraps llama.cpp
through ``llama-cpp-python`` in a child process, whose ``Llama(logits_all=True)`` keeps every
evaluated position's logits in ``Llama.scores``.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from inferlab.bench.llamacpp import llama_cpp_logits
from inferlab.bench.quant import agreement

#: A model as a function of token ids: ids [n] -> logits [n, vocab], row i predicting token i + 1.
LogitsFn = Callable[[Sequence[int]], torch.Tensor]


def window_spans(n_tokens: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """The windows that score tokens 1 .. n-1 once each: (begin, end, first scored index) (Chapter 12).

    A window holds ids ``[begin, end)`` and scores the tokens ``first .. end - 1``, each predicted by
    the position before it. The first window is ``[0, window)``; each later one scores the next
    ``stride`` tokens and ends after them, beginning ``window`` tokens before its end, so each of its
    tokens sees at least ``window - stride`` tokens of context (the definition of the sliding-window
    perplexity in Hugging Face's guide "Perplexity of fixed-length models").
    """
    if window < 2 or not 1 <= stride < window:
        raise ValueError(f"need window >= 2 and 1 <= stride < window, got window {window}, stride {stride}")
    if n_tokens < 2:
        raise ValueError(f"perplexity needs at least two tokens, got {n_tokens}")
    end = min(window, n_tokens)
    spans = [(0, end, 1)]
    while end < n_tokens:
        first, end = end, min(end + stride, n_tokens)
        spans.append((max(0, end - window), end, first))
    return spans


def token_nll(logits_fn: LogitsFn, ids: Sequence[int], window: int = 512, stride: int = 511) -> torch.Tensor:
    """Negative log-likelihood (nats) of each token 1 .. n-1 given those before it in its window, float64 (Chapter 12)."""
    ids = [int(i) for i in ids]
    parts = []
    for begin, end, first in window_spans(len(ids), window, stride):
        logits = logits_fn(ids[begin:end])
        if tuple(logits.shape[:1]) != (end - begin,):
            raise ValueError(f"logits_fn returned shape {tuple(logits.shape)} for {end - begin} ids")
        rows = logits[first - 1 - begin: end - 1 - begin].to(torch.float64)
        targets = torch.tensor(ids[first:end], dtype=torch.long)
        parts.append(F.cross_entropy(rows, targets, reduction="none"))
    return torch.cat(parts)


def perplexity(logits_fn: LogitsFn, ids: Sequence[int], window: int = 512, stride: int = 511) -> dict[str, Any]:
    """exp(mean negative log-likelihood) over windows; with the settings and the time it took (Chapter 12)."""
    start = time.perf_counter()
    nll = token_nll(logits_fn, ids, window, stride)
    mean = float(nll.mean())
    return {"perplexity": math.exp(mean), "mean_nll": mean, "tokens_scored": int(nll.numel()), "window": window,
            "stride": stride, "windows": len(window_spans(len(ids), window, stride)),
            "seconds": time.perf_counter() - start}


def model_logits(model: torch.nn.Module) -> LogitsFn:
    """A PyTorch causal LM as a :data:`LogitsFn`: ``model(ids[None])`` read as [n, vocab] float32 (Chapter 12).

    Works for a transformers model (its output's ``.logits``) and for the engine's native,
    decode-optimised and quantised models, whose forward returns the logits tensor itself.
    """
    def run(ids: Sequence[int]) -> torch.Tensor:
        with torch.inference_mode():
            out = model(torch.tensor([list(ids)], dtype=torch.long))
        logits = out.logits if hasattr(out, "logits") else out
        return logits[0].float()
    return run


def agreement_over_prompts(tokens: Mapping[str, Sequence[int]] | Sequence[Sequence[int]],
                           reference: Mapping[str, Sequence[int]] | Sequence[Sequence[int]]) -> dict[str, Any]:
    """Greedy agreement with a reference over several prompts: each common prefix, their mean and minimum (Chapter 12).

    ``tokens`` and ``reference`` hold one list of generated ids per prompt, in the same order (or
    keyed by the same prompts).
    """
    mine = list(tokens.values()) if isinstance(tokens, Mapping) else list(tokens)
    theirs = list(reference.values()) if isinstance(reference, Mapping) else list(reference)
    if len(mine) != len(theirs) or not mine:
        raise ValueError(f"need one token list per reference prompt, got {len(mine)} for {len(theirs)}")
    rows = [agreement(a, b) for a, b in zip(mine, theirs)]
    prefixes = [r["common_prefix"] for r in rows]
    return {"common_prefixes": prefixes, "mean_prefix": sum(prefixes) / len(prefixes), "min_prefix": min(prefixes),
            "identical": sum(r["identical"] for r in rows), "prompts": len(rows),
            "new_tokens": [len(b) for b in theirs]}
