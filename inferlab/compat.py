"""Small shims over differences between the library versions the book supports.

The book pins transformers 5 on its own machines, but Colab may keep transformers 4 (4.56 or
newer); each function here gives one answer under both.
"""
from __future__ import annotations

from typing import Any


def output_cache(outputs: Any) -> Any:
    """The KV cache a model call returned: ``outputs.cache`` in transformers 5, ``past_key_values`` in 4 (Chapter 2)."""
    cache = getattr(outputs, "cache", None)
    return cache if cache is not None else getattr(outputs, "past_key_values", None)


def cache_kwargs(cache: Any) -> dict[str, Any]:
    """Keyword arguments that pass a KV cache back into a model call under either version (Chapter 5)."""
    import transformers

    major = int(transformers.__version__.split(".")[0])
    return {"cache": cache} if major >= 5 else {"past_key_values": cache}


def new_dynamic_cache(config: Any) -> Any:
    """An empty transformers ``DynamicCache`` for a model's config, under either version (Chapter 6)."""
    from transformers import DynamicCache

    return DynamicCache(config=config)  # both 4.57 and 5.x take the config (cache_utils.py)
