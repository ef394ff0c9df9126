"""GPT-2 in plain PyTorch, loading the weights of transformers' ``GPT2LMHeadModel`` (Chapter 4).

Learned positions, pre-norm blocks with LayerNorm, multi-head causal attention, a GELU MLP four
times as wide as the model, and an LM head tied to the token embedding. Each operation runs
inside a named ``record_function`` region, so the profiler can attribute time to it.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from inferlab.models.base import NativeCausalLM, UnsupportedModel, causal_attention, config_value, copy_into, tied_head_check

GELUS = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}


class GPT2Block(nn.Module):
    """One pre-norm GPT-2 block: x + attn(ln_1(x)), then x + mlp(ln_2(x)) (Chapter 4)."""

    def __init__(self, hidden: int, heads: int, inner: int, eps: float, gelu: str) -> None:
        super().__init__()
        self.heads, self.gelu = heads, gelu
        self.ln_1 = nn.LayerNorm(hidden, eps=eps)
        self.c_attn = nn.Linear(hidden, 3 * hidden)  # query, key and value in one matrix
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps)
        self.c_fc = nn.Linear(hidden, inner)
        self.mlp_proj = nn.Linear(inner, hidden)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """Multi-head causal self-attention of GPT-2 (Chapter 4)."""
        batch, seq, hidden = x.shape
        with record_function("attn_proj"):
            q, k, v = self.c_attn(x).split(hidden, dim=-1)
            q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v)
        with record_function("attn_proj"):
            return self.c_proj(y.transpose(1, 2).reshape(batch, seq, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block to hidden states [batch, seq, hidden] (Chapter 4)."""
        with record_function("norm"):
            h = self.ln_1(x)
        h = self.attention(h)
        with record_function("residual"):
            x = x + h
        with record_function("norm"):
            h = self.ln_2(x)
        with record_function("mlp"):
            h = self.mlp_proj(F.gelu(self.c_fc(h), approximate=self.gelu))
        with record_function("residual"):
            return x + h


class GPT2(NativeCausalLM):
    """GPT-2 from a ``GPT2Config``; load weights with :meth:`load_hf_state_dict` (Chapter 4)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        act = config_value(config, "activation_function", default="gelu_new")
        if act not in GELUS:
            raise UnsupportedModel(f"GPT-2 activation {act!r} is not implemented; have {sorted(GELUS)}")
        if getattr(config, "scale_attn_by_inverse_layer_idx", False) or not getattr(config, "scale_attn_weights", True):
            raise UnsupportedModel("only GPT-2's standard 1/sqrt(head_dim) attention scaling is implemented")
        hidden, heads = config.n_embd, config.n_head
        if hidden % heads:
            raise UnsupportedModel(f"hidden size {hidden} is not a multiple of {heads} heads")
        self.config = config
        self.max_positions, self.vocab_size = config.n_positions, config.vocab_size
        self.wte = nn.Embedding(config.vocab_size, hidden)
        self.wpe = nn.Embedding(config.n_positions, hidden)
        inner = config_value(config, "n_inner", default=4 * hidden)
        self.blocks = nn.ModuleList(
            GPT2Block(hidden, heads, inner, config.layer_norm_epsilon, GELUS[act]) for _ in range(config.n_layer)
        )
        self.ln_f = nn.LayerNorm(hidden, eps=config.layer_norm_epsilon)

    def trunk(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Token plus learned position embeddings, the blocks, the final LayerNorm (Chapter 4)."""
        with record_function("embedding"):
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
            x = self.wte(input_ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
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
