"""The quantisation benchmark's logic (Chapter 12): agreement, the record, refusals, and llama.cpp on the bundled file.

Nothing here asserts a timing. The fast tests run the engine's paths on a tiny random model without
llama.cpp; the slow ones load the bundled SmolLM2 and its GGUF file in llama.cpp.
"""
import argparse

import pytest

from inferlab.bench.quant import (BITS, ENGINE_PATHS, add_quant_arguments, agreement, format_quant, llama_cpp_version,
                                  measure_quant)
from inferlab.errors import BadRequest

needs_llama_cpp = pytest.mark.skipif(llama_cpp_version() is None, reason="llama-cpp-python is not installed")


def test_every_engine_path_has_a_bit_width():
    assert set(ENGINE_PATHS) == set(BITS)


def test_agreement_reads_the_common_prefix():
    assert agreement([1, 2, 3, 4], [1, 2, 3, 4]) == {"common_prefix": 4, "equal_share": 1.0, "identical": True}
    assert agreement([1, 2, 9, 4], [1, 2, 3, 4]) == {"common_prefix": 2, "equal_share": 0.75, "identical": False}
    assert agreement([7], [1, 2])["common_prefix"] == 0


@pytest.fixture(scope="module")
def record(tiny_models, loaded_tiny):
    loaded = loaded_tiny(tiny_models["gpt2"])
    return measure_quant(loaded, threads=(1,), new_tokens=4, rounds=2, paths=("float32", "q8_0", "int4"),
                         llama_formats=(), prompt=[1, 2, 3, 4, 5])


def test_the_record_names_each_path_its_bytes_and_agreement(record):
    block = record["results"][0]
    assert list(block["paths"]) == ["float32", "q8_0", "int4"]
    float32, q8, int4 = (block["paths"][n] for n in ("float32", "q8_0", "int4"))
    assert float32["agreement_with_float32"]["identical"]
    assert q8["weight_bytes"] < float32["weight_bytes"] / 3 and int4["weight_bytes"] < q8["weight_bytes"]
    assert all(len(row["decode_tok_s_rounds"]) == 2 and row["decode_tok_s"] > 0 for row in block["paths"].values())
    assert block["comparisons"] == {}  # no llama.cpp path: nothing to compare with
    text = format_quant(record)
    assert "int4" in text and "q8_0" in text


@pytest.mark.parametrize("kwargs, message", [
    (dict(paths=("float16",)), "unknown engine paths"),
    (dict(paths=()), "unknown engine paths"),
    (dict(new_tokens=1), "new_tokens must be at least 2"),
    (dict(threads=(0,)), "thread counts"),
    (dict(llama_formats=("q4_1",)), "llama.cpp runs the bundled SmolLM2"),
])
def test_bad_settings_are_refused(tiny_models, loaded_tiny, kwargs, message):
    loaded = loaded_tiny(tiny_models["gpt2"])
    with pytest.raises(BadRequest, match=message):
        measure_quant(loaded, **{"prompt": [1, 2, 3], **kwargs})


def test_the_command_line_options():
    parser = argparse.ArgumentParser()
    add_quant_arguments(parser)
    args = parser.parse_args(["--threads", "1", "--paths", "int4", "q4_1", "--no-llama-cpp", "--json"])
    assert args.threads == [1] and args.paths == ["int4", "q4_1"] and args.no_llama_cpp and args.json
    with pytest.raises(SystemExit):
        parser.parse_args(["--paths", "int3"])


@pytest.mark.slow
@needs_llama_cpp
def test_llama_cpps_q8_0_file_holds_the_engines_q8_0_codes(smollm2):
    """llama.cpp requantises the bundled file to Q8_0; the lab's Q8_0 of the same float32 weights is byte-identical."""
    import numpy as np
    from gguf import GGUFReader

    from inferlab.bench.quant import gguf_for
    from inferlab.models.quantize import gguf_blocks, quantize_symmetric

    tensors = {t.name: t for t in GGUFReader(str(gguf_for("q8_0"))).tensors}
    hf = smollm2.model.model
    for name, weight in [("blk.0.ffn_down.weight", hf.layers[0].mlp.down_proj.weight),
                         ("blk.5.attn_output.weight", hf.layers[5].self_attn.o_proj.weight),
                         ("token_embd.weight", hf.embed_tokens.weight)]:
        theirs = np.asarray(tensors[name].data)
        mine = gguf_blocks(quantize_symmetric(weight.detach(), 8, 32), "Q8_0").numpy()
        assert tensors[name].tensor_type.name == "Q8_0"
        assert np.array_equal(mine.reshape(theirs.shape), theirs), name


@pytest.mark.slow
@needs_llama_cpp
def test_llama_cpp_generates_exactly_n_greedy_tokens_on_the_bundled_file(smollm2):
    from inferlab.bench.quant import LlamaCpp, gguf_for

    runner = LlamaCpp(gguf_for("q4_1"), threads=1)
    ids = list(smollm2.tokenizer("The capital of France is", add_special_tokens=False).input_ids)
    first, second = runner.generate(ids, 6), runner.generate(ids, 6)
    assert len(first.tokens) == 6 and first.tokens == second.tokens  # greedy, and the cache reset between requests
    assert first.ttft_s > 0 and first.decode_s_per_token > 0


def test_gguf_tensor_bytes_counts_the_weights_without_the_tokenizer():
    from inferlab.bench.quant import gguf_tensor_bytes
    from inferlab.models.loaders import smollm2_gguf

    path = smollm2_gguf()
    # the bundled file's three tensor types (Chapter 2): Q4_1 blocks of 32 weights in 20 bytes, the tied
    # embedding in Q8_0 (32 weights in 34 bytes), the norms in float32
    expected = 106_168_320 * 20 // 32 + 28_311_552 * 34 // 32 + 35_136 * 4
    assert gguf_tensor_bytes(path) == expected < path.stat().st_size
