"""What every native model shares: checked input, full or last-position logits, greedy steps (Chapter 4).

A native model is written in plain PyTorch, takes a Hugging Face config and state dict, and
computes the same logits as the transformers model it came from. Subclasses provide ``trunk``
(embeddings, blocks, final norm) and the LM head weight; this class adds the rest.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn
from torch.profiler import record_function

from inferlab.errors import BadRequest, InferlabError


class UnsupportedModel(InferlabError, ValueError):
    """A config or state dict that the native implementations do not cover (Chapter 4)."""


def config_value(config: Any, *names: str, default: Any = None) -> Any:
    """The first of ``names`` that the config defines and is not None (Chapter 4)."""
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


class NativeCausalLM(nn.Module):
    """Base of the native GPT-2 and Llama models: ``forward`` and ``last_logits`` (Chapter 4)."""

    config: Any
    max_positions: int
    vocab_size: int

    def trunk(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Hidden states after the final norm, [batch, seq, hidden] (Chapter 4)."""
        raise NotImplementedError

    def lm_head_weight(self) -> torch.Tensor:
        """The [vocab, hidden] matrix of the LM head; the token embedding when tied (Chapter 4)."""
        raise NotImplementedError

    def check_ids(self, input_ids: Any) -> torch.Tensor:
        """Refuse ids that are not a non-empty [batch, seq] integer tensor the model can read (Chapter 4)."""
        if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int32, torch.int64):
            raise BadRequest("input_ids must be an integer torch.Tensor of shape [batch, seq]")
        if input_ids.dim() != 2 or input_ids.shape[0] == 0 or input_ids.shape[1] == 0:
            raise BadRequest(f"input_ids must have shape [batch, seq] with both > 0, got {tuple(input_ids.shape)}")
        if input_ids.shape[1] > self.max_positions:
            raise BadRequest(f"{input_ids.shape[1]} positions exceed the model's {self.max_positions}")
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= self.vocab_size:
            raise BadRequest(f"token ids must lie in [0, {self.vocab_size}), got {low}..{high}")
        return input_ids.to(self.lm_head_weight().device)

    def forward(self, input_ids: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """Logits [batch, seq, vocab]; with ``last_only``, [batch, vocab] of the last position (Chapter 4)."""
        hidden = self.trunk(self.check_ids(input_ids))
        if last_only:
            hidden = hidden[:, -1, :]  # the LM head then projects one row per sequence
        with record_function("lm_head"):
            return hidden @ self.lm_head_weight().T

    def last_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits of the last position only, [batch, vocab]: what generation needs (Chapter 4)."""
        return self(input_ids, last_only=True)

    @torch.inference_mode()
    def greedy(self, input_ids: torch.Tensor, new_tokens: int, eos_token_id: int | None = None) -> list[int]:
        """Greedy continuation of one sequence, no cache: the token ids it appends (Chapter 4)."""
        if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 1:
            raise BadRequest(f"new_tokens must be a whole number of at least 1, got {new_tokens!r}")
        ids = self.check_ids(input_ids)
        if ids.shape[0] != 1:
            raise BadRequest("greedy() continues one sequence; pass input_ids of shape [1, seq]")
        if ids.shape[1] + new_tokens > self.max_positions:
            raise BadRequest(f"{ids.shape[1]} prompt tokens + {new_tokens} new tokens exceed the model's "
                             f"{self.max_positions} positions")
        out: list[int] = []
        for _ in range(new_tokens):
            next_id = self.last_logits(ids).argmax(dim=-1)  # ties go to the smallest id, as in torch.argmax
            out.append(int(next_id))
            ids = torch.cat([ids, next_id.view(1, 1)], dim=1)
            if eos_token_id is not None and out[-1] == eos_token_id:
                break
        return out

    @classmethod
    def from_hf(cls, model: Any) -> "NativeCausalLM":
        """A native copy of a transformers causal LM (GPT-2 or Llama family), same weights (Chapter 4)."""
        return from_config(model.config, model.state_dict())


def from_config(config: Any, state_dict: Mapping[str, torch.Tensor]) -> NativeCausalLM:
    """Build the native model that ``config.model_type`` names and load the HF state dict (Chapter 4)."""
    from inferlab.models.gpt2 import GPT2
    from inferlab.models.llama import Llama

    kinds: dict[str, type] = {"gpt2": GPT2, "llama": Llama}
    model_type = getattr(config, "model_type", None)
    if model_type not in kinds:
        raise UnsupportedModel(f"no native implementation for model_type {model_type!r}; have {sorted(kinds)}")
    first = next(iter(state_dict.values()))
    with torch.device("meta"):  # shapes only: every parameter is overwritten from the state dict
        native = kinds[model_type](config)
    native = native.to_empty(device=first.device).to(dtype=first.dtype)
    native.load_hf_state_dict(state_dict)
    return native.eval()


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Scaled dot-product attention with a causal mask; K/V heads shared by groups of query heads (Chapter 4).

    q is [batch, heads, seq, head_dim]; k and v are [batch, kv_heads, seq, head_dim], where
    kv_heads divides heads (1 for multi-query, heads for multi-head, in between for grouped-query).
    The query heads of one group are folded into the rows of one matrix product, so the shared
    keys and values are used in place, never copied.
    """
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    if heads % kv_heads:
        raise UnsupportedModel(f"{heads} query heads cannot share {kv_heads} key/value heads evenly")
    with record_function("scores"):
        grouped = q.reshape(batch, kv_heads, heads // kv_heads * seq, head_dim)
        scores = (grouped @ k.transpose(-2, -1)).view(batch, heads, seq, seq)
    with record_function("softmax"):
        future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
        scores = (scores * head_dim**-0.5).masked_fill(future, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
    with record_function("context"):
        grouped = probs.reshape(batch, kv_heads, heads // kv_heads * seq, seq)
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
