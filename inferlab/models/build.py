"""Build a native model from a transformers config and state dict, or from a transformers model (Chapter 4).

The builders live apart from :mod:`inferlab.models.base`, so that the base class knows neither
family and the imports run one way: shape, then base, then the families, then this module.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from inferlab.models.base import NativeCausalLM
from inferlab.models.gpt2 import GPT2
from inferlab.models.llama import Llama
from inferlab.models.shape import UnsupportedModel, shape_from_config

#: The native model of each :attr:`ModelShape.family`.
NATIVE: dict[str, type[NativeCausalLM]] = {"gpt2": GPT2, "llama": Llama}


def from_config(config: Any, state_dict: Mapping[str, torch.Tensor]) -> NativeCausalLM:
    """The native model of a transformers config, with the weights of its state dict (Chapter 4)."""
    shape = shape_from_config(config)
    if not state_dict:
        raise UnsupportedModel("the state dict is empty: there are no weights to load")
    first = next(iter(state_dict.values()))
    with torch.device("meta"):  # shapes only: every parameter is overwritten from the state dict
        native = NATIVE[shape.family](shape)
    native = native.to_empty(device=first.device).to(dtype=first.dtype)
    native.load_hf_state_dict(state_dict)
    return native.eval()


def native_from_hf(model: Any) -> NativeCausalLM:
    """A native copy of a transformers causal LM (GPT-2 or Llama family), same weights (Chapter 4)."""
    return from_config(model.config, model.state_dict())
