"""The decode-optimised model with packed quantised weights (Chapter 12), on tiny random models and the bundled one.

The reference for a quantised model is the same decode-optimised model holding, as float32, the
weights its codes stand for: the two run the same arithmetic except for the order of summation
(groups first, then the row), so their logits agree within TOL as Chapter 10's copies do. Nothing
here asserts a timing.
"""
import pytest
import torch

from inferlab.engine import Engine
from inferlab.engine.backends import decode_backend
from inferlab.models import compile_decode, decode_optimised, native_from_hf
from inferlab.models.quantize import quantize_affine, quantize_symmetric
from inferlab.models.quantized import (BLOCK_MATRICES, FORMATS, OPERATORS, Int4PackWeight, Int8DynamicWeight, PackedWeight,
                                       QuantizedWeight, quantize_decode, quantize_with,
                                       weight_bytes)
from inferlab.sampling.params import SamplingParams

TOL = 1e-4
VOCAB = 128


def random_ids(batch, seq, seed):
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def float_twin(model):
    """A decode-optimised float32 model holding the weights the quantised model's codes stand for."""
    twin = decode_optimised(model.native_source, "streamed")
    with torch.no_grad():
        for block, fast in zip(twin.decode_blocks(), model.decode_blocks()):
            for name in BLOCK_MATRICES[model.family]:
                getattr(block, name).copy_(getattr(fast, name).dequantize())
        twin.head.copy_(model.head.dequantize())
    return twin


def quantised(native, fmt):
    model = quantize_decode(decode_optimised(native, "streamed"), fmt)
    model.__dict__["native_source"] = native  # not a submodule: its weights are not the model's
    return model


@pytest.mark.parametrize("make", [lambda w: quantize_symmetric(w, 8, None), lambda w: quantize_symmetric(w, 8, 32),
                                  lambda w: quantize_affine(w, 4, 32), lambda w: quantize_affine(w, 4, 16)],
                         ids=["int8-per-channel", "q8_0", "q4_1", "q4-groups-of-16"])
def test_a_packed_weight_multiplies_and_reads_rows_as_its_dequantised_matrix(make):
    torch.manual_seed(0)
    weight = torch.randn(96, 64)
    quantized = make(weight)
    packed = PackedWeight(quantized)
    reference = quantized.dequantize()
    assert torch.equal(packed.dequantize(), reference)
    x = torch.randn(1, 1, 64)
    torch.testing.assert_close(packed(x), x @ reference.T, rtol=0, atol=1e-5)
    rows = torch.randn(2, 5, 64)  # several rows: the dequantised product
    torch.testing.assert_close(packed(rows), rows @ reference.T, rtol=0, atol=1e-5)
    ids = torch.tensor([[3, 0, 95]])
    assert torch.equal(packed.rows(ids), reference[ids])
    assert packed.nbytes() == quantized.nbytes()


def test_packed_bytes_are_the_formats_bits_per_weight():
    weight = torch.randn(64, 256)
    assert PackedWeight(quantize_affine(weight, 4, 32)).nbytes() == 64 * 256 // 32 * 20  # 16 code bytes, 2 halves
    assert PackedWeight(quantize_symmetric(weight, 8, 32)).nbytes() == 64 * 256 // 32 * 34  # 32 codes, 1 half
    assert PackedWeight(quantize_symmetric(weight, 8, None, torch.float32)).nbytes() == 64 * 256 + 64 * 4


#: The formats whose products use the weights' exact values on float32 activations; "int8" and "int4"
#: round the activations (to 7 bits, to bfloat16) inside PyTorch's operators: tested per matrix below.
EXACT = ["q8_0", "q4_1"]


def fbgemm_integer_model(x: torch.Tensor, quantized, levels: int, saturate: bool) -> torch.Tensor:
    """What fbgemm's dynamic product computes, in exact integers: each row of x to codes 0..levels with its
    own scale and zero point (from the row's range, zero included), u8 x s8 products added in adjacent
    pairs (clipped to int16 if ``saturate``, as ``vpmaddubsw`` does without VNNI), then widened and summed."""
    codes, scales = quantized.codes.to(torch.int64), quantized.scales.double().view(-1)
    rows = []
    for row in x.double():
        low, high = min(row.min().item(), 0.0), max(row.max().item(), 0.0)
        step = (high - low) / levels
        zero = min(max(round(-low / step), 0), levels)
        a = (torch.round(row / step) + zero).clamp(0, levels).to(torch.int64)
        pairs = (a * codes).view(codes.shape[0], -1, 2).sum(-1)
        if saturate:
            pairs = pairs.clamp(-2**15, 2**15 - 1)
        rows.append((pairs.sum(-1) - zero * codes.sum(-1)).double() * step * scales)
    return torch.stack(rows).float()


def int8_case():
    torch.manual_seed(1)
    quantized = quantize_symmetric(torch.randn(96, 64), 8, None, torch.float32)
    x = torch.randn(3, 64)
    x[0] *= 100  # a row of large activations must not coarsen the others' steps
    return quantized, x


def test_fbgemms_int8_product_is_within_its_activation_rounding():
    quantized, x = int8_case()
    weight = Int8DynamicWeight(quantized)
    reference = quantized.dequantize()
    assert torch.equal(weight.dequantize(), reference)
    assert torch.equal(weight.rows(torch.tensor([[5, 1]])), reference[torch.tensor([[5, 1]])])
    # 7 bits, one scale and zero point per row, from the row's range (zero included, as fbgemm's range is)
    step = (x.amax(-1).clamp(min=0) - x.amin(-1).clamp(max=0)) / 127
    bound = step.unsqueeze(-1) * reference.abs().sum(-1) / 2 + 1e-4  # each activation moves by at most half a step
    error = (weight(x) - x @ reference.T).abs()
    assert (error <= bound).all()
    assert error.max() > 1e-5  # it does round: not the float32 product


def test_fbgemms_int8_product_is_its_integer_arithmetic_on_every_processor():
    """7-bit activation codes keep fbgemm's int16 pair sums exact with or without VNNI; 8-bit ones would clip."""
    quantized, x = int8_case()
    got = Int8DynamicWeight(quantized)(x)
    exact = fbgemm_integer_model(x, quantized, 127, saturate=False)
    assert torch.equal(exact, fbgemm_integer_model(x, quantized, 127, saturate=True))  # nothing to clip
    assert torch.allclose(got, exact, rtol=1e-5, atol=1e-4)
    # The same data with 8-bit codes does clip: the pair sums this case would depend on the processor.
    assert not torch.equal(fbgemm_integer_model(x, quantized, 255, saturate=False),
                           fbgemm_integer_model(x, quantized, 255, saturate=True))


def test_the_int4_operators_product_is_within_bfloat16_rounding():
    torch.manual_seed(2)
    quantized = quantize_affine(torch.randn(96, 64), 4, 32)
    weight = Int4PackWeight(quantized)
    reference = weight.dequantize()  # the codes with bfloat16 scales and zeros: what the operator multiplies by
    exact = quantized.dequantize()
    assert (reference - exact).abs().max() <= exact.abs().max() * 2**-7  # zero = min + 8 scale, rounded to bfloat16
    x = torch.randn(3, 64)
    y = x @ reference.T
    unit = 2.0**-8  # bfloat16 keeps 8 significant bits: relative rounding at most 2^-8 (x) and 2^-8 (the result)
    bound = (x.abs() @ reference.abs().T) * unit + y.abs() * unit + 1e-5
    assert ((weight(x) - y).abs() <= bound).all()


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama-untied"])
@pytest.mark.parametrize("fmt", EXACT)
def test_a_quantised_model_computes_what_its_dequantised_weights_compute(tiny_models, name, fmt):
    native = native_from_hf(tiny_models[name])
    model = quantised(native, fmt)
    twin = float_twin(model)
    ids = random_ids(1, 9, seed=31)
    with torch.inference_mode():
        torch.testing.assert_close(model(ids), twin(ids), rtol=0, atol=TOL)  # prefill: dequantised products
        cache = model.new_cache(static=True, max_length=9)
        steps = [model(ids[:, :4], cache=cache)] + [model(ids[:, i:i + 1], cache=cache) for i in range(4, 9)]
        torch.testing.assert_close(torch.cat(steps, dim=1), twin(ids), rtol=0, atol=TOL)
    for block in model.decode_blocks():
        assert all(isinstance(getattr(block, n), QuantizedWeight) for n in BLOCK_MATRICES[model.family])
    assert isinstance(model.head, QuantizedWeight)


def test_the_formats_recipes_and_the_bytes_a_step_reads(tiny_models):
    native = native_from_hf(tiny_models["llama"])
    q4 = quantised(native, "q4_1")
    block = q4.decode_blocks()[0]
    assert (block.qkv.bits, block.qkv.group_size, block.qkv.affine) == (4, 32, True)
    assert (q4.head.bits, q4.head.group_size, q4.head.affine) == (8, 32, False)  # the bundled GGUF's mix
    matrices = sum(getattr(b, n).nbytes() for b in q4.decode_blocks() for n in BLOCK_MATRICES["llama"])
    floats = sum(p.numel() * 4 for p in q4.parameters())  # norms: all that stays float32 in this model
    assert weight_bytes(q4) == matrices + q4.head.nbytes() + floats
    assert weight_bytes(q4) < weight_bytes(decode_optimised(native, "streamed")) / 4


def test_bad_settings_are_refused(tiny_models):
    native = native_from_hf(tiny_models["llama"])
    with pytest.raises(ValueError, match="unknown quantisation format 'q3'"):
        quantize_decode(decode_optimised(native, "streamed"), "q3")
    with pytest.raises(ValueError, match="needs the 'streamed' layout"):
        quantize_decode(decode_optimised(native, "in_out"), "int8")
    with pytest.raises(ValueError, match="4 bits in groups of an even size"):
        PackedWeight(quantize_affine(torch.randn(4, 64), 8, 32))
    assert quantize_with(torch.randn(4, 64), FORMATS["int8"]["blocks"]).group_size == 64


def test_the_engine_serves_a_quantised_backend_with_the_twins_tokens(tiny_models, loaded_tiny):
    
    hf = tiny_models["gpt2"]
    loaded = loaded_tiny(hf)
    backend = decode_backend(loaded, quantization="q8_0")  # an exact format: the twin's tokens
    assert backend.model.layout == "streamed" and "q8_0" in backend.name
    twin = float_twin(quantised(native_from_hf(hf), "q8_0"))
    ids = random_ids(1, 6, seed=32)
    tokens = list(Engine(backend, kv_cache="static").generate(ids[0].tolist(), SamplingParams(
        max_new_tokens=8, ignore_eos=True)).token_ids)
    expected, fed, cache = [], ids, twin.new_cache(static=True, max_length=14)
    with torch.inference_mode():
        for _ in range(8):
            fed = twin(fed, cache=cache, last_only=True)[:, -1].argmax(-1, keepdim=True)
            expected.append(int(fed))
    assert tokens == expected


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_the_operator_formats_run_through_the_model_close_to_their_twin(tiny_models, fmt):
    native = native_from_hf(tiny_models["llama"])
    model = quantised(native, fmt)
    ids = random_ids(1, 9, seed=34)
    with torch.inference_mode():
        mine, twin = model(ids), float_twin(model)(ids)
    assert isinstance(model.head, Int8DynamicWeight)
    # A wiring check: the per-matrix rounding is bounded in the two tests above; through two blocks it moves
    # the logits by a few per cent, while any wrong matrix, layout or scale would move them by about 100 %.
    assert torch.linalg.norm(mine - twin) < 0.1 * torch.linalg.norm(twin)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_compiled_quantised_step_gives_the_eager_tokens_and_compiles_once(tiny_models, fmt):
    from torch._dynamo.utils import counters

    native = native_from_hf(tiny_models["llama"])
    ids = random_ids(1, 7, seed=33)

    def greedy(model):
        cache, fed, tokens, logits = model.new_cache(static=True, max_length=19), ids, [], []
        with torch.inference_mode():
            for _ in range(12):
                last = model(fed, cache=cache, last_only=True)[:, -1]
                fed = last.argmax(-1, keepdim=True)
                tokens.append(int(fed))
                logits.append(last)
        return tokens, torch.stack(logits)

    eager = greedy(quantised(native, fmt))
    torch._dynamo.reset()
    counters.clear()
    compiled = greedy(compile_decode(quantised(native, fmt)))
    assert compiled[0] == eager[0]
    torch.testing.assert_close(compiled[1], eager[1], rtol=0, atol=TOL if fmt in EXACT else 1e-3)
    assert counters["stats"]["unique_graphs"] == 2 and not counters["recompiles"]


@pytest.mark.slow
def test_the_bundled_models_q4_1_codes_give_back_its_float32_weights_exactly(smollm2):
    """The float32 model is the bundled Q4_1 file dequantised, so quantising it again to Q4_1 loses nothing."""
    model = quantize_decode(decode_optimised(native_from_hf(smollm2.model), "streamed"), "q4_1")
    reference = decode_optimised(native_from_hf(smollm2.model), "streamed")
    for block, plain in zip(model.decode_blocks()[:3], reference.decode_blocks()[:3]):
        for name in BLOCK_MATRICES["llama"]:
            assert torch.equal(getattr(block, name).dequantize(), getattr(plain, name))
    assert torch.equal(model.head.dequantize(), reference.head)


def test_fbgemms_packed_weights_live_as_long_as_their_module():
    import gc

    from inferlab.models import quantized as module

    weight = Int8DynamicWeight(quantize_symmetric(torch.randn(8, 32), 8, None, torch.float32))
    handle = int(weight.handle)
    assert handle in module._FBGEMM_PACKED
    del weight
    gc.collect()
    assert handle not in module._FBGEMM_PACKED


def test_the_two_controls_hold_their_formats_codes():
    """int8-w is int8's weights with float32 activations; int4-q8 is int4's blocks with q8_0's head (Chapter 12)."""
    w = torch.randn(8, 64, generator=torch.Generator().manual_seed(5))
    weights_alone = PackedWeight(quantize_with(w, FORMATS["int8-w"]["blocks"]))
    through_fbgemm = Int8DynamicWeight(quantize_with(w, FORMATS["int8"]["blocks"]))
    assert torch.equal(weights_alone.dequantize(), through_fbgemm.dequantize())
    assert OPERATORS["int8-w"] == (None, None)  # the written-out kernel: float32 activations
    assert FORMATS["int4-q8"] == {"blocks": FORMATS["int4"]["blocks"], "head": FORMATS["q8_0"]["head"]}
    assert OPERATORS["int4-q8"] == (OPERATORS["int4"][0], OPERATORS["q8_0"][1])
