"""The KV cache of the native models: keys and values kept between calls, so each step feeds one token (Chapter 9).

A cache holds, for every layer, the keys and values of positions 0 .. ``length``-1 of each batch row,
as ``[batch, kv_heads, positions, head_dim]`` tensors. A forward pass with a cache hands each layer's
new keys and values to :meth:`KVCache.update`, which stores them after the cached ones and returns
everything cached so far; the layer attends over that. Slot ``i`` always holds position ``i``, so the
causal mask compares the queries' positions with ``0 .. length-1``.

Two caches, the two that gpt-fast and transformers teach:

- :class:`DynamicKVCache` grows by ``torch.cat`` at every step: it holds exactly the positions seen,
  and copies every cached key and value once per step to do it.
- :class:`StaticKVCache` allocates ``max_length`` positions per layer when the first keys arrive and
  writes each step's keys in place: no copies of the past, no allocation per step, and memory paid
  for the whole length up front.

Both answer what the engine's runner asks of transformers' caches (``batch_select_indices``,
``batch_repeat_interleave``) and report the bytes they hold (:meth:`KVCache.nbytes`), which equal
``2 x layers x batch x kv_heads x head_dim x bytes x positions`` (Chapter 2's
:func:`inferlab.analysis.sizing.kv_cache_bytes`), with ``positions`` the filled length of a dynamic
cache and ``max_length`` of a static one.
"""
from __future__ import annotations

import torch

from inferlab.errors import BadRequest


class CacheFull(BadRequest):
    """More positions than a static KV cache was allocated for (Chapter 9)."""


class KVCache:
    """Per-layer keys and values of positions 0 .. length-1, for every batch row (Chapter 9)."""

    def __init__(self, layers: int) -> None:
        if layers < 1:
            raise ValueError(f"a KV cache needs at least one layer, got {layers}")
        self.layers = layers
        self.keys: list[torch.Tensor | None] = [None] * layers
        self.values: list[torch.Tensor | None] = [None] * layers
        #: Positions cached in every layer; the next ids go to position ``length``.
        self.length = 0

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Store a layer's new keys and values after the cached ones; return all of them (Chapter 9).

        The arguments come in the order of transformers' ``Cache.update(key_states, value_states,
        layer_idx)``, so code written for one cache reads the other.
        """
        raise NotImplementedError

    def _advance(self, layer: int, end: int) -> None:
        """After the last layer has stored its keys, the cache holds positions 0 .. end-1 (Chapter 9)."""
        if layer == self.layers - 1:
            self.length = end

    def crop(self, length: int) -> None:
        """Keep positions 0 .. length-1, so the next position is stored after them (Chapter 9).

        A negative ``length`` removes that many positions from the end instead: ``crop(-1)`` drops the
        last one. That is the call transformers' caches take too (5.x accepts only a negative count), so
        one line rewinds the lab's caches and transformers' alike. A dynamic cache keeps views of its tensors' first positions, as
        transformers' ``DynamicLayer.crop`` does (the storage is freed at the next ``torch.cat``); a
        static cache only moves :attr:`length`, and the next update overwrites the slots after it.
        """
        keep = self.length + length if length < 0 else length
        if not 0 <= keep <= self.length:
            raise ValueError(f"cannot crop a cache of {self.length} positions to {length}: "
                             f"keep 0 to {self.length} positions, or remove at most {self.length}")
        self._keep_first(keep)
        self.length = keep

    def _keep_first(self, keep: int) -> None:
        """Drop the stored positions from ``keep`` on; a buffer written in place needs nothing (Chapter 9)."""

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the batch rows at ``indices``, in that order (Chapter 9)."""
        for store in (self.keys, self.values):
            for layer, tensor in enumerate(store):
                if tensor is not None:
                    store[layer] = tensor.index_select(0, indices.to(tensor.device))

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat every batch row ``repeats`` times in place: rows a, b become a, a, b, b (Chapter 9)."""
        for store in (self.keys, self.values):
            for layer, tensor in enumerate(store):
                if tensor is not None:
                    store[layer] = tensor.repeat_interleave(repeats, dim=0)

    def nbytes(self) -> int:
        """Bytes of the memory that holds the keys and values, each allocation counted once (Chapter 9)."""
        storages = {}
        for tensor in self.keys + self.values:
            if tensor is not None:
                storage = tensor.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())


class DynamicKVCache(KVCache):
    """A cache that grows with ``torch.cat`` at every step: exactly the positions seen (Chapter 9)."""

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Concatenate the new keys and values after the cached ones, along the positions (Chapter 9).

        The first keys are always copied into memory of their own, so the cache never keeps alive the
        larger projection output that they may be a view of. (``.contiguous()`` would not do: a view
        can be contiguous already, as GPT-2's keys are for a one-token prompt, and then it returns the
        view itself.)
        """
        old_keys, old_values = self.keys[layer], self.values[layer]
        if old_keys is None or old_values is None:
            new_keys = keys.clone(memory_format=torch.contiguous_format)
            new_values = values.clone(memory_format=torch.contiguous_format)
        else:
            new_keys, new_values = torch.cat([old_keys, keys], dim=2), torch.cat([old_values, values], dim=2)
        self.keys[layer], self.values[layer] = new_keys, new_values
        self._advance(layer, new_keys.shape[2])
        return new_keys, new_values


    def _keep_first(self, keep: int) -> None:
        """Slice every layer's keys and values to their first ``keep`` positions (Chapter 9)."""
        for store in (self.keys, self.values):
            for layer, tensor in enumerate(store):
                if tensor is not None:
                    store[layer] = tensor[:, :, :keep]


class StaticKVCache(KVCache):
    """A cache of ``max_length`` positions per layer, allocated once and written in place (Chapter 9).

    The buffers are ``[batch, kv_heads, max_length, head_dim]``, allocated with the batch, heads,
    dtype and device of the first keys stored. :meth:`update` returns views of the filled prefix
    only, ``[:, :, :length]``, not the whole buffer under a mask: a view copies nothing, and on the
    CPU attention's time grows with the keys it reads, used or masked, above a fixed cost per call
    (Chapter 9 times the lab's own :func:`inferlab.models.base.causal_attention`, every layer of the
    model it runs, over a filled prefix and over masked buffers of two larger sizes, and finds the
    cost per key held about the same as a cached step's growth per position). gpt-fast attends
    over the whole buffer because a compiled GPU graph wants the same shapes at every step; with
    ``torch.compile(dynamic=True)`` (Chapter 10) the growing prefix compiles once.
    """

    def __init__(self, layers: int, max_length: int) -> None:
        super().__init__(layers)
        if max_length < 1:
            raise ValueError(f"a static KV cache needs at least one position, got max_length={max_length}")
        self.max_length = max_length

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new keys and values at positions length .. length+seq-1; return the filled prefix (Chapter 9)."""
        start = self.length
        end = start + keys.shape[2]
        if end > self.max_length:
            raise CacheFull(f"the static KV cache holds {self.max_length} positions; {start} are filled and "
                            f"{keys.shape[2]} more do not fit: make the cache at least {end} long")
        key_buffer, value_buffer = self.keys[layer], self.values[layer]
        if key_buffer is None or value_buffer is None:
            batch, kv_heads, _, head_dim = keys.shape
            size = (batch, kv_heads, self.max_length, head_dim)
            key_buffer = torch.empty(size, dtype=keys.dtype, device=keys.device)
            value_buffer = torch.empty(size, dtype=values.dtype, device=values.device)
            self.keys[layer], self.values[layer] = key_buffer, value_buffer
        key_buffer[:, :, start:end] = keys
        value_buffer[:, :, start:end] = values
        self._advance(layer, end)
        return key_buffer[:, :, :end], value_buffer[:, :, :end]
