"""A transformers causal LM behind the lab's model seam: ``forward(input_ids, positions, cache)`` (Chapter 6).

The engine calls every model the same way; this adapter turns that call into transformers'
keywords, so that the engine can run transformers' own forward pass beside the native one of
Chapter 4 on the same weights.
"""
from __future__ import annotations

from typing import Any

from inferlab.compat import cache_kwargs, new_dynamic_cache


class TransformersLM:
    """transformers' forward pass as a pure function of ids, positions and an optional KV cache (Chapter 6).

    With a cache, transformers appends the new keys and values to it in place, so the next call
    feeds only the new tokens. Without one, every call recomputes the whole sequence.
    """

    def __init__(self, model: Any, context: int):
        self.model = model
        self.vocab_size = int(model.config.vocab_size)
        self.max_positions: int | None = context

    def new_cache(self) -> Any:
        """An empty transformers ``DynamicCache`` (Chapter 6)."""
        return new_dynamic_cache(self.model.config)

    def __call__(self, input_ids: Any, positions: Any = None, cache: Any = None, last_only: bool = False) -> Any:
        """Logits [batch, seq, vocab], or [batch, 1, vocab] with ``last_only`` (Chapter 6)."""
        kwargs: dict[str, Any] = {"input_ids": input_ids, "use_cache": cache is not None}
        if positions is not None:
            kwargs["position_ids"] = positions
        if cache is not None:
            kwargs.update(cache_kwargs(cache))
        if last_only:
            kwargs["logits_to_keep"] = 1
        return self.model(**kwargs).logits
