"""Native GPT-2 and Llama forward passes in plain PyTorch, and what each operation costs (Chapter 4).

    from inferlab.models import NativeCausalLM
    native = NativeCausalLM.from_hf(loaded.model)     # same weights as the transformers model
    native(ids)              # logits [batch, seq, vocab]
    native.last_logits(ids)  # logits [batch, vocab] of the last position only
"""
from inferlab.models.gpt2 import GPT2
from inferlab.models.llama import Llama
from inferlab.models.base import NativeCausalLM, UnsupportedModel, causal_attention, from_config

__all__ = ["GPT2", "Llama", "NativeCausalLM", "UnsupportedModel", "causal_attention", "from_config"]
