"""One description of a model's sizes, and the one reader of a transformers config (Chapters 2 and 4).

``ModelShape`` holds every number of a GPT-2 or Llama-family decoder that decides its parameters,
its memory and its cost (Chapter 2), and the few constants its native forward pass needs (Chapter 4).
``shape_from_config`` is the only code in the lab that reads those numbers from a config; the sizing
formulas, the cost model and the native models all read the shape it returns, and it refuses a
config that none of them covers instead of sizing or running it wrongly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferlab.errors import InferlabError

#: The MLP activations each family may use, the family's default first.
ACTIVATIONS: dict[str, tuple[str, ...]] = {"gpt2": ("gelu_new", "gelu_pytorch_tanh", "gelu"), "llama": ("silu",)}


class UnsupportedModel(InferlabError, ValueError):
    """A config, shape or state dict that the lab's formulas and native models do not cover (Chapter 2)."""


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only transformer that decide its size, its cost and its forward pass (Chapter 2).

    ``family`` is ``"gpt2"`` (learned positions, biases, LayerNorm, a 2-matrix GELU MLP) or
    ``"llama"`` (rotary positions, no biases, RMSNorm, a gated 3-matrix MLP, optionally fewer KV
    heads). ``context`` is the number of positions the model can read; ``activation`` left empty
    means the family's default.
    """

    family: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    context: int
    tied: bool
    norm_eps: float = 1e-5
    activation: str = ""
    rope_theta: float = 10_000.0
    name: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        label = self.name or "shape"
        if self.family not in ACTIVATIONS:
            raise UnsupportedModel(f"{label}: unknown family {self.family!r}; use 'gpt2' or 'llama'")
        sizes = ("vocab", "hidden", "layers", "heads", "kv_heads", "head_dim", "intermediate", "context")
        bad = [k for k in sizes if not isinstance(getattr(self, k), int) or getattr(self, k) <= 0]
        if bad:
            raise UnsupportedModel(f"{label}: sizes must be positive integers: {', '.join(bad)}")
        if self.heads % self.kv_heads:
            raise UnsupportedModel(f"{label}: {self.heads} query heads cannot share {self.kv_heads} "
                                   "key/value heads evenly")
        if self.family == "gpt2" and (self.kv_heads != self.heads or self.heads * self.head_dim != self.hidden):
            raise UnsupportedModel(f"{label}: GPT-2 has as many KV heads as query heads and hidden = heads x "
                                   f"head_dim; got hidden={self.hidden}, heads={self.heads}, kv_heads="
                                   f"{self.kv_heads}, head_dim={self.head_dim} (grouped-query attention is "
                                   "'llama' only)")
        if self.family == "llama" and self.head_dim % 2:
            raise UnsupportedModel(f"{label}: rotary positions turn pairs of dimensions; head_dim "
                                   f"{self.head_dim} is odd")
        if not self.activation:
            object.__setattr__(self, "activation", ACTIVATIONS[self.family][0])
        if self.activation not in ACTIVATIONS[self.family]:
            raise UnsupportedModel(f"{label}: {self.family} activation {self.activation!r} is not implemented; "
                                   f"have {', '.join(ACTIVATIONS[self.family])}")

    @property
    def positions(self) -> int:
        """Rows of the learned position table: the context for GPT-2, none for rotary Llama (Chapter 2)."""
        return self.context if self.family == "gpt2" else 0


def _rope_theta(config: Any) -> float:
    """The RoPE base of a Llama config (``rope_parameters``, or the older ``rope_theta``) (Chapter 4)."""
    params = getattr(config, "rope_parameters", None) or {}
    scaling = getattr(config, "rope_scaling", None) or {}
    kind = params.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind != "default":
        raise UnsupportedModel(f"RoPE variant {kind!r} is not implemented; only the original (default) one is")
    return float(params.get("rope_theta", getattr(config, "rope_theta", None) or 10_000.0))


def _gpt2_shape(config: Any, name: str) -> ModelShape:
    """The shape of a ``GPT2Config``, refusing GPT-2 variants that scale attention differently (Chapter 2)."""
    if getattr(config, "scale_attn_by_inverse_layer_idx", False) or not getattr(config, "scale_attn_weights", True):
        raise UnsupportedModel("only GPT-2's standard 1/sqrt(head_dim) attention scaling is implemented")
    hidden, heads = config.n_embd, config.n_head
    if hidden % heads:
        raise UnsupportedModel(f"GPT-2 hidden size {hidden} is not a multiple of its {heads} heads")
    return ModelShape("gpt2", config.vocab_size, hidden, config.n_layer, heads, heads, hidden // heads,
                      config.n_inner or 4 * hidden, config.n_positions, bool(config.tie_word_embeddings),
                      norm_eps=config.layer_norm_epsilon, activation=config.activation_function,
                      name=name or "gpt2-config", source="config")


def _llama_shape(config: Any, name: str) -> ModelShape:
    """The shape of a ``LlamaConfig``, head_dim from the config, refusing biases (Chapter 2)."""
    biased = [k for k in ("attention_bias", "mlp_bias") if getattr(config, k, False)]
    if biased:
        raise UnsupportedModel(f"{', '.join(biased)}=True adds bias vectors that neither the Llama formulas nor "
                               "the native Llama cover; only bias-free Llama configs are supported")
    hidden, heads = config.hidden_size, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None)
    if head_dim is None:
        if hidden % heads:
            raise UnsupportedModel(f"Llama hidden size {hidden} is not a multiple of its {heads} heads, "
                                   "and the config names no head_dim")
        head_dim = hidden // heads
    return ModelShape("llama", config.vocab_size, hidden, config.num_hidden_layers, heads,
                      getattr(config, "num_key_value_heads", None) or heads, head_dim, config.intermediate_size,
                      config.max_position_embeddings, bool(config.tie_word_embeddings),
                      norm_eps=config.rms_norm_eps, activation=config.hidden_act, rope_theta=_rope_theta(config),
                      name=name or "llama-config", source="config")


def shape_from_config(config: Any, name: str = "") -> ModelShape:
    """Read the ``ModelShape`` of a transformers GPT-2 or Llama config; refuse any other (Chapter 2)."""
    kind = getattr(config, "model_type", None)
    if kind == "gpt2":
        return _gpt2_shape(config, name)
    if kind == "llama":
        return _llama_shape(config, name)
    raise UnsupportedModel(f"no formulas or native model for model_type {kind!r}; have gpt2 and llama")
