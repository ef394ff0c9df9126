"""The model runner: the one place where the engine calls a model (Chapter 6).

Every model in the lab has the same seam, ``model(input_ids, positions, cache, last_only) ->
logits``: the toy, transformers' forward pass and the native forward of Chapter 4. The runner
turns the scheduled sequences into that call and returns float32 logits of each sequence's last
position. With ``kv_cache`` (for models that keep one), it feeds only each sequence's newest token
and lets the model extend the cache; otherwise it feeds every position again, the baseline of
Chapter 1. Chapter 9 gives the native models a cache, dynamic or static (``kv_cache="static"``:
one preallocated for the request's prompt and budget); Part III teaches the runner to batch
sequences of different requests.
"""
from __future__ import annotations

from collections.abc import Sequence as Seq
from typing import Any, Protocol

from inferlab.engine.sequence import Sequence
from inferlab.errors import BadRequest


class CausalLM(Protocol):
    """The model seam (Chapters 4 and 6): logits from ids, positions and an optional KV cache."""

    vocab_size: int
    max_positions: int | None

    def __call__(self, input_ids: Any, positions: Any = None, cache: Any = None,
                 last_only: bool = False) -> Any:
        """Logits [batch, seq, vocab], or [batch, 1, vocab] with ``last_only``."""
        ...

    def new_cache(self) -> Any:
        """An empty KV cache, or None for a model that keeps none."""
        ...


#: The runner's ``kv_cache`` settings: none, the model's own (growing) cache, or a preallocated one
#: from ``model.new_cache(static=True, max_length=n)``, which the native models offer (Chapter 9).
KV_CACHE_SETTINGS = (False, True, "static")


def _has_static_cache(model: CausalLM) -> bool:
    """Whether ``model.new_cache(static=True, max_length=n)`` gives a cache (Chapter 9)."""
    try:
        return model.new_cache(static=True, max_length=1) is not None  # type: ignore[call-arg]
    except TypeError:  # a new_cache() that takes no arguments
        return False


class ModelRunner:
    """Runs a :class:`CausalLM` on scheduled sequences and returns last-position logits (Chapter 6)."""

    def __init__(self, model: CausalLM, device: str = "cpu", last_only: bool = True, kv_cache: bool | str = False):
        if kv_cache not in KV_CACHE_SETTINGS:
            raise BadRequest(f"kv_cache must be one of {KV_CACHE_SETTINGS}, got {kv_cache!r}")
        if kv_cache and model.new_cache() is None:
            raise BadRequest(f"kv_cache={kv_cache!r} needs a model that keeps a KV cache; {type(model).__name__} "
                             "keeps none")
        if kv_cache == "static" and not _has_static_cache(model):
            raise BadRequest(f"kv_cache='static' needs a model with a static KV cache (new_cache(static=True, "
                             f"max_length=n)), such as the native models of Chapter 9; {type(model).__name__} "
                             "has none")
        self.model = model
        self.device = device
        self.last_only = last_only
        self.kv_cache = kv_cache
        self.vocab_size = model.vocab_size
        self.max_positions = model.max_positions
        self._cache: Any = None
        self._cached: list[Sequence] = []  # the rows of the cache, in order
        self._cached_length = 0

    def forward(self, input_ids: Any, positions: Any, cache: Any = None) -> Any:
        """The model call: float32 logits [batch, vocab] of the last position (Chapter 6).

        Logits are cast to float32 before any decoding rule sees them, whatever the model's dtype,
        as transformers' ``generate`` does. The last position is copied out, as ``generate`` does too,
        so that the model's full output (every position's logits, without ``last_only``) is freed
        here, inside the model call, and not kept alive until the step ends.
        """
        import torch

        with torch.inference_mode():
            logits = self.model(input_ids, positions, cache, last_only=self.last_only)
            return logits[:, -1].to(dtype=torch.float32, copy=True)

    def logits(self, rows: Seq[Seq[int]]) -> Any:
        """Last-position logits of equal-length id rows, recomputed from scratch (Chapter 6).

        Beam search (Chapter 5) calls this: it reorders its rows every step, so it keeps no cache.
        """
        import torch

        input_ids = torch.tensor([list(r) for r in rows], device=self.device)
        positions = torch.arange(input_ids.shape[1], device=self.device).expand_as(input_ids)
        return self.forward(input_ids, positions)

    def run(self, sequences: list[Sequence]) -> Any:
        """Logits [len(sequences), vocab] for the next token of each sequence (Chapter 6)."""
        import torch

        length = len(sequences[0].ids)
        if any(len(s.ids) != length for s in sequences):
            raise ValueError("the runner needs sequences of equal length (one request's samples)")
        if not self.kv_cache:
            return self.logits([s.ids for s in sequences])
        keep = [i for i, s in enumerate(self._cached) if s in sequences]
        reusable = self._cache is not None and self._cached_length == length - 1 and len(keep) == len(sequences)
        if not reusable:  # a new request: start an empty cache and feed every position once
            self._cache, self._cached_length = self._new_cache(sequences[0]), 0
            self._cached = list(sequences)
            if len(sequences) > 1 and all(s.ids == sequences[0].ids for s in sequences[1:]):
                return self._prefill_shared(sequences)
        elif len(keep) < len(self._cached):  # some samples stopped: drop their rows from the cache
            self._cache.batch_select_indices(torch.tensor(keep, device=self.device))
            self._cached = [self._cached[i] for i in keep]
        rows = [s.ids[self._cached_length:] for s in self._cached]
        input_ids = torch.tensor(rows, device=self.device)
        positions = torch.arange(self._cached_length, length, device=self.device).expand_as(input_ids)
        logits = self.forward(input_ids, positions, self._cache)
        self._cached_length = length
        order = {id(s): i for i, s in enumerate(self._cached)}
        return logits[[order[id(s)] for s in sequences]]

    def _new_cache(self, sequence: Sequence) -> Any:
        """The model's empty cache; a static one holds the request's prompt and whole budget (Chapter 9)."""
        if self.kv_cache != "static":
            return self.model.new_cache()
        needed = len(sequence.prompt_ids) + sequence.params.max_new_tokens
        return self.model.new_cache(static=True, max_length=needed)  # type: ignore[call-arg]

    def _prefill_shared(self, sequences: list[Sequence]) -> Any:
        """The samples of one request share their prompt: run it once, then copy its cache to every row (Chapter 6)."""
        import torch

        ids = sequences[0].ids
        input_ids = torch.tensor([ids], device=self.device)
        positions = torch.arange(len(ids), device=self.device).unsqueeze(0)
        logits = self.forward(input_ids, positions, self._cache)
        self._cache.batch_repeat_interleave(len(sequences))
        self._cached_length = len(ids)
        return logits.repeat(len(sequences), 1)

    def release(self) -> None:
        """Forget the cache, for example when a request is aborted (Chapter 6)."""
        self._cache, self._cached, self._cached_length = None, [], 0
