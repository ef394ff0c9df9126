"""Native GPT-2 and Llama forward passes in plain PyTorch, and the one reader of a model's shape (Chapters 2, 4, 9, 10).

    from inferlab.models import native_from_hf
    native = native_from_hf(loaded.model)       # same weights as the transformers model
    native(ids)                                 # logits [batch, seq, vocab]
    native(ids, positions=torch.arange(5, 5 + ids.shape[1]))  # the same ids at positions 5, 6, ...
    native(ids, last_only=True)                 # logits [batch, 1, vocab]: the last position only
    native.shape                                # the ModelShape that sizing and the cost model read
    cache = native.new_cache()                  # a KV cache (Chapter 9): feed the prompt, then one id per call
    native(ids, cache=cache); native(next_id, cache=cache)
    fast = decode_optimised(native)             # fused, [in, out] weights, same logits (Chapter 10)
"""
from inferlab.models.base import NativeCausalLM, causal_attention
from inferlab.models.build import from_config, native_from_hf
from inferlab.models.decode import compile_decode, decode_optimised
from inferlab.models.gpt2 import GPT2
from inferlab.models.kv_cache import CacheFull, DynamicKVCache, KVCache, StaticKVCache
from inferlab.models.llama import Llama
from inferlab.models.shape import ModelShape, UnsupportedModel, shape_from_config

__all__ = ["GPT2", "CacheFull", "DynamicKVCache", "KVCache", "Llama", "ModelShape", "NativeCausalLM", "StaticKVCache",
           "UnsupportedModel", "causal_attention", "compile_decode", "decode_optimised", "from_config",
           "native_from_hf", "shape_from_config"]
