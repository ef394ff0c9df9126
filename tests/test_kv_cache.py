"""The KV cache of the native models: the same tokens and logits as recomputing, its rows and its bytes (Chapter 9).

Tolerance: with a cache, each step's matrix products have one row where the recomputation has one
row per position, so the BLAS library may sum in another order; in float32 that moves logits of
order one by about 1e-6 (the largest difference measured, over 20 greedy steps of each tiny model,
was 2.6e-6). TOL is the bound of the native models against transformers (tests/test_models.py),
about forty times that: loose enough for any summation order, tight enough to catch a wrong key.
"""
import pytest
import torch

from inferlab.analysis.sizing import kv_cache_bytes
from inferlab.engine import Backend, Engine
from inferlab.errors import BadRequest
from inferlab.models import native_from_hf
from inferlab.models.kv_cache import CacheFull, DynamicKVCache, StaticKVCache
from inferlab.sampling import DecodingRule
from inferlab.sampling.params import SamplingParams

TOL = 1e-4
VOCAB = 128  # of every tiny model
CACHES = ["none", "dynamic", "static"]


def random_ids(batch, seq, seed):
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def make_cache(model, kind, max_length=40):
    if kind == "none":
        return None
    return model.new_cache(static=True, max_length=max_length) if kind == "static" else model.new_cache()


def greedy_run(model, ids, steps, kind):
    """Greedy tokens and each step's last logits: recomputing everything, or prefill then one id per step."""
    cache = make_cache(model, kind, max_length=ids.shape[1] + steps)
    tokens, logits = [], []
    fed = ids
    with torch.inference_mode():
        for _ in range(steps):
            last = model(fed, cache=cache, last_only=True)[:, -1]
            next_id = last.argmax(-1, keepdim=True)
            tokens.append(int(next_id))
            logits.append(last)
            ids = torch.cat([ids, next_id], dim=1)
            fed = ids if cache is None else next_id
    return tokens, torch.stack(logits)


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama-mqa"])
def test_cached_greedy_tokens_and_logits_equal_recomputation(tiny_models, name):
    native = native_from_hf(tiny_models[name])
    ids = random_ids(1, 7, seed=25)
    runs = {kind: greedy_run(native, ids, 20, kind) for kind in CACHES}
    for kind in ("dynamic", "static"):
        assert runs[kind][0] == runs["none"][0], kind
        torch.testing.assert_close(runs[kind][1], runs["none"][1], rtol=0, atol=TOL)
    steps = runs["none"][1]
    assert (steps[1:] - steps[:-1]).abs().amax(-1).min() > 100 * TOL  # every step's logits are new ones


@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_prefill_then_single_steps_give_every_positions_logits(tiny_models, name, kind):
    native = native_from_hf(tiny_models[name])
    ids = random_ids(2, 15, seed=12)
    cache = make_cache(native, kind)
    with torch.inference_mode():
        full = native(ids)
        parts = [native(ids[:, :9], cache=cache)]  # prefill several positions at once
        parts += [native(ids[:, i:i + 1], cache=cache) for i in range(9, 12)]
        parts.append(native(ids[:, 12:], torch.arange(12, 15), cache=cache))  # explicit positions that continue
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=0, atol=TOL)
    assert cache.length == 15


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_selecting_and_repeating_batch_rows(tiny_models, kind):
    native = native_from_hf(tiny_models["llama"])
    rows = random_ids(3, 10, seed=13)
    cache = make_cache(native, kind)
    with torch.inference_mode():
        native(rows[:, :8], cache=cache)
        cache.batch_select_indices(torch.tensor([2, 0]))  # drop row 1, swap the other two
        kept = native(rows[[2, 0], 8:], cache=cache)
        torch.testing.assert_close(kept, native(rows[[2, 0]])[:, 8:], rtol=0, atol=TOL)

        shared = make_cache(native, kind)
        native(rows[:1, :6], cache=shared)  # one prompt, prefilled once
        shared.batch_repeat_interleave(3)
        tails = random_ids(3, 2, seed=14)  # three samples continue it differently
        continued = native(tails, cache=shared)
        alone = native(torch.cat([rows[:1, :6].expand(3, 6), tails], dim=1))[:, 6:]
    torch.testing.assert_close(continued, alone, rtol=0, atol=TOL)
    assert [k.shape[0] for k in shared.keys] == [3, 3]


def test_a_static_cache_refuses_more_positions_than_it_holds(tiny_models):
    native = native_from_hf(tiny_models["gpt2"])
    cache = native.new_cache(static=True, max_length=10)
    with torch.inference_mode():
        native(random_ids(1, 8, seed=15), cache=cache)
        native(random_ids(1, 2, seed=16), cache=cache)  # exactly full
        with pytest.raises(CacheFull, match="holds 10 positions; 10 are filled and 1 more do not fit"):
            native(random_ids(1, 1, seed=17), cache=cache)
    assert issubclass(CacheFull, BadRequest)
    with pytest.raises(ValueError, match="at least one position"):
        StaticKVCache(2, 0)


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama-mqa"])
def test_bytes_held_equal_the_formula(tiny_models, name):
    native = native_from_hf(tiny_models[name])
    dynamic, static = native.new_cache(), native.new_cache(static=True, max_length=50)
    assert dynamic.nbytes() == static.nbytes() == 0  # nothing is allocated before the first keys
    with torch.inference_mode():
        for cache in (dynamic, static):
            native(random_ids(2, 12, seed=18), cache=cache)
            native(random_ids(2, 1, seed=19), cache=cache)
    assert dynamic.nbytes() == kv_cache_bytes(native.shape, 13, batch=2, dtype="float32")
    assert static.nbytes() == kv_cache_bytes(native.shape, 50, batch=2, dtype="float32")  # paid up front
    static.batch_select_indices(torch.tensor([1]))
    assert static.nbytes() == kv_cache_bytes(native.shape, 50, batch=1, dtype="float32")
    assert isinstance(dynamic, DynamicKVCache) and isinstance(static, StaticKVCache)


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama-mqa"])
@pytest.mark.parametrize("prompt_length", [1, 5])
def test_a_cache_holds_only_its_own_bytes_after_any_prompt(tiny_models, name, prompt_length):
    """A one-token prompt makes GPT-2's keys a contiguous view of the fused projection: the cache must copy them."""
    native = native_from_hf(tiny_models[name])
    dynamic, static = native.new_cache(), native.new_cache(static=True, max_length=prompt_length + 1)
    with torch.inference_mode():
        for cache in (dynamic, static):
            native(random_ids(1, prompt_length, seed=21), cache=cache)
    assert dynamic.nbytes() == kv_cache_bytes(native.shape, prompt_length, batch=1, dtype="float32")
    assert static.nbytes() == kv_cache_bytes(native.shape, prompt_length + 1, batch=1, dtype="float32")
    for tensor in dynamic.keys + dynamic.values:  # memory of its own, the exact size of the tensor
        assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()


def tiny_backend(model, tokenizer):
    return Backend("tiny native", model, tokenizer, frozenset(), "cpu", {"backend": "native (tiny)"})


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_the_engine_gives_the_same_tokens_with_either_cache(tiny_models, gpt2_tokenizer, name):
    native = native_from_hf(tiny_models[name])
    prompt = random_ids(1, 6, seed=20)[0].tolist()
    greedy = SamplingParams(max_new_tokens=20)
    sampled = SamplingParams(max_new_tokens=12, rule=DecodingRule(do_sample=True, temperature=1.0), seed=3, n=3)
    results = {}
    for kv_cache in (False, True, "static"):
        engine = Engine(tiny_backend(native, gpt2_tokenizer), kv_cache=kv_cache)
        one = engine.generate(prompt, greedy)
        three = engine.generate_all(prompt, sampled)  # one prefill, its cache repeated for three samples
        results[kv_cache] = (one.token_ids, [r.token_ids for r in three])
        assert one.provenance["kv_cache"] == kv_cache
    assert results[True] == results[False] == results["static"]
    assert len({tuple(t) for t in results[False][1]}) == 3  # the samples differ, so rows cannot be mixed up


def test_the_runner_refuses_a_static_cache_the_model_does_not_have(tiny_models, gpt2_tokenizer):
    from inferlab.models.hf import TransformersLM

    hf = TransformersLM(tiny_models["gpt2"], 64)
    with pytest.raises(BadRequest, match="static KV cache"):
        Engine(tiny_backend(hf, gpt2_tokenizer), kv_cache="static")
    with pytest.raises(BadRequest, match="kv_cache must be one of"):
        Engine(tiny_backend(native_from_hf(tiny_models["gpt2"]), gpt2_tokenizer), kv_cache="paged")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_smollm2_cached_native_greedy_equals_transformers_generate(smollm2, kind):
    native = native_from_hf(smollm2.model)
    prompt = "An inference engine takes a trained model and a request, and it must turn them into"
    ids = smollm2.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.inference_mode():
        ref = smollm2.model.generate(ids, max_new_tokens=24, do_sample=False, use_cache=True,
                                     attention_mask=torch.ones_like(ids), pad_token_id=0, eos_token_id=None)
    tokens, _ = greedy_run(native, ids, 24, kind)
    assert tokens == ref[0, ids.shape[1]:].tolist()


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_crop_rewinds_the_cache_as_if_the_dropped_positions_never_came(tiny_models, kind):
    native = native_from_hf(tiny_models["llama"])
    ids, other = random_ids(1, 12, seed=21), random_ids(1, 4, seed=22)
    cache, fresh = make_cache(native, kind), make_cache(native, kind)
    with torch.inference_mode():
        native(ids, cache=cache)
        cache.crop(8)  # keep positions 0..7
        assert cache.length == 8
        native(other[:, :2], cache=cache)  # two new positions, 8 and 9
        cache.crop(-2)  # a negative count removes from the end, as transformers' crop takes it
        assert cache.length == 8
        after_crop = native(other, cache=cache)
        native(ids[:, :8], cache=fresh)
        expected = native(other, cache=fresh)
    torch.testing.assert_close(after_crop, expected, rtol=0, atol=TOL)
    assert cache.length == fresh.length == 12
    if kind == "dynamic":  # the dropped positions are gone from the tensors, not only from `length`
        assert all(k.shape[2] == 12 for k in cache.keys)


@pytest.mark.parametrize("length", [13, -13])
def test_crop_refuses_to_keep_or_remove_more_than_the_cache_holds(tiny_models, length):
    native = native_from_hf(tiny_models["gpt2"])
    cache = native.new_cache()
    with torch.inference_mode():
        native(random_ids(1, 12, seed=23), cache=cache)
    with pytest.raises(ValueError, match="cannot crop a cache of 12 positions"):
        cache.crop(length)
    assert cache.length == 12
