"""Decode-optimised copies of the native models: same weights, same seam, fewer bytes wasted per token (Chapter 10).

At batch 1 a decode step multiplies one row by every weight matrix, so its time is set by how fast
the weights stream from memory, plus whatever the step spends around the products. The plain native
models of Chapter 4 are written to be read and profiled; these copies are written to be fast, one
measured step at a time (:mod:`inferlab.bench.decode` times each):

- **fused projections**: one q+k+v matrix instead of three, one gate-and-up matrix instead of two
  (GPT-2 already fuses q, k and v): fewer, larger products;
- **fewer small operations**: rotary cos/sin tables computed once and indexed by position, one
  rotation for queries and keys together, ``torch.rms_norm``/``layer_norm``, one attention kernel
  for a single new position, residual additions in place, no profiler regions;
- **weight layout** (:data:`LAYOUTS`): ``"out_in"`` keeps ``nn.Linear``'s [out, in] and calls
  ``F.linear``; ``"in_out"`` stores [in, out] and multiplies ``x @ W``, which MKL streams faster
  for one row on this book's CPU; ``"streamed"`` keeps [out, in] and writes a one-row product as
  multiply-and-sum, which is slow eagerly but which ``torch.compile`` turns into one vectorised
  pass over the weight (:func:`compile_decode`). The tied LM head is stored once, and the token
  embedding reads it.

:func:`decode_optimised` builds one from a plain native model. It computes the same logits as the
plain model within float32 rounding (the products sum in another order), and with a KV cache
(:mod:`inferlab.models.kv_cache`) feeds one position per step through the engine's one loop.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from inferlab.models.base import NativeCausalLM, cache_positions, causal_attention
from inferlab.models.gpt2 import GPT2
from inferlab.models.kv_cache import KVCache, StaticKVCache
from inferlab.models.llama import Llama, rope_tables
from inferlab.models.shape import UnsupportedModel

Project = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def project_in_out(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x @ W for a weight stored [in, out] (Chapter 10)."""
    return x @ weight


def project_out_in(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x @ W.T for a weight stored [out, in], as ``nn.Linear`` stores it (Chapter 10)."""
    return F.linear(x, weight)


def project_streamed(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """One row: sum(x * W, -1) over W [out, in], one pass once compiled; more rows: ``F.linear`` (Chapter 10).

    Inductor compiles a matrix product into a call to the BLAS library, but a multiply followed by
    a sum into a loop of its own, vectorised along each contiguous row of W, that reads every weight
    once and keeps nothing in memory between the multiply and the sum. Eagerly, the multiply would
    write the whole [out, in] product first: this projection is for a compiled model only.
    """
    if x.numel() != x.shape[-1]:
        return F.linear(x, weight)
    return (x.unsqueeze(-2) * weight).sum(-1)


#: How each layout stores a weight ([in, out] when transposed) and multiplies by it.
LAYOUTS: dict[str, tuple[bool, Project]] = {"out_in": (False, project_out_in), "in_out": (True, project_in_out),
                                             "streamed": (False, project_streamed)}


def stored(weight: torch.Tensor, transposed: bool) -> nn.Parameter:
    """A copy of an [out, in] weight in the chosen layout: [in, out] when ``transposed`` (Chapter 10)."""
    return nn.Parameter((weight.T if transposed else weight).clone(memory_format=torch.contiguous_format),
                        requires_grad=False)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Attention of new queries [batch, heads, seq, head_dim] over the cached keys and values (Chapter 10).

    A single new position may see every cached key: no mask, and the query heads of a group become
    the rows of one ``scaled_dot_product_attention`` call over their shared keys. Several new
    positions (a prefill) go through :func:`causal_attention`, masked by position.
    """
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    if seq > 1:
        return causal_attention(q, k, v, positions, torch.arange(k.shape[2], device=k.device))
    grouped = q.reshape(batch, kv_heads, heads // kv_heads, head_dim)
    return F.scaled_dot_product_attention(grouped, k, v).view(batch, heads, 1, head_dim)


def attend_with(cache: KVCache | None, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                positions: torch.Tensor) -> torch.Tensor:
    """A block's attention in an eager forward: over the cache after storing k and v, or causal without one (Chapter 10)."""
    if cache is None:
        return causal_attention(q, k, v, positions)
    k, v = cache.update(k, v, layer)
    return attend(q, k, v, positions)


def attend_cached(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                  length: int) -> torch.Tensor:
    """Write one position's k and v into a static cache's buffers at ``length``; attend over 0 .. length (Chapter 10).

    What :meth:`~inferlab.models.kv_cache.StaticKVCache.update` and :func:`attend` do together, on
    the buffers themselves, so that a compiled step can write them in place.
    """
    keys[:, :, length:length + 1] = k
    values[:, :, length:length + 1] = v
    return attend(q, keys[:, :, :length + 1], values[:, :, :length + 1], None)  # type: ignore[arg-type]


class DecodeLlamaBlock(nn.Module):
    """A Llama block with fused q/k/v and gate/up matrices (Chapter 10)."""

    def __init__(self, block: nn.Module, layout: str) -> None:
        super().__init__()
        transposed, self.project = LAYOUTS[layout]
        self.index, self.heads, self.kv_heads, self.head_dim = block.index, block.heads, block.kv_heads, block.head_dim
        self.eps = block.input_layernorm.eps
        self.input_norm = nn.Parameter(block.input_layernorm.weight.detach().clone(), requires_grad=False)
        self.post_norm = nn.Parameter(block.post_attention_layernorm.weight.detach().clone(), requires_grad=False)
        self.qkv = stored(torch.cat([block.q_proj.weight, block.k_proj.weight, block.v_proj.weight]).detach(), transposed)
        self.o = stored(block.o_proj.weight.detach(), transposed)
        self.gate_up = stored(torch.cat([block.gate_proj.weight, block.up_proj.weight]).detach(), transposed)
        self.down = stored(block.down_proj.weight.detach(), transposed)

    def attention_inputs(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Rotated queries and keys, and values, [batch, heads, seq, head_dim], from x [batch, seq, hidden] (Chapter 10)."""
        batch, seq, hidden = x.shape
        heads, kv_heads, head_dim = self.heads, self.kv_heads, self.head_dim
        h = torch.rms_norm(x, (hidden,), self.input_norm, self.eps)
        qkv = self.project(h, self.qkv).view(batch, seq, heads + 2 * kv_heads, head_dim).transpose(1, 2)
        qk = qkv[:, :heads + kv_heads]  # queries and keys turn by the same angles: one rotation for both
        first, second = qk.chunk(2, dim=-1)
        qk = qk * cos + torch.cat([-second, first], dim=-1) * sin
        return qk[:, :heads], qk[:, heads:], qkv[:, heads + kv_heads:]

    def after_attention(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x + the output projection of attention y [batch, heads, seq, head_dim], then + SwiGLU (Chapter 10)."""
        batch, seq, hidden = x.shape
        x = x + self.project(y.transpose(1, 2).reshape(batch, seq, -1), self.o)
        h = torch.rms_norm(x, (hidden,), self.post_norm, self.eps)
        gate, up = self.project(h, self.gate_up).chunk(2, dim=-1)
        return x.add_(self.project(F.silu(gate).mul_(up), self.down))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                cache: KVCache | None) -> torch.Tensor:
        """x + attention, then + SwiGLU, on hidden states [batch, seq, hidden] (Chapter 10)."""
        q, k, v = self.attention_inputs(x, cos, sin)
        return self.after_attention(x, attend_with(cache, self.index, q, k, v, positions))

    def step(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
             length: int) -> torch.Tensor:
        """One new position [batch, 1, hidden] through the block, its key and value written at ``length`` (Chapter 10).

        ``keys`` and ``values`` are this layer's buffers of a static cache, [batch, kv_heads,
        max_length, head_dim]. The step reads nothing that differs between layers except tensors
        (not ``self.index``), so one compilation of it serves every layer: :func:`compile_decode`.
        """
        q, k, v = self.attention_inputs(x, cos, sin)
        return self.after_attention(x, attend_cached(q, k, v, keys, values, length))


class DecodeGPT2Block(nn.Module):
    """A GPT-2 block; its biases are added after the layout's product (Chapter 10)."""

    def __init__(self, block: nn.Module, layout: str) -> None:
        super().__init__()
        transposed, self.project = LAYOUTS[layout]
        self.index, self.heads, self.gelu = block.index, block.heads, block.gelu
        self.eps = block.ln_1.eps
        for name in ("ln_1", "ln_2"):
            norm = getattr(block, name)
            setattr(self, f"{name}_weight", nn.Parameter(norm.weight.detach().clone(), requires_grad=False))
            setattr(self, f"{name}_bias", nn.Parameter(norm.bias.detach().clone(), requires_grad=False))
        for name in ("c_attn", "c_proj", "c_fc", "mlp_proj"):
            linear = getattr(block, name)
            setattr(self, name, stored(linear.weight.detach(), transposed))
            setattr(self, f"{name}_bias", nn.Parameter(linear.bias.detach().clone(), requires_grad=False))

    def affine(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """x W + b, for x [batch, seq, in] (Chapter 10)."""
        return self.project(x, getattr(self, name)).add_(getattr(self, f"{name}_bias"))

    def attention_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Queries, keys, values [batch, heads, seq, head_dim] from hidden states [batch, seq, hidden] (Chapter 10)."""
        batch, seq, hidden = x.shape
        h = F.layer_norm(x, (hidden,), self.ln_1_weight, self.ln_1_bias, self.eps)
        qkv = self.affine(h, "c_attn").view(batch, seq, 3 * self.heads, hidden // self.heads).transpose(1, 2)
        return qkv.split(self.heads, dim=1)

    def after_attention(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x + the output projection of attention y [batch, heads, seq, head_dim], then + MLP (Chapter 10)."""
        batch, seq, hidden = x.shape
        x = x + self.affine(y.transpose(1, 2).reshape(batch, seq, hidden), "c_proj")
        h = F.layer_norm(x, (hidden,), self.ln_2_weight, self.ln_2_bias, self.eps)
        return x.add_(self.affine(F.gelu(self.affine(h, "c_fc"), approximate=self.gelu), "mlp_proj"))

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """x + attention, then + MLP, on hidden states [batch, seq, hidden] (Chapter 10)."""
        q, k, v = self.attention_inputs(x)
        return self.after_attention(x, attend_with(cache, self.index, q, k, v, positions))

    def step(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, length: int) -> torch.Tensor:
        """One new position through the block, its key and value written at ``length``: as Llama's (Chapter 10)."""
        q, k, v = self.attention_inputs(x)
        return self.after_attention(x, attend_cached(q, k, v, keys, values, length))


class DecodeModel(NativeCausalLM):
    """What both decode-optimised families share: the LM head in the chosen layout, the forward (Chapter 10).

    ``forward`` checks the positions, then calls ``self.compute``: :meth:`logits` until
    :func:`compile_decode` swaps in :meth:`cached_step` for single-position steps.
    """

    def __init__(self, native: NativeCausalLM, layout: str) -> None:
        super().__init__(native.shape)
        if layout not in LAYOUTS:
            raise UnsupportedModel(f"unknown weight layout {layout!r}; have {', '.join(LAYOUTS)}")
        self.layout = layout
        self.transposed, self.project = LAYOUTS[layout]
        self.head = stored(native.lm_head_weight().detach(), self.transposed)
        self.compute: Callable[..., torch.Tensor] = self.logits
        #: What :meth:`cached_step` calls: the blocks' ``step`` (set by each family), and the final norm
        #: with the LM head, as plain functions taking the block or the model first, which
        #: :func:`compile_decode` compiles: one compiled block step then serves every block.
        self.block_step: Callable[..., torch.Tensor]
        self.head_step: Callable[..., torch.Tensor] = type(self).head_logits

    def decode_blocks(self) -> nn.ModuleList:
        """The model's blocks, in order (Chapter 10)."""
        raise NotImplementedError

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        """The norm after the last block (Chapter 10)."""
        raise NotImplementedError

    def step_inputs(self, input_ids: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Hidden states of new ids, and what every block's ``step`` takes besides them (Chapter 10)."""
        raise NotImplementedError

    def embed(self, input_ids: torch.Tensor, table: nn.Parameter | None) -> torch.Tensor:
        """Token embeddings [batch, seq, hidden], from the head's matrix when tied (Chapter 10)."""
        if table is not None:
            return F.embedding(input_ids, table)
        if isinstance(self.head, nn.Module):  # a quantised head (Chapter 12) reads its rows back itself
            return self.head.rows(input_ids)
        if self.transposed:
            return self.head.index_select(1, input_ids.reshape(-1)).T.reshape(*input_ids.shape, -1)
        return F.embedding(input_ids, self.head)

    def lm_head_weight(self) -> torch.Tensor:
        """The LM head as [vocab, hidden], whatever the stored layout (Chapter 10)."""
        if isinstance(self.head, nn.Module):  # a quantised head (Chapter 12)
            return self.head.dequantize()
        return self.head.T if self.transposed else self.head

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The final norm and the LM head, for hidden states [batch, seq, hidden] (Chapter 10)."""
        return self.project(self.final_norm(hidden), self.head)

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None,
               last_only: bool) -> torch.Tensor:
        """The trunk and the LM head, for checked positions (Chapter 10)."""
        hidden = self.trunk(input_ids, positions, cache)
        return self.project(hidden[:, -1:] if last_only else hidden, self.head)

    def cached_step(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None,
                    last_only: bool) -> torch.Tensor:
        """One new position per row, block by block on a static cache's buffers (Chapter 10).

        The same arithmetic as :meth:`logits`, cut where a compiler wants it: every block's step is
        one call of ``self.block_step`` with that block's weights and buffers, so one compilation
        serves all the blocks, and the cached length is an argument, not a shape baked into the code.
        Any other cache (none, a dynamic one, a static one not yet filled by a prefill, or one that
        is full) takes :meth:`logits`, eagerly.
        """
        if not isinstance(cache, StaticKVCache) or cache.keys[0] is None or cache.length >= cache.max_length:
            return self.logits(input_ids, positions, cache, last_only)
        length = cache.length
        x, extra = self.step_inputs(input_ids, positions)
        for block, keys, values in zip(self.decode_blocks(), cache.keys, cache.values):
            x = self.block_step(block, x, *extra, keys, values, length)
        cache.length = length + 1
        return self.head_step(self, x)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor | None = None, cache: KVCache | None = None,
                last_only: bool = False) -> torch.Tensor:
        """Logits [batch, seq, vocab], or [batch, 1, vocab] with ``last_only``; no profiler regions (Chapter 10)."""
        positions = cache_positions(input_ids, positions, cache)
        if input_ids.shape[1] > 1:  # a prefill: many rows, where the BLAS library's matrix product is at its best
            return self.logits(input_ids, positions, cache, last_only)
        return self.compute(input_ids, positions, cache, last_only)


class DecodeLlama(DecodeModel):
    """A decode-optimised copy of a native :class:`~inferlab.models.llama.Llama` (Chapter 10)."""

    family = "llama"

    def __init__(self, native: Llama, layout: str = "in_out") -> None:
        super().__init__(native, layout)
        shape = native.shape
        self.embed_tokens = None if shape.tied else stored(native.embed_tokens.weight.detach(), False)
        self.layers = nn.ModuleList(DecodeLlamaBlock(block, layout) for block in native.layers)
        self.block_step = DecodeLlamaBlock.step
        self.norm = nn.Parameter(native.norm.weight.detach().clone(), requires_grad=False)
        cos, sin = rope_tables(torch.arange(shape.context, device=self.head.device), shape.head_dim, shape.rope_theta)
        self.register_buffer("cos", cos.to(self.head.dtype), persistent=False)  # [context, head_dim], once
        self.register_buffer("sin", sin.to(self.head.dtype), persistent=False)

    def decode_blocks(self) -> nn.ModuleList:
        return self.layers

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        return torch.rms_norm(x, (x.shape[-1],), self.norm, self.shape.norm_eps)

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotary tables at the positions, [batch, 1, seq, head_dim] each (Chapter 10)."""
        return self.cos[positions].unsqueeze(-3), self.sin[positions].unsqueeze(-3)

    def step_inputs(self, input_ids: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        return self.embed(input_ids, self.embed_tokens), self.rotary(positions)

    def trunk(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Embeddings, the blocks with rotary tables looked up by position, the final norm (Chapter 10)."""
        x = self.embed(input_ids, self.embed_tokens)
        cos, sin = self.rotary(positions)
        for layer in self.layers:
            x = layer(x, cos, sin, positions, cache)
        return self.final_norm(x)


class DecodeGPT2(DecodeModel):
    """A decode-optimised copy of a native :class:`~inferlab.models.gpt2.GPT2` (Chapter 10)."""

    family = "gpt2"

    def __init__(self, native: GPT2, layout: str = "in_out") -> None:
        super().__init__(native, layout)
        self.wpe = nn.Parameter(native.wpe.weight.detach().clone(), requires_grad=False)
        self.blocks = nn.ModuleList(DecodeGPT2Block(block, layout) for block in native.blocks)
        self.block_step = DecodeGPT2Block.step
        self.ln_f_weight = nn.Parameter(native.ln_f.weight.detach().clone(), requires_grad=False)
        self.ln_f_bias = nn.Parameter(native.ln_f.bias.detach().clone(), requires_grad=False)

    def decode_blocks(self) -> nn.ModuleList:
        return self.blocks

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.ln_f_weight, self.ln_f_bias, self.shape.norm_eps)

    def step_inputs(self, input_ids: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        return self.embed(input_ids, None) + F.embedding(positions, self.wpe), ()

    def trunk(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Token plus position embeddings, the blocks, the final LayerNorm (Chapter 10)."""
        x, _ = self.step_inputs(input_ids, positions)
        for block in self.blocks:
            x = block(x, positions, cache)
        return self.final_norm(x)


def decode_optimised(native: NativeCausalLM, layout: str = "in_out") -> DecodeModel:
    """The decode-optimised copy of a native GPT-2 or Llama, its weights in one of :data:`LAYOUTS` (Chapter 10)."""
    if isinstance(native, Llama):
        return DecodeLlama(native, layout).eval()
    if isinstance(native, GPT2):
        return DecodeGPT2(native, layout).eval()
    raise UnsupportedModel(f"no decode-optimised copy of {type(native).__name__}; have GPT2 and Llama")


#: Inductor's options for the decode step: a loop is split across threads only when each thread gets at
#: least this many elements (inductor's default is 512). A decode step's norms, rotations and
#: activations touch a few thousand values: split across threads, each costs a fork and a join of the
#: OpenMP team, which on the book's 2-vCPU machines took longer than the work. The one-row products
#: (hundreds of thousands of weights each) stay parallel.
COMPILE_OPTIONS = {"cpp.min_chunk_size": 16384}


def compile_decode(model: DecodeModel) -> DecodeModel:
    """Compile a model's single-position step with ``torch.compile`` (inductor), in place; returns the model (Chapter 10).

    Compiled: the step of ONE block, as a function of the block's weights, its cache buffers and
    the cached length, and the final norm with the LM head; :meth:`DecodeModel.cached_step` calls
    them from an eager loop over the blocks. Every block has the same shapes, so the block step
    compiles once and serves all of them, and with ``dynamic=True`` the cached length and the
    cache's size are symbols, so it serves every position of every request: two small
    compilations, where compiling the whole step would unroll every block into one large program
    (seconds instead of a minute, cold). A prefill runs eagerly, as does any step without a filled
    static cache (``kv_cache="static"`` in the engine). Any layout compiles: with ``"streamed"`` the
    products become inductor's own loops; with ``"in_out"`` or ``"out_in"`` they stay calls into the
    BLAS library and inductor fuses the small operations between them (:data:`COMPILE_OPTIONS`).
    Which is faster depends on the processor (Chapter 10 measures both). The compiled CPU kernels are specialised
    to ``torch.get_num_threads()`` at compile time (inductor's ``cpp.threads`` default), so call
    ``torch._dynamo.reset()`` and compile again after changing the thread count. The compilation
    itself happens at the first decode step: time it.
    """
    model.block_step = torch.compile(model.block_step, dynamic=True, options=COMPILE_OPTIONS)
    model.head_step = torch.compile(model.head_step, dynamic=True, options=COMPILE_OPTIONS)
    model.compute = model.cached_step
    return model
