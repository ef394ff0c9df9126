"""The decode-optimised model with quantised weights, multiplied without writing them out in float (Chapter 12).

:mod:`inferlab.models.quantize` turns a weight matrix into integer codes and scales. This module
puts those codes into the decode-optimised model of Chapter 10 (:mod:`inferlab.models.decode`) and
multiplies by them directly: for the single row of a decode step, :meth:`PackedWeight.forward`
writes the product as multiply-and-sum over the codes, converted to float inside the sum, which
``torch.compile`` (:func:`~inferlab.models.decode.compile_decode`) turns into one pass over the
codes that never stores a float32 copy of the weights. Several rows (a prefill) dequantise the
matrix once and call the BLAS library's product, where it is at its best.

Formats (:data:`FORMATS`), each a recipe for the blocks' matrices and for the LM head (tied to the
token embedding in both of the book's models). Two are written here, multiplied by a compiled
multiply-and-sum over the codes, with float32 activations, exactly the weights the codes stand for:

- ``"q8_0"``: llama.cpp's Q8_0 (int8 codes, a float16 scale per 32 weights), everywhere;
- ``"q4_1"``: llama.cpp's Q4_1 (4-bit codes packed two per byte, a float16 scale and minimum per
  32 weights) for the blocks, Q8_0 for the LM head: the mix of the book's bundled GGUF file.

Two call PyTorch's own packed CPU operators, which also round the activations:

- ``"int8"``: per-channel symmetric int8 weights, multiplied by fbgemm's dynamically quantised
  product (``torch.ops.quantized.linear_dynamic``: the activations are quantised to 7 bits, one
  scale and zero point per row, and the product runs in integers) (:class:`Int8DynamicWeight`);
- ``"int4"``: Q4_1's codes and groups for the blocks in the layout of
  ``torch.ops.aten._weight_int4pack_mm_for_cpu``, which takes ``w = (q - 8) * scale + zero`` with
  bfloat16 scales and zeros and bfloat16 activations (its float32 path is a slow fallback on this
  torch), the head as ``"int8"`` (:class:`Int4PackWeight`).

Two controls separate what each of those operators rounds:

- ``"int8-w"``: ``"int8"``'s codes and scales, multiplied with float32 activations
  (:class:`PackedWeight`): the weights' rounding alone;
- ``"int4-q8"``: ``"int4"``'s blocks with a Q8_0 head (:class:`PackedWeight`), the bundled file's own
  head format: int4 without the per-row re-rounding of the head and its 7-bit activations.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from inferlab.models.decode import DecodeModel, project_streamed
from inferlab.models.quantize import QuantizedTensor, quantize_affine, quantize_symmetric

#: Each format's recipe for the blocks' matrices and for the LM head: (kind, bits, group size or None
#: for one group per row). See the module's docstring.
FORMATS: dict[str, dict[str, tuple[str, int, int | None]]] = {
    "int8": {"blocks": ("symmetric", 8, None), "head": ("symmetric", 8, None)},
    "q8_0": {"blocks": ("symmetric", 8, 32), "head": ("symmetric", 8, 32)},
    "q4_1": {"blocks": ("affine", 4, 32), "head": ("symmetric", 8, 32)},
    "int4": {"blocks": ("affine", 4, 32), "head": ("symmetric", 8, None)},
    "int8-w": {"blocks": ("symmetric", 8, None), "head": ("symmetric", 8, None)},
    "int4-q8": {"blocks": ("affine", 4, 32), "head": ("symmetric", 8, 32)},
}
#: Which class holds each format's matrices: (blocks, head); None: :class:`PackedWeight`.
OPERATORS: dict[str, tuple[str | None, str | None]] = {
    "int8": ("fbgemm", "fbgemm"), "q8_0": (None, None), "q4_1": (None, None), "int4": ("int4pack", "fbgemm"),
    "int8-w": (None, None), "int4-q8": ("int4pack", None)}


def quantize_with(weight: torch.Tensor, recipe: tuple[str, int, int | None]) -> QuantizedTensor:
    """Quantise an [out, in] matrix by one of :data:`FORMATS`' recipes (Chapter 12)."""
    kind, bits, group_size = recipe
    if kind == "symmetric":  # one scale per row is kept in float32; a scale per group in float16, as GGUF does
        return quantize_symmetric(weight, bits, group_size, torch.float32 if group_size is None else torch.float16)
    return quantize_affine(weight, bits, group_size or weight.shape[-1])


class QuantizedWeight(nn.Module):
    """A weight matrix held in a quantised format, used as ``weight(x)`` for x [..., in] (Chapter 12)."""

    out_features: int
    in_features: int
    stored_bytes: int

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The [out, in] matrix the format stands for (Chapter 12)."""
        raise NotImplementedError

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` of the matrix, [*ids.shape, in]: the token embedding of a tied head (Chapter 12)."""
        return self.dequantize().index_select(0, ids.reshape(-1)).view(*ids.shape, self.in_features)

    def nbytes(self) -> int:
        """Bytes a product reads: packed codes, scales and minimums as the format stores them (Chapter 12)."""
        return self.stored_bytes


class PackedWeight(QuantizedWeight):
    """One [out, in] weight matrix held as codes and scales, multiplied by one row without a float copy (Chapter 12).

    Symmetric codes are kept as int8 [out, groups, group_size] with float scales [out, groups, 1]
    (per channel: one group of ``in`` weights per row, its scale in float32). Affine 4-bit codes are
    packed two per byte as GGUF packs them, the first half of each group in the low nibbles and the
    second half in the high ones, [out, groups, group_size / 2], with float16 scales and minimums;
    the product takes the group's sum of ``x`` once for the minimums:
    ``sum_g scale_g * (x_g . codes_g) + minimum_g * sum(x_g)``.
    """

    def __init__(self, quantized: QuantizedTensor) -> None:
        super().__init__()
        out, n_in = quantized.codes.shape
        self.out_features, self.in_features = out, n_in
        self.bits, self.group_size = quantized.bits, quantized.group_size
        groups = n_in // self.group_size
        self.affine = quantized.minimums is not None
        if self.affine and (self.bits != 4 or self.group_size % 2):
            raise ValueError("PackedWeight packs affine codes of 4 bits in groups of an even size; "
                             f"got {self.bits} bits in groups of {self.group_size}")
        codes = quantized.codes.view(out, groups, self.group_size)
        if self.affine:
            half = self.group_size // 2
            self.register_buffer("codes", (codes[..., :half] | (codes[..., half:] << 4)).contiguous())
            self.register_buffer("minimums", quantized.minimums.view(out, groups, 1).contiguous())  # type: ignore[union-attr]
        else:
            self.register_buffer("codes", codes.contiguous())
            self.minimums = None
        per_channel = groups == 1
        scales = quantized.scales.view(out, groups, 1)
        self.register_buffer("scales", (scales.float() if per_channel else scales).contiguous())
        self.stored_bytes = quantized.nbytes()

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The [out, in] matrix the codes stand for (Chapter 12)."""
        codes = self.codes
        if self.affine:
            codes = torch.cat([codes & 15, codes >> 4], dim=-1)
        weights = codes.to(torch.float32) * self.scales.to(torch.float32)
        if self.minimums is not None:
            weights = weights + self.minimums.to(torch.float32)
        return weights.view(self.out_features, self.in_features).to(dtype)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` of the matrix, dequantised, [*ids.shape, in]: the token embedding of a tied head (Chapter 12)."""
        flat = ids.reshape(-1)
        codes = self.codes.index_select(0, flat)
        if self.affine:
            codes = torch.cat([codes & 15, codes >> 4], dim=-1)
        weights = codes.to(torch.float32) * self.scales.index_select(0, flat).to(torch.float32)
        if self.minimums is not None:
            weights = weights + self.minimums.index_select(0, flat).to(torch.float32)
        return weights.view(*ids.shape, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] @ W.T → [..., out]: one row from the codes directly, more rows through a dequantised copy (Chapter 12)."""
        if x.numel() != x.shape[-1]:
            return F.linear(x, self.dequantize(x.dtype))
        lead = x.shape[:-1]
        groups = self.in_features // self.group_size
        if self.affine:
            xg = x.reshape(1, groups, 2, self.group_size // 2)
            dot = (xg[:, :, 0] * (self.codes & 15) + xg[:, :, 1] * (self.codes >> 4)).sum(-1, keepdim=True)
            y = (dot * self.scales + self.minimums * xg.sum((-1, -2)).unsqueeze(-1)).sum((-1, -2))
        else:
            xg = x.reshape(1, groups, self.group_size)
            y = ((xg * self.codes).sum(-1, keepdim=True) * self.scales).sum((-1, -2))
        return y.view(*lead, self.out_features)

    def extra_repr(self) -> str:
        kind = "affine" if self.affine else "symmetric"
        return f"{self.out_features}x{self.in_features}, {kind} {self.bits}-bit, groups of {self.group_size}"


#: fbgemm's packed weights, by handle: ``torch.compile`` cannot trace the packed-weight object, so the
#: compiled step passes a handle (a tensor) to :func:`fbgemm_linear`, which looks the object up. An
#: entry lives as long as the :class:`Int8DynamicWeight` that made it.
_FBGEMM_PACKED: dict[int, Any] = {}
_handles = itertools.count()

#: Activations to 7 bits (codes 0 to 127), not 8. On a processor without VNNI, fbgemm's kernels add
#: each pair of u8 x s8 products into a saturating int16 (``vpmaddubsw``) before widening them; with
#: 8-bit codes a pair reaches 2 x 255 x 127 = 64,770 and clips at 32,767, so the product depends on
#: the processor. With 7-bit codes a pair stays within 2 x 127 x 127 = 32,258 and every processor adds
#: exactly. PyTorch's own dynamic ``Linear`` passes ``reduce_range=True`` for the same reason
#: (``torch/ao/nn/quantized/dynamic/modules/linear.py``); tested in ``tests/test_quantized.py``.
REDUCE_RANGE = True


@torch.library.custom_op("inferlab::fbgemm_linear", mutates_args=())
def fbgemm_linear(x: torch.Tensor, handle: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """x [rows, in] @ W.T through fbgemm's dynamically quantised product, W packed under ``handle`` (Chapter 12).

    fbgemm's operator quantises its whole input with one scale and zero point, from the input's
    minimum and maximum (``FindMinMax`` over ``input.numel()`` in ATen's ``qlinear_dynamic.cpp``).
    Rows are passed one at a time, so that each row (each token) gets its own scale, as in a decode
    step: a prefill then rounds every position as decoding would, and one position's large
    activations cannot coarsen the others' steps.

    A custom operator, so that ``torch.compile`` keeps the call as one opaque node of its graph
    instead of breaking the graph around it; ``scales`` (W's [out, 1] scales) gives the output's
    width to the compiler's shape inference (:func:`_fbgemm_linear_shape`).
    """
    packed = _FBGEMM_PACKED[int(handle)]
    if x.shape[0] == 1:
        return torch.ops.quantized.linear_dynamic(x, packed, REDUCE_RANGE)
    return torch.cat([torch.ops.quantized.linear_dynamic(row, packed, REDUCE_RANGE) for row in x.split(1)])


@fbgemm_linear.register_fake
def _fbgemm_linear_shape(x: torch.Tensor, handle: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[0], scales.shape[0])


class Int8DynamicWeight(QuantizedWeight):
    """Per-channel int8 weights multiplied by fbgemm's dynamically quantised product (Chapter 12).

    ``torch.ops.quantized.linear_prepack`` packs a per-channel ``qint8`` tensor into fbgemm's
    layout; ``torch.ops.quantized.linear_dynamic(x, packed, reduce_range=True)`` quantises x to
    7 bits (:data:`REDUCE_RANGE`) with one scale and zero point per call (from x's range), multiplies in integers and
    rescales to float32; :func:`fbgemm_linear` calls it once per row. The codes and scales are also kept, for :meth:`rows` and
    :meth:`dequantize`: the packed copy is what a product reads.
    """

    def __init__(self, quantized: QuantizedTensor) -> None:
        super().__init__()
        if quantized.minimums is not None or quantized.group_size != quantized.codes.shape[1] or quantized.bits != 8:
            raise ValueError("Int8DynamicWeight takes per-channel symmetric int8 codes")
        self.out_features, self.in_features = quantized.codes.shape
        self.register_buffer("codes", quantized.codes.contiguous())
        self.register_buffer("scales", quantized.scales.float().view(-1, 1).contiguous())
        qweight = torch.quantize_per_channel(self.dequantize(), self.scales.view(-1).double(),
                                             torch.zeros(self.out_features, dtype=torch.long), 0, torch.qint8)
        handle = next(_handles)
        _FBGEMM_PACKED[handle] = torch.ops.quantized.linear_prepack(qweight, None)
        weakref.finalize(self, _FBGEMM_PACKED.pop, handle, None)
        self.register_buffer("handle", torch.tensor(handle), persistent=False)
        self.stored_bytes = quantized.nbytes()

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return (self.codes.to(torch.float32) * self.scales).to(dtype)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1)
        rows = self.codes.index_select(0, flat).to(torch.float32) * self.scales.index_select(0, flat)
        return rows.view(*ids.shape, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] → [..., out] through fbgemm, activations quantised per row (Chapter 12)."""
        y = fbgemm_linear(x.reshape(-1, self.in_features), self.handle, self.scales)
        return y.view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{self.out_features}x{self.in_features}, per-channel int8, fbgemm dynamic"


class Int4PackWeight(QuantizedWeight):
    """4-bit affine codes in the layout of PyTorch's int4 CPU product, bfloat16 scales and activations (Chapter 12).

    ``torch.ops.aten._convert_weight_to_int4pack_for_cpu`` packs the codes;
    ``torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, group_size, scales_and_zeros)`` computes
    ``x @ W.T`` with ``W = (q - 8) * scale + zero`` per group, ``scales_and_zeros`` [groups, out, 2].
    A Q4_1 group ``scale * q + minimum`` is the same line with ``zero = minimum + 8 * scale``; the
    operator wants them, and x, in bfloat16, which rounds both (its float32 path exists but is a
    slow fallback on this torch).
    """

    def __init__(self, quantized: QuantizedTensor) -> None:
        super().__init__()
        if quantized.minimums is None or quantized.bits != 4:
            raise ValueError("Int4PackWeight takes 4-bit affine codes")
        self.out_features, self.in_features = quantized.codes.shape
        self.group_size = quantized.group_size
        self.register_buffer("packed", torch.ops.aten._convert_weight_to_int4pack_for_cpu(
            quantized.codes.to(torch.int32), 1))
        scales, minimums = quantized.scales.float(), quantized.minimums.float()
        zeros = minimums + 8 * scales
        self.register_buffer("scales_and_zeros",
                             torch.stack([scales, zeros], dim=-1).transpose(0, 1).contiguous().to(torch.bfloat16))
        self.register_buffer("codes", quantized.codes.contiguous())  # for dequantize only; products read `packed`
        self.stored_bytes = self.packed.numel() + self.scales_and_zeros.numel() * 2

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The matrix the operator multiplies by: codes with the bfloat16-rounded scales and zeros (Chapter 12)."""
        groups = self.in_features // self.group_size
        sz = self.scales_and_zeros.to(torch.float32).transpose(0, 1)  # [out, groups, 2]
        codes = self.codes.to(torch.float32).view(self.out_features, groups, self.group_size)
        return ((codes - 8) * sz[..., :1] + sz[..., 1:]).view(self.out_features, self.in_features).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] → [..., out] through PyTorch's int4 CPU product, in bfloat16 (Chapter 12)."""
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.reshape(-1, self.in_features).to(torch.bfloat16),
                                                       self.packed, self.group_size, self.scales_and_zeros)
        return y.to(x.dtype).view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{self.out_features}x{self.in_features}, int4 groups of {self.group_size}, bfloat16 int4pack"


#: The classes behind :data:`OPERATORS`' names.
WEIGHT_CLASSES: dict[str | None, type[QuantizedWeight]] = {None: PackedWeight, "fbgemm": Int8DynamicWeight,
                                                           "int4pack": Int4PackWeight}


def project_quantized(x: torch.Tensor, weight: torch.Tensor | QuantizedWeight) -> torch.Tensor:
    """A block's projection when some of its weights are quantised: theirs, else Chapter 10's streamed one (Chapter 12)."""
    if isinstance(weight, QuantizedWeight):
        return weight(x)
    return project_streamed(x, weight)


#: The matrices of each block that a format quantises, by family.
BLOCK_MATRICES = {"llama": ("qkv", "o", "gate_up", "down"), "gpt2": ("c_attn", "c_proj", "c_fc", "mlp_proj")}


def quantize_decode(model: DecodeModel, format: str) -> DecodeModel:
    """Replace the weight matrices of a decode-optimised model by packed codes of ``format``, in place (Chapter 12).

    The model must use the ``"streamed"`` layout ([out, in], as the codes are grouped along ``in``);
    compile it afterwards with :func:`~inferlab.models.decode.compile_decode` for speed (eager, a
    one-row product is correct but slow). Norms, biases and position tables stay float32; a tied
    LM head is quantised and the token embedding reads its rows back through
    :meth:`QuantizedWeight.rows`; an untied input embedding stays float32 (one row is read per token).
    """
    if format not in FORMATS:
        raise ValueError(f"unknown quantisation format {format!r}; have {', '.join(FORMATS)}")
    if model.layout != "streamed":
        raise ValueError(f"quantize_decode needs the 'streamed' layout ([out, in]), got {model.layout!r}")
    recipe, (block_class, head_class) = FORMATS[format], OPERATORS[format]
    for block in model.decode_blocks():
        for name in BLOCK_MATRICES[model.family]:
            packed = WEIGHT_CLASSES[block_class](quantize_with(getattr(block, name), recipe["blocks"]))
            delattr(block, name)
            setattr(block, name, packed)
        block.project = project_quantized
    head = WEIGHT_CLASSES[head_class](quantize_with(model.head, recipe["head"]))
    del model.head
    model.head = head  # type: ignore[assignment]
    model.project = project_quantized
    model.quantization = format
    return model


#: Parameters of the decode-optimised models that a step reads one row of (lookup tables), not in full.
LOOKUP_TABLES = ("wpe", "embed_tokens")


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the weights one decode step reads in full, as stored: packed matrices by their format (Chapter 12).

    The quantised counterpart of Chapter 2's :func:`~inferlab.analysis.sizing.decode_weight_bytes`:
    every quantised matrix's :meth:`QuantizedWeight.nbytes`, plus every float parameter except the lookup
    tables (:data:`LOOKUP_TABLES`) of which a step reads one row.
    """
    packed = sum(m.nbytes() for m in model.modules() if isinstance(m, QuantizedWeight))
    floats = sum(p.numel() * p.element_size() for name, p in model.named_parameters()
                 if name.rsplit(".", 1)[-1] not in LOOKUP_TABLES)
    return packed + floats
