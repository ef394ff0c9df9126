"""What every native model shares: a pure forward from ids and positions to logits (Chapter 4).

A native model is written in plain PyTorch, is built from a :class:`ModelShape`, and computes the
same logits as the transformers model whose state dict it loads. Subclasses provide ``trunk``
(embeddings, blocks, final norm) and the LM head weight; this class adds the rest. The forward pass
checks nothing about its ids and keeps nothing between calls: ids are checked once, when a request
is admitted (:func:`inferlab.request.check_prompt_ids`), and what a later call needs from an earlier
one travels in the ``cache`` argument, the KV cache of Chapter 9 (:mod:`inferlab.models.kv_cache`).
"""
from __future__ import annotations

from typing import Mapping

import torch
from torch import nn
from torch.profiler import record_function

from inferlab.models.kv_cache import DynamicKVCache, KVCache, StaticKVCache
from inferlab.models.shape import ModelShape, UnsupportedModel


class NativeCausalLM(nn.Module):
    """Base of the native GPT-2 and Llama models: ``forward``, ``last_logits``, ``new_cache`` (Chapter 4)."""

    #: The :attr:`ModelShape.family` a subclass implements.
    family: str

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        if shape.family != self.family:
            raise UnsupportedModel(f"{type(self).__name__} implements the {self.family} family, "
                                   f"not {shape.family!r}")
        self.shape = shape
        self.vocab_size, self.max_positions = shape.vocab, shape.context

    def trunk(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Hidden states after the final norm, [batch, seq, hidden]; each layer extends ``cache`` (Chapters 4, 9)."""
        raise NotImplementedError

    def lm_head_weight(self) -> torch.Tensor:
        """The [vocab, hidden] matrix of the LM head; the token embedding when tied (Chapter 4)."""
        raise NotImplementedError

    def new_cache(self, static: bool = False, max_length: int | None = None) -> KVCache:
        """An empty KV cache: dynamic, or static with ``max_length`` positions (the context if None) (Chapter 9)."""
        if not static:
            if max_length is not None:
                raise UnsupportedModel("max_length sizes a static cache; a dynamic cache grows as it needs")
            return DynamicKVCache(self.shape.layers)
        length = self.max_positions if max_length is None else max_length
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= self.max_positions:
            raise UnsupportedModel(f"a static cache of this model holds 1 to {self.max_positions} positions, "
                                   f"got max_length={max_length!r}")
        return StaticKVCache(self.shape.layers, length)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor | None = None, cache: KVCache | None = None,
                last_only: bool = False) -> torch.Tensor:
        """Logits [batch, seq, vocab], or [batch, 1, vocab] of the last position with ``last_only`` (Chapters 4, 9).

        ``positions`` are the absolute positions of the ids, [batch, seq] or [seq]; None means
        0 .. seq-1, or with a ``cache`` the positions after the cached ones. With a cache (from
        :meth:`new_cache`) every layer stores the new keys and values in it and attends over all
        the cached ones, so a call feeds only the ids the cache has not seen.
        """
        positions = cache_positions(input_ids, positions, cache)
        hidden = self.trunk(input_ids, positions, cache)
        with record_function("lm_head"):
            if last_only:  # one row per sequence through the LM head, kept 3-D: [batch, 1, vocab]
                return (hidden[:, -1, :] @ self.lm_head_weight().T).unsqueeze(1)
            return hidden @ self.lm_head_weight().T

    def last_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits of the last position only, [batch, vocab]: what generation needs (Chapter 4)."""
        return self(input_ids, last_only=True)[:, -1]


def cache_positions(input_ids: torch.Tensor, positions: torch.Tensor | None, cache: KVCache | None) -> torch.Tensor:
    """The ids' positions: as given, else 0 .. seq-1, or after the cached ones; refuse a gap or overlap (Chapter 9).

    A cache keeps position ``i`` in slot ``i``, so the new ids must continue at ``cache.length``.
    """
    seq = input_ids.shape[1]
    if cache is None:
        return torch.arange(seq, device=input_ids.device) if positions is None else positions
    start = cache.length
    expected = torch.arange(start, start + seq, device=input_ids.device)
    if positions is None:
        return expected
    if not bool((positions == expected).all()):
        raise UnsupportedModel(f"the cache holds positions 0..{start - 1}, so the {seq} new ids must have positions "
                               f"{start}..{start + seq - 1}")
    return positions


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor | None = None,
                     key_positions: torch.Tensor | None = None) -> torch.Tensor:
    """Scaled dot-product attention with a causal mask; K/V heads shared by groups of query heads (Chapters 4, 9).

    q is [batch, heads, seq, head_dim]; k and v are [batch, kv_heads, keys, head_dim], where
    kv_heads divides heads (1 for multi-query, heads for multi-head, in between for grouped-query).
    The query heads of one group are folded into the rows of one matrix product, so the shared
    keys and values are used in place, never copied. ``positions`` ([seq] or [batch, seq], None
    for 0 .. seq-1) are the queries' absolute positions; ``key_positions`` ([keys]) are the keys',
    the queries' own when None (no cache), ``0 .. keys-1`` with a cache (Chapter 9), where there
    are more keys than queries. A key at a later position than its query is masked.
    """
    batch, heads, seq, head_dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    if heads % kv_heads:
        raise UnsupportedModel(f"{heads} query heads cannot share {kv_heads} key/value heads evenly")
    with record_function("scores"):
        grouped = q.reshape(batch, kv_heads, heads // kv_heads * seq, head_dim)
        scores = (grouped @ k.transpose(-2, -1)).view(batch, heads, seq, keys)
    with record_function("softmax"):
        if positions is None:
            positions = torch.arange(seq, device=q.device)
        if key_positions is None:
            key_positions = positions
        future = (key_positions.unsqueeze(-2) > positions.unsqueeze(-1)).unsqueeze(-3)  # [(batch,) 1, seq, keys]
        scores = (scores * head_dim**-0.5).masked_fill(future, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
    with record_function("context"):
        grouped = probs.reshape(batch, kv_heads, heads // kv_heads * seq, keys)
        return (grouped @ v).view(batch, heads, seq, head_dim)


def tied_head_check(state_dict: Mapping[str, torch.Tensor], embedding_key: str, head_key: str = "lm_head.weight") -> None:
    """Refuse a state dict whose LM head differs from the embedding it claims to be tied to (Chapter 4)."""
    head = state_dict.get(head_key)
    if head is not None and not torch.equal(head, state_dict[embedding_key]):
        raise UnsupportedModel(f"config says tied embeddings, but {head_key} differs from {embedding_key}")


def copy_into(module: nn.Module, tensors: Mapping[str, torch.Tensor]) -> None:
    """Copy named tensors into a module's parameters, refusing missing, unknown or misshaped ones (Chapter 4)."""
    own = dict(module.named_parameters())
    missing, unknown = sorted(set(own) - set(tensors)), sorted(set(tensors) - set(own))
    if missing or unknown:
        raise UnsupportedModel(f"state dict does not fit: missing {missing[:4]}, unexpected {unknown[:4]}")
    with torch.no_grad():
        for name, tensor in tensors.items():
            if own[name].shape != tensor.shape:
                raise UnsupportedModel(f"{name}: expected shape {tuple(own[name].shape)}, got {tuple(tensor.shape)}")
            own[name].copy_(tensor)
