"""Weight-only quantisation against llama.cpp's reference quantisers, as the gguf package writes them (Chapter 12)."""
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants

from inferlab.models.quantize import (QuantizedTensor, gguf_blocks, quantize_affine, quantize_symmetric,
                                      round_half_away)


def weights(rows=8, cols=128, seed=0):
    w = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 0.05
    w[0, :32] = 0.0  # a block of zeros: zero scale
    w[1, 5] = 0.4  # an outlier in one block
    w[2, :32] = torch.linspace(-1, 1, 32)  # values that land on halves after scaling
    return w


@pytest.mark.parametrize("fmt", ["Q8_0", "Q4_1"])
def test_gguf_bytes_equal_the_gguf_packages_quantiser(fmt):
    w = weights()
    ours = quantize_symmetric(w, 8, 32) if fmt == "Q8_0" else quantize_affine(w, 4, 32)
    theirs = quants.quantize(w.numpy(), GGMLQuantizationType[fmt])
    assert np.array_equal(gguf_blocks(ours, fmt).numpy(), theirs)


@pytest.mark.parametrize("fmt", ["Q8_0", "Q4_1"])
def test_dequantised_weights_equal_the_gguf_packages_dequantiser(fmt):
    w = weights(seed=1)
    ours = quantize_symmetric(w, 8, 32) if fmt == "Q8_0" else quantize_affine(w, 4, 32)
    theirs = quants.dequantize(gguf_blocks(ours, fmt).numpy(), GGMLQuantizationType[fmt])
    assert np.array_equal(ours.dequantize().numpy(), theirs)


def test_error_is_within_half_a_step_and_the_bytes_are_counted():
    w = weights(seed=2)
    for q, levels in ((quantize_symmetric(w, 8, 32), 127), (quantize_affine(w, 4, 32), 15)):
        step = q.scales.float().repeat_interleave(32, dim=1)
        error = (q.dequantize() - w).abs()
        # half a step, plus what storing the scale (and minimum) in float16 moves each weight
        assert torch.all(error <= 0.5 * step + 2e-3 * w.abs().amax()), (levels, float(error.max()))
    n = w.numel()
    assert quantize_symmetric(w, 8, 32).nbytes() == n + (n // 32) * 2  # 34 bytes per block of 32, as Q8_0
    assert quantize_affine(w, 4, 32).nbytes() == n // 2 + (n // 32) * 4  # 20 bytes per block of 32, as Q4_1


def test_per_channel_int8_uses_one_scale_per_row():
    w = weights(seed=3)
    q = quantize_symmetric(w, 8, None, scale_dtype=torch.float32)
    assert q.scales.shape == (w.shape[0], 1) and q.group_size == w.shape[1]
    assert torch.allclose(q.scales[:, 0], w.abs().amax(dim=1) / 127)
    assert int(q.codes.abs().amax(dim=1).min()) == 127  # each row's largest weight takes the largest code


def test_rounding_is_half_away_from_zero():
    assert round_half_away(torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4])).tolist() == [-3, -2, -1, 1, 2, 3, 2]


def test_bad_shapes_and_formats_are_refused():
    with pytest.raises(ValueError, match="divide"):
        quantize_symmetric(torch.zeros(2, 30), 8, 32)
    with pytest.raises(ValueError, match="weight matrix"):
        quantize_affine(torch.zeros(64), 4, 32)
    with pytest.raises(ValueError, match="bits"):
        quantize_symmetric(torch.zeros(2, 32), 9, 32)
    with pytest.raises(ValueError, match="Q4_1 holds"):
        gguf_blocks(quantize_symmetric(torch.ones(2, 32), 8, 32), "Q4_1")
    with pytest.raises(ValueError, match="unknown GGUF format"):
        gguf_blocks(quantize_symmetric(torch.ones(2, 32), 8, 32), "Q5_K")
    assert isinstance(quantize_affine(torch.ones(2, 32)), QuantizedTensor)


@pytest.mark.slow
def test_requantising_the_bundled_models_blocks_gives_back_its_bytes():
    """The GGUF file's Q4_1 and Q8_0 tensors, dequantised by gguf and quantised again here, are byte-identical.

    Dequantised values lie on their block's grid, so a quantiser that follows ggml's arithmetic must
    find the same scale, minimum and codes again. Checked on every Q8_0 tensor and the first ten Q4_1.
    """
    gguf = pytest.importorskip("gguf")
    from inferlab.models.loaders import smollm2_gguf

    reader = gguf.GGUFReader(str(smollm2_gguf()))
    checked = {"Q4_1": 0, "Q8_0": 0}
    for tensor in reader.tensors:
        fmt = tensor.tensor_type.name
        if fmt not in checked or (fmt == "Q4_1" and checked[fmt] >= 10):
            continue
        raw = np.asarray(tensor.data)
        w = torch.from_numpy(quants.dequantize(raw, GGMLQuantizationType[fmt]).reshape(raw.shape[0], -1).copy())
        ours = quantize_symmetric(w, 8, 32) if fmt == "Q8_0" else quantize_affine(w, 4, 32)
        assert np.array_equal(gguf_blocks(ours, fmt).numpy(), raw), tensor.name
        checked[fmt] += 1
    assert checked == {"Q4_1": 10, "Q8_0": 1}
