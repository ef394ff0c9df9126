"""Native GPT-2 and Llama forward passes in plain PyTorch, and the one reader of a model's shape (Chapters 2 and 4).

    from inferlab.models import native_from_hf
    native = native_from_hf(loaded.model)       # same weights as the transformers model
    native(ids)                                 # logits [batch, seq, vocab]
    native(ids, positions=torch.arange(5, 5 + ids.shape[1]))  # the same ids at positions 5, 6, ...
    native(ids, last_only=True)                 # logits [batch, 1, vocab]: the last position only
    native.shape                                # the ModelShape that sizing and the cost model read
"""
from inferlab.models.base import NativeCausalLM, causal_attention
from inferlab.models.build import from_config, native_from_hf
from inferlab.models.gpt2 import GPT2
from inferlab.models.llama import Llama
from inferlab.models.shape import ModelShape, UnsupportedModel, shape_from_config

__all__ = ["GPT2", "Llama", "ModelShape", "NativeCausalLM", "UnsupportedModel", "causal_attention", "from_config",
           "native_from_hf", "shape_from_config"]
