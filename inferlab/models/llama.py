"""The Llama family in plain PyTorch, loading the weights of transformers' ``LlamaForCausalLM`` (Chapter 4).

Rotary positions applied to queries and keys, RMSNorm, grouped-query attention, a SwiGLU MLP,
and an LM head that is tied to the token embedding when the config says so (SmolLM2 does).
Each operation runs inside a named ``record_function`` region, as in :mod:`inferlab.models.gpt2`.
"""
from __future__ import annotations

from typing import Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from inferlab.models.base import NativeCausalLM, causal_attention, copy_into, tied_head_check
from inferlab.models.kv_cache import KVCache
from inferlab.models.shape import ModelShape, UnsupportedModel


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, computed in float32: no mean subtracted, no bias (Chapter 4)."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise the last dimension (Chapter 4)."""
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of position x frequency, [*positions.shape, head_dim], in float32 (Chapter 4).

    Dimension pair (i, i + head_dim/2) turns by the angle position * theta^(-2i/head_dim):
    fast-turning pairs resolve nearby positions, slow ones distant positions. ``positions`` are
    absolute, [seq] or [batch, seq], so a sequence may start anywhere.
    """
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float() / head_dim)
    angles = positions.float().unsqueeze(-1) * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (first-half, second-half) pair of x [batch, heads, seq, head_dim] by its angle (Chapter 4)."""
    first, second = x.chunk(2, dim=-1)
    rotated_half = torch.cat([-second, first], dim=-1)
    return x * cos.to(x.dtype) + rotated_half * sin.to(x.dtype)


class LlamaBlock(nn.Module):
    """One Llama block: x + attn(rmsnorm(x)), then x + swiglu(rmsnorm(x)) (Chapter 4)."""

    def __init__(self, index: int, hidden: int, heads: int, kv_heads: int, head_dim: int, inner: int,
                 eps: float) -> None:
        super().__init__()
        self.index = index  # which layer of a KV cache this block extends (Chapter 9)
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.input_layernorm = RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)  # fewer K/V heads: GQA
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def attention(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                  cache: KVCache | None = None) -> torch.Tensor:
        """Grouped-query causal self-attention with rotary positions, over the cached keys too (Chapters 4, 9)."""
        batch, seq, _ = x.shape
        with record_function("attn_proj"):
            q = self.q_proj(x).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        with record_function("rope"):
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        key_positions = None
        if cache is not None:  # rotated keys are cached: a key's rotation depends on its own position only
            k, v = cache.update(k, v, self.index)
            key_positions = torch.arange(k.shape[2], device=k.device)
        y = causal_attention(q, k, v, positions, key_positions)
        with record_function("attn_proj"):
            return self.o_proj(y.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                cache: KVCache | None = None) -> torch.Tensor:
        """Apply the block to hidden states [batch, seq, hidden] at the given positions (Chapters 4, 9)."""
        with record_function("norm"):
            h = self.input_layernorm(x)
        h = self.attention(h, cos, sin, positions, cache)
        with record_function("residual"):
            x = x + h
        with record_function("norm"):
            h = self.post_attention_layernorm(x)
        with record_function("mlp"):
            h = self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))  # SwiGLU
        with record_function("residual"):
            return x + h


class Llama(NativeCausalLM):
    """A Llama-family model of a ``ModelShape``; load weights with :meth:`load_hf_state_dict` (Chapter 4)."""

    family = "llama"

    def __init__(self, shape: ModelShape) -> None:
        super().__init__(shape)
        self.embed_tokens = nn.Embedding(shape.vocab, shape.hidden)
        self.layers = nn.ModuleList(
            LlamaBlock(index, shape.hidden, shape.heads, shape.kv_heads, shape.head_dim, shape.intermediate,
                       shape.norm_eps)
            for index in range(shape.layers)
        )
        self.norm = RMSNorm(shape.hidden, shape.norm_eps)
        self.lm_head = None if shape.tied else nn.Linear(shape.hidden, shape.vocab, bias=False)

    def trunk(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Token embeddings, rotary tables for the positions, the blocks, the final RMSNorm (Chapters 4, 9)."""
        with record_function("embedding"):
            x = self.embed_tokens(input_ids)
        with record_function("rope"):
            cos, sin = rope_tables(positions, self.shape.head_dim, self.shape.rope_theta)
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)  # one table for every head
        for layer in self.layers:
            x = layer(x, cos, sin, positions, cache)
        with record_function("norm"):
            return self.norm(x)

    def lm_head_weight(self) -> torch.Tensor:
        """The LM head matrix, [vocab, hidden]: the embedding when tied (Chapter 4)."""
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def load_hf_state_dict(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load a ``LlamaForCausalLM`` state dict (keys ``model.*`` and ``lm_head.weight``) (Chapter 4)."""
        if self.shape.tied:
            tied_head_check(state_dict, "model.embed_tokens.weight")
        ours: dict[str, torch.Tensor] = {}
        for key, tensor in state_dict.items():
            if key == "lm_head.weight":
                if not self.shape.tied:
                    ours[key] = tensor
                continue
            if not key.startswith("model.") or key.endswith("rotary_emb.inv_freq"):
                if key.endswith("rotary_emb.inv_freq"):
                    continue  # recomputed from the shape
                raise UnsupportedModel(f"unexpected key {key!r} in a Llama state dict")
            name = key[len("model."):]
            for part in (".self_attn.", ".mlp."):
                name = name.replace(part, ".")
            ours[name] = tensor
        copy_into(self, ours)
