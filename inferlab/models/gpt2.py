"""GPT-2 in plain PyTorch, loading the weights of transformers' ``GPT2LMHeadModel`` (Chapter 4).

Learned positions, pre-norm blocks with LayerNorm, multi-head causal attention, a GELU MLP four
times as wide as the model, and an LM head tied to the token embedding. Each operation runs
inside a named ``record_function`` region, so the profiler can attribute time to it.
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

#: transformers' GPT-2 activation names, as the ``approximate`` argument of ``F.gelu``.
GELUS = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}


class GPT2Block(nn.Module):
    """One pre-norm GPT-2 block: x + attn(ln_1(x)), then x + mlp(ln_2(x)) (Chapter 4)."""

    def __init__(self, index: int, hidden: int, heads: int, inner: int, eps: float, gelu: str) -> None:
        super().__init__()
        self.index = index  # which layer of a KV cache this block extends (Chapter 9)
        self.heads, self.gelu = heads, gelu
        self.ln_1 = nn.LayerNorm(hidden, eps=eps)
        self.c_attn = nn.Linear(hidden, 3 * hidden)  # query, key and value in one matrix
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps)
        self.c_fc = nn.Linear(hidden, inner)
        self.mlp_proj = nn.Linear(inner, hidden)

    def attention(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Multi-head causal self-attention of GPT-2, over the cached keys too (Chapters 4, 9)."""
        batch, seq, hidden = x.shape
        with record_function("attn_proj"):
            q, k, v = self.c_attn(x).split(hidden, dim=-1)
            q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        key_positions = None
        if cache is not None:
            k, v = cache.update(k, v, self.index)
            key_positions = torch.arange(k.shape[2], device=k.device)
        y = causal_attention(q, k, v, positions, key_positions)
        with record_function("attn_proj"):
            return self.c_proj(y.transpose(1, 2).reshape(batch, seq, hidden))

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Apply the block to hidden states [batch, seq, hidden] at the given positions (Chapters 4, 9)."""
        with record_function("norm"):
            h = self.ln_1(x)
        h = self.attention(h, positions, cache)
        with record_function("residual"):
            x = x + h
        with record_function("norm"):
            h = self.ln_2(x)
        with record_function("mlp"):
            h = self.mlp_proj(F.gelu(self.c_fc(h), approximate=self.gelu))
        with record_function("residual"):
            return x + h


class GPT2(NativeCausalLM):
    """GPT-2 of a ``ModelShape``; load weights with :meth:`load_hf_state_dict` (Chapter 4)."""

    family = "gpt2"

    def __init__(self, shape: ModelShape) -> None:
        super().__init__(shape)
        if not shape.tied:
            raise UnsupportedModel("the native GPT-2 ties its LM head to the token embedding, as GPT-2 does")
        self.wte = nn.Embedding(shape.vocab, shape.hidden)
        self.wpe = nn.Embedding(shape.positions, shape.hidden)
        self.blocks = nn.ModuleList(
            GPT2Block(index, shape.hidden, shape.heads, shape.intermediate, shape.norm_eps, GELUS[shape.activation])
            for index in range(shape.layers)
        )
        self.ln_f = nn.LayerNorm(shape.hidden, eps=shape.norm_eps)

    def trunk(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Token plus learned position embeddings, the blocks, the final LayerNorm (Chapters 4, 9)."""
        with record_function("embedding"):
            x = self.wte(input_ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x, positions, cache)
        with record_function("norm"):
            return self.ln_f(x)

    def lm_head_weight(self) -> torch.Tensor:
        """GPT-2's LM head is the token embedding matrix, [vocab, hidden] (Chapter 4)."""
        return self.wte.weight

    def load_hf_state_dict(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load a ``GPT2LMHeadModel`` state dict; its Conv1D weights are stored [in, out] (Chapter 4)."""
        tied_head_check(state_dict, "transformer.wte.weight")
        renames = {"attn.c_attn": "c_attn", "attn.c_proj": "c_proj", "mlp.c_fc": "c_fc", "mlp.c_proj": "mlp_proj"}
        ours: dict[str, torch.Tensor] = {}
        for key, tensor in state_dict.items():
            if key == "lm_head.weight" or key.endswith((".attn.bias", ".attn.masked_bias")):
                continue  # the tied head (checked above) and old causal-mask buffers
            if not key.startswith("transformer."):
                raise UnsupportedModel(f"unexpected key {key!r} in a GPT-2 state dict")
            name = key[len("transformer."):].replace("h.", "blocks.", 1) if key.startswith("transformer.h.") \
                else key[len("transformer."):]
            for old, new in renames.items():
                if f".{old}." in name:
                    name = name.replace(f".{old}.", f".{new}.")
                    if name.endswith(".weight"):
                        tensor = tensor.T  # Conv1D keeps [in, out]; nn.Linear wants [out, in]
            ours[name] = tensor
        copy_into(self, ours)
