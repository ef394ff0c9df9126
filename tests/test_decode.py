"""The decode-optimised models and the decode benchmark's logic, on tiny random models (Chapter 10).

Nothing here asserts a timing. The decode-optimised copies must give the plain native model's
greedy tokens, and logits within TOL: they run the same float32 arithmetic with the products fused,
transposed or written as multiply-and-sum, so only the order of summation differs (measured
differences are about 1e-6 on logits of order one, as for the KV cache in tests/test_kv_cache.py).
"""
import json

import pytest
import torch

from inferlab.bench.decode import (SELECTIONS, STAGES, compile_vs_eager, format_decode, measure_decode,
                                   run_decode_benchmark)
from inferlab.engine import Engine
from inferlab.engine.backends import decode_backend
from inferlab.errors import BadRequest
from inferlab.models import UnsupportedModel, compile_decode, decode_optimised, native_from_hf
from inferlab.models.decode import LAYOUTS
from inferlab.models.kv_cache import CacheFull
from inferlab.sampling.params import SamplingParams

TOL = 1e-4
VOCAB = 128


def random_ids(batch, seq, seed):
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def greedy(model, ids, steps, static):
    """Prefill, then one id per call through a KV cache; greedy tokens and each step's logits."""
    cache = model.new_cache(static=True, max_length=ids.shape[1] + steps) if static else model.new_cache()
    tokens, logits, fed = [], [], ids
    with torch.inference_mode():
        for _ in range(steps):
            last = model(fed, cache=cache, last_only=True)[:, -1]
            fed = last.argmax(-1, keepdim=True)
            tokens.append(int(fed))
            logits.append(last)
    return tokens, torch.stack(logits)


@pytest.mark.parametrize("name", ["gpt2", "gpt2-exact-gelu", "llama", "llama-untied", "llama-mqa", "llama-mha"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_decode_optimised_logits_equal_the_plain_native_model(tiny_models, name, layout):
    native = native_from_hf(tiny_models[name])
    fast = decode_optimised(native, layout)
    ids = random_ids(2, 11, seed=30)
    with torch.inference_mode():
        torch.testing.assert_close(fast(ids), native(ids), rtol=0, atol=TOL)
        torch.testing.assert_close(fast(ids, last_only=True), native(ids)[:, -1:], rtol=0, atol=TOL)
        for static in (False, True):
            cache = fast.new_cache(static=static, max_length=11 if static else None)
            steps = [fast(ids[:, :6], cache=cache)] + [fast(ids[:, i:i + 1], cache=cache) for i in range(6, 11)]
            torch.testing.assert_close(torch.cat(steps, dim=1), native(ids), rtol=0, atol=TOL)
    assert fast.shape == native.shape and fast.lm_head_weight().shape == (VOCAB, native.shape.hidden)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_decode_optimised_greedy_tokens_equal_the_plain_model(tiny_models, name):
    native = native_from_hf(tiny_models[name])
    ids = random_ids(1, 7, seed=25)
    tokens, logits = greedy(native, ids, 20, static=False)
    for layout in LAYOUTS:
        fast_tokens, fast_logits = greedy(decode_optimised(native, layout), ids, 20, static=True)
        assert fast_tokens == tokens, layout
        torch.testing.assert_close(fast_logits, logits, rtol=0, atol=TOL)


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama-mqa"])
@pytest.mark.parametrize("layout", ["in_out", "streamed"])
def test_the_block_by_block_step_gives_the_plain_model_tokens(tiny_models, name, layout):
    # cached_step, eagerly: the step that compile_decode compiles, block by block on the static buffers
    native = native_from_hf(tiny_models[name])
    ids = random_ids(2, 9, seed=26)
    tokens, logits = greedy(native, ids[:1], 12, static=False)
    fast = decode_optimised(native, layout)
    fast.compute = fast.cached_step
    for static in (True, False):  # a dynamic cache takes the eager logits
        fast_tokens, fast_logits = greedy(fast, ids[:1], 12, static=static)
        assert fast_tokens == tokens, static
        torch.testing.assert_close(fast_logits, logits, rtol=0, atol=TOL)
    cache = fast.new_cache(static=True, max_length=9)  # two rows, up to a full cache
    with torch.inference_mode():
        steps = [fast(ids[:, :6], cache=cache)] + [fast(ids[:, i:i + 1], cache=cache) for i in range(6, 9)]
        with pytest.raises(CacheFull):
            fast(ids[:, :1], cache=cache)
        torch.testing.assert_close(torch.cat(steps, dim=1), native(ids[:, :9]), rtol=0, atol=TOL)


def test_the_in_out_layout_stores_each_matrix_once_transposed(tiny_models):
    native = native_from_hf(tiny_models["llama"])
    fast = decode_optimised(native, "in_out")
    block, plain = fast.layers[0], native.layers[0]
    hidden, heads, kv_heads, head_dim = 64, 4, 2, 32
    assert block.qkv.shape == (hidden, (heads + 2 * kv_heads) * head_dim) and block.qkv.is_contiguous()
    assert torch.equal(block.qkv[:, :heads * head_dim], plain.q_proj.weight.T)
    assert fast.head.shape == (hidden, VOCAB)  # the tied head, stored once; the embedding reads its columns
    assert sum(p.numel() for p in fast.parameters()) == sum(p.numel() for p in native.parameters())
    with pytest.raises(UnsupportedModel, match="unknown weight layout"):
        decode_optimised(native, "blocked")


def test_the_engine_runs_the_decode_backend_with_the_same_tokens(tiny_models, loaded_tiny):
    loaded = loaded_tiny(tiny_models["llama"])
    prompt = random_ids(1, 6, seed=31)[0].tolist()
    params = SamplingParams(max_new_tokens=12, ignore_eos=True)
    plain = Engine(decode_backend(loaded, "out_in"), kv_cache=False).generate(prompt, params)
    for layout in LAYOUTS:
        backend = decode_backend(loaded, layout)
        result = Engine(backend, kv_cache="static").generate(prompt, params)
        assert result.token_ids == plain.token_ids, layout
        assert layout in result.provenance["backend"]


@pytest.fixture(scope="module")
def record(tiny_models, loaded_tiny):
    loaded = loaded_tiny(tiny_models["llama"])
    prompt = random_ids(1, 7, seed=6)[0].tolist()  # tests/test_models.py: native greedy == generate here
    stages = [s for s in STAGES if not s.compiled]
    return measure_decode(loaded, threads=(1,), new_tokens=6, rounds=2, stages=stages, prompt=prompt,
                          bandwidth_bytes=2**20)


def test_the_decode_record_names_every_path_and_its_numbers(record):
    assert json.loads(json.dumps(record)) == record  # JSON-able as it is
    assert {"benchmark", "model", "new_tokens", "rounds", "weight_bytes_per_token", "method", "goal", "stages",
            "results", "provenance"} <= set(record)
    [block] = record["results"]
    assert block["threads"] == 1 and set(block["paths"]) == set(record["stages"])
    assert block["fastest"] in block["paths"] and isinstance(block["goal_met"], bool)
    assert block["goal_roofline_fraction"] == (0.8 if block["threads"] == 1 else 0.7)
    for row in [block["transformers"], *block["paths"].values()]:
        assert len(row["decode_tok_s_rounds"]) == 2 and row["decode_tok_s"] > 0 and row["ttft_s"] > 0
        assert row["roofline_fraction"] == pytest.approx(row["decode_tok_s"] * record["weight_bytes_per_token"]
                                                         / block["read_bandwidth_bytes_per_s"])
    for row in block["paths"].values():
        assert row["speedup_vs_transformers"] == pytest.approx(row["decode_tok_s"]
                                                               / block["transformers"]["decode_tok_s"])
    assert block["roofline_tok_s"] == pytest.approx(block["read_bandwidth_bytes_per_s"]
                                                    / record["weight_bytes_per_token"])
    assert record["provenance"]["model"] == "tiny-random"
    assert "fastest:" in format_decode(record)


def test_every_path_gives_transformers_tokens(record):
    [block] = record["results"]
    assert block["transformers"]["tokens_identical"]
    assert all(row["tokens_identical"] for row in block["paths"].values())


@pytest.mark.parametrize("kwargs, message", [
    ({"threads": (0,)}, "thread counts"), ({"threads": (10_000,)}, "thread counts"), ({"threads": ()}, "thread counts"),
    ({"new_tokens": 1}, "at least 2"), ({"rounds": 0}, "rounds"), ({"prompt": []}, "no token ids"),
])
def test_bad_benchmark_settings_are_refused(tiny_models, loaded_tiny, kwargs, message):
    loaded = loaded_tiny(tiny_models["llama"])
    settings = {"threads": (1,), "new_tokens": 4, "rounds": 1, "prompt": [1, 2, 3], **kwargs}
    with pytest.raises(BadRequest, match=message):
        measure_decode(loaded, **settings)


def test_a_non_float32_model_is_refused(tiny_models, loaded_tiny):
    import copy

    loaded = loaded_tiny(copy.deepcopy(tiny_models["gpt2"]).to(torch.bfloat16))
    with pytest.raises(BadRequest, match="float32"):
        measure_decode(loaded, threads=(1,), new_tokens=4, rounds=1, prompt=[1, 2, 3])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_the_compiled_decode_step_gives_the_same_tokens_and_compiles_once(tiny_models, name):
    from torch._dynamo.utils import counters

    native = native_from_hf(tiny_models[name])
    ids = random_ids(1, 7, seed=25)
    tokens, logits = greedy(native, ids, 12, static=False)
    torch._dynamo.reset()
    counters.clear()
    compiled = compile_decode(decode_optimised(native, "streamed"))
    compiled_tokens, compiled_logits = greedy(compiled, ids, 12, static=True)
    assert compiled_tokens == tokens
    torch.testing.assert_close(compiled_logits, logits, rtol=0, atol=TOL)
    # one block step for every block and position, one head: no recompilation as the cache grows,
    # nor for a second request with a cache of another size
    greedy(compiled, ids[:, :5], 20, static=True)
    assert counters["stats"]["unique_graphs"] == 2 and not counters["recompiles"]


@pytest.mark.slow
@pytest.mark.parametrize("layout,compiled", [("in_out", False), ("streamed", True)])
def test_smollm2_fast_paths_give_transformers_tokens_and_the_native_logits(smollm2, layout, compiled):
    # 1e-3: the bound of the full-size native model against transformers (tests/test_models.py)
    native = native_from_hf(smollm2.model)
    fast = decode_optimised(native, layout)
    if compiled:
        compile_decode(fast)
    ids = smollm2.tokenizer("An inference engine takes a trained model and a request, and it must turn them into",
                            return_tensors="pt", add_special_tokens=False).input_ids
    with torch.inference_mode():
        ref = smollm2.model.generate(ids, max_new_tokens=16, do_sample=False, use_cache=True, eos_token_id=None,
                                     attention_mask=torch.ones_like(ids), pad_token_id=0)
    tokens, logits = greedy(native, ids, 16, static=False)
    fast_tokens, fast_logits = greedy(fast, ids, 16, static=True)
    assert fast_tokens == tokens == ref[0, ids.shape[1]:].tolist()
    torch.testing.assert_close(fast_logits, logits, rtol=0, atol=1e-3)


def test_the_command_line_options():
    import argparse

    from inferlab.bench.decode import add_decode_arguments

    parser = argparse.ArgumentParser()
    add_decode_arguments(parser)
    defaults = parser.parse_args([])
    assert (defaults.model, defaults.threads, defaults.new_tokens, defaults.rounds, defaults.no_compile,
            defaults.json, defaults.stages) == ("smollm2-135m", None, 16, 3, False, False, "all")
    assert parser.parse_args(["--threads", "1", "--threads", "2", "--json"]).threads == [1, 2]
    assert parser.parse_args(["--stages", "short"]).stages == "short"
    assert SELECTIONS["all"] == STAGES and set(SELECTIONS["short"]) <= set(STAGES)
    assert any(stage.compiled for stage in SELECTIONS["short"])
    with pytest.raises(BadRequest, match="unknown selection"):
        run_decode_benchmark(stages="most")


def test_the_compile_selection_is_the_best_eager_stage_and_the_compiled_ones():
    import argparse

    from inferlab.bench.decode import add_decode_arguments

    parser = argparse.ArgumentParser()
    add_decode_arguments(parser)
    assert parser.parse_args(["--stages", "compile"]).stages == "compile"
    assert SELECTIONS["compile"] == (STAGES[4], STAGES[5], STAGES[6])
    assert [s.compiled for s in SELECTIONS["compile"]] == [False, True, True]
    assert [s.layout for s in SELECTIONS["compile"]] == ["in_out", "streamed", "in_out"]


def test_the_compile_ratio_is_recorded_and_printed(record):
    eager, compiled, slower = SELECTIONS["compile"]
    rows = {eager.name: {"decode_tok_s": 20.0, "decode_tok_s_rounds": [19.0, 20.0, 21.0], "tokens_identical": True},
            compiled.name: {"decode_tok_s": 30.0, "decode_tok_s_rounds": [28.5, 30.0, 31.5], "tokens_identical": True,
                            "compile_and_warm_up_s": 4.0},
            slower.name: {"decode_tok_s": 25.0, "decode_tok_s_rounds": [25.0, 25.0, 25.0], "tokens_identical": True}}
    ratio = compile_vs_eager(SELECTIONS["compile"], rows)
    assert ratio["compiled"] == compiled.name and ratio["eager"] == eager.name  # the fastest compiled path
    rows[slower.name]["decode_tok_s"] = 40.0
    assert compile_vs_eager(SELECTIONS["compile"], rows)["compiled"] == slower.name
    del rows[slower.name]
    assert ratio["ratio"] == pytest.approx(1.5) and ratio["round_ratios"] == pytest.approx([1.5, 1.5, 1.5])
    assert ratio["tokens_identical"]
    rows[eager.name]["tokens_identical"] = False
    assert not compile_vs_eager(SELECTIONS["compile"], rows)["tokens_identical"]
    assert compile_vs_eager(SELECTIONS["compile"], {eager.name: rows[eager.name]}) is None  # no compiled path
    assert compile_vs_eager([eager], rows) is None
    # the eager-only record of the fixture has no ratio, and its table no ratio line
    [block] = record["results"]
    assert block["compile_vs_eager"] is None and "torch.compile vs eager" not in format_decode(record)
    # a block with both paths prints the ratio line, and keeps the rest of the table
    import copy

    both = copy.deepcopy(record)
    block = both["results"][0]
    template = next(iter(block["paths"].values()))
    block["paths"] = {eager.name: {**template, **rows[eager.name], "tokens_identical": True},
                      compiled.name: {**template, **rows[compiled.name]}}
    block["fastest"] = compiled.name
    block["compile_vs_eager"] = compile_vs_eager(SELECTIONS["compile"], block["paths"])
    text = format_decode(both)
    assert "torch.compile vs eager: 1.50x decode tokens/s" in text and "compiling and warm-up 4.0 s" in text
    assert "fastest:" in text and "transformers generate" in text


def test_alternating_rounds_reverse_the_order_every_other_round():
    from inferlab.bench.decode import alternating_rounds

    calls, ticks = [], []
    paths = {name: (lambda name=name: calls.append(name) or len(calls)) for name in "ABC"}
    runs = alternating_rounds(paths, 3, after_round=lambda: ticks.append(len(calls)))
    assert calls == list("ABCCBAABC") and ticks == [3, 6, 9]
    assert runs == {"A": [1, 6, 7], "B": [2, 5, 8], "C": [3, 4, 9]}
