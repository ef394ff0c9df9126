"""Weight-only quantisation written out: integer codes and a scale per group of weights (Chapter 12).

A weight matrix [out, in] is cut along its input dimension into groups of ``group_size`` weights;
each group keeps small integer codes and one or two numbers that map them back to real values:

- :func:`quantize_symmetric`: codes in ``-(2^(bits-1) - 1) .. 2^(bits-1) - 1`` and one scale,
  ``w ≈ scale * code``, the scale set by the group's largest magnitude. With ``bits=8`` and groups of
  32 this is llama.cpp's Q8_0; with one group per row it is per-channel int8.
- :func:`quantize_affine`: codes in ``0 .. 2^bits - 1``, a scale and a minimum,
  ``w ≈ scale * code + minimum``, the group's range cut into equal steps. With ``bits=4`` and groups
  of 32 this is llama.cpp's Q4_1, the format of the book's bundled model.

The arithmetic follows ggml's reference quantisers (``ggml-quants.c``, mirrored in the ``gguf``
package's ``gguf/quants.py``): the scale is computed in float32, the codes from its float32 inverse,
and the scale and minimum are then stored in float16. :func:`gguf_blocks` packs a result into the
bytes of a GGUF tensor, so that the tests can compare it with the ``gguf`` package byte for byte.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

#: The GGUF block formats :func:`gguf_blocks` writes: (kind, bits, weights per block).
GGUF_FORMATS = {"Q8_0": ("symmetric", 8, 32), "Q4_1": ("affine", 4, 32)}


@dataclass(frozen=True)
class QuantizedTensor:
    """Integer codes of a [out, in] weight matrix and the numbers that map them back, per group (Chapter 12)."""

    #: The codes, one per weight, [out, in]: int8 for the symmetric kind, uint8 for the affine one (4-bit codes
    #: are not packed here; :func:`gguf_blocks` packs them).
    codes: torch.Tensor
    #: One scale per group, [out, in // group_size], in the storage dtype (float16 as in GGUF).
    scales: torch.Tensor
    #: One minimum per group for the affine kind, None for the symmetric one.
    minimums: torch.Tensor | None
    bits: int
    group_size: int

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weights the codes stand for, [out, in], in ``dtype`` (Chapter 12)."""
        out, n_in = self.codes.shape
        codes = self.codes.to(torch.float32).view(out, n_in // self.group_size, self.group_size)
        weights = codes * self.scales.to(torch.float32).unsqueeze(-1)
        if self.minimums is not None:
            weights = weights + self.minimums.to(torch.float32).unsqueeze(-1)
        return weights.view(out, n_in).to(dtype)

    def nbytes(self) -> int:
        """Bytes this format stores: ``bits`` per weight, packed, and its scales and minimums (Chapter 12)."""
        extra = self.scales.numel() * self.scales.element_size()
        if self.minimums is not None:
            extra += self.minimums.numel() * self.minimums.element_size()
        return self.codes.numel() * self.bits // 8 + extra


def _groups(weight: torch.Tensor, group_size: int) -> torch.Tensor:
    """[out, in] float32 → [out, in // group_size, group_size], refusing shapes that do not divide (Chapter 12)."""
    if weight.dim() != 2:
        raise ValueError(f"quantise a weight matrix [out, in], got a tensor of shape {tuple(weight.shape)}")
    out, n_in = weight.shape
    if group_size < 1 or n_in % group_size:
        raise ValueError(f"group_size must divide the input dimension {n_in}, got {group_size}")
    return weight.detach().to(torch.float32).reshape(out, n_in // group_size, group_size)


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest integer, halves away from zero, as C's ``roundf`` and ggml do (Chapter 12).

    ``torch.round`` rounds halves to even (2.5 → 2), which would give other codes than llama.cpp's
    for weights that land exactly halfway.
    """
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def quantize_symmetric(weight: torch.Tensor, bits: int = 8, group_size: int | None = 32,
                       scale_dtype: torch.dtype = torch.float16) -> QuantizedTensor:
    """Codes ``round(w / scale)`` with ``scale = max |w| / (2^(bits-1) - 1)`` per group (Chapter 12).

    ``group_size=None`` takes each row as one group: per-channel quantisation. A group of zeros gets
    a zero scale and zero codes.
    """
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be 2 to 8, got {bits}")
    groups = _groups(weight, weight.shape[-1] if group_size is None else group_size)
    qmax = 2 ** (bits - 1) - 1
    scale = groups.abs().amax(dim=-1, keepdim=True) / qmax
    inverse = torch.where(scale == 0, torch.zeros_like(scale), 1 / scale)
    codes = round_half_away(groups * inverse).clamp(-qmax, qmax).to(torch.int8)
    return QuantizedTensor(codes.view(weight.shape), scale.squeeze(-1).to(scale_dtype), None, bits, groups.shape[-1])


def quantize_affine(weight: torch.Tensor, bits: int = 4, group_size: int = 32,
                    scale_dtype: torch.dtype = torch.float16) -> QuantizedTensor:
    """Codes ``round((w - min) / scale)`` with ``scale = (max - min) / (2^bits - 1)`` per group (Chapter 12).

    The rounding is ggml's for Q4_1: ``trunc(x + 0.5)`` of a non-negative ``x``.
    """
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be 2 to 8, got {bits}")
    groups = _groups(weight, group_size)
    top = 2**bits - 1
    low, high = groups.amin(dim=-1, keepdim=True), groups.amax(dim=-1, keepdim=True)
    scale = (high - low) / top
    inverse = torch.where(scale == 0, torch.zeros_like(scale), 1 / scale)
    codes = torch.trunc((groups - low) * inverse + 0.5).clamp(0, top).to(torch.uint8)
    return QuantizedTensor(codes.view(weight.shape), scale.squeeze(-1).to(scale_dtype), low.squeeze(-1).to(scale_dtype),
                           bits, group_size)


def gguf_blocks(quantized: QuantizedTensor, format: str) -> torch.Tensor:
    """The bytes of a GGUF tensor of ``format`` ("Q8_0" or "Q4_1") holding ``quantized``, [out, bytes per row] (Chapter 12).

    Each block of 32 weights is its float16 scale (and, for Q4_1, its float16 minimum), then its codes:
    Q8_0 one signed byte each; Q4_1 two per byte, the block's first 16 codes in the low nibbles and the
    last 16 in the high ones (``gguf/quants.py``, ``Q4_1.quantize_blocks``).
    """
    if format not in GGUF_FORMATS:
        raise ValueError(f"unknown GGUF format {format!r}: this writes {', '.join(GGUF_FORMATS)}")
    kind, bits, block = GGUF_FORMATS[format]
    if quantized.bits != bits or quantized.group_size != block or (quantized.minimums is None) != (kind == "symmetric"):
        raise ValueError(f"{format} holds {kind} {bits}-bit codes in groups of {block}; got {quantized.bits}-bit codes "
                         f"in groups of {quantized.group_size}")
    out, n_in = quantized.codes.shape
    n_blocks = n_in // block
    as_bytes = lambda t: t.contiguous().view(torch.uint8).view(out, n_blocks, -1)  # noqa: E731
    parts = [as_bytes(quantized.scales.to(torch.float16).view(out, n_blocks, 1))]
    codes = quantized.codes.view(out, n_blocks, block)
    if kind == "affine":
        parts.append(as_bytes(quantized.minimums.to(torch.float16).view(out, n_blocks, 1)))  # type: ignore[union-attr]
        nibbles = codes.to(torch.uint8)
        parts.append(nibbles[..., : block // 2] | (nibbles[..., block // 2:] << 4))
    else:
        parts.append(codes.contiguous().view(torch.uint8))
    return torch.cat(parts, dim=-1).reshape(out, -1)
