"""A decode step that can be timed again and again, on a real or a random cache (Chapters 7 and 8)."""
import pytest
import torch

from inferlab.bench.steps import operator_seconds, prefilled_cache, random_cache, repeatable_decode_step
from inferlab.models import native_from_hf
from inferlab.models.hf import TransformersLM
from inferlab.models.shape import shape_from_config

TOL = 1e-4  # of the native models against a recomputation (tests/test_kv_cache.py)


def models(tiny_models):
    hf = tiny_models["llama"]
    return {"native dynamic": (native_from_hf(hf), {}), "native static": (native_from_hf(hf), {"static": True}),
            "transformers": (TransformersLM(hf, 64), {})}


@pytest.mark.parametrize("which", ["native dynamic", "native static", "transformers"])
def test_every_call_of_a_repeatable_step_gives_the_logits_of_the_step_after_the_prompt(tiny_models, which):
    model, cache_args = models(tiny_models)[which]
    ids = torch.randint(0, 128, (1, 10), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        expected = model(torch.cat([ids, ids[:, -1:]], dim=1), last_only=True)  # the prompt, then its last id again
    cache = prefilled_cache(model, ids, model.new_cache(**cache_args))
    seen = []
    original = model.__call__

    def recording(*args, **kwargs):
        seen.append(original(*args, **kwargs))
        return seen[-1]

    step = repeatable_decode_step(recording, ids[:, -1:], torch.tensor([[10]]), cache)
    for _ in range(3):
        step()
    length = cache.get_seq_length() if hasattr(cache, "get_seq_length") else cache.length
    assert length == 10  # the prompt only, after every call
    for logits in seen:
        torch.testing.assert_close(logits, expected, rtol=0, atol=TOL)


def test_repeatable_step_refuses_ids_and_positions_of_different_shapes(tiny_models):
    model, _ = models(tiny_models)["native dynamic"]
    with pytest.raises(ValueError, match="same shape"):
        repeatable_decode_step(model, torch.zeros(1, 2, dtype=torch.long), torch.tensor([[5]]), model.new_cache())


@pytest.mark.parametrize("which", ["native dynamic", "transformers"])
def test_random_cache_holds_the_seeded_keys_of_the_model_shape(tiny_models, which):
    model, _ = models(tiny_models)[which]
    shape = shape_from_config(tiny_models["llama"].config)
    one, two = random_cache(model.new_cache(), shape, 7, seed=5), random_cache(model.new_cache(), shape, 7, seed=5)
    if which == "transformers":
        keys = [layer.keys for layer in one.layers] if hasattr(one, "layers") else one.key_cache
        keys_two = [layer.keys for layer in two.layers] if hasattr(two, "layers") else two.key_cache
    else:
        keys, keys_two = one.keys, two.keys
    assert len(keys) == shape.layers
    assert all(k.shape == (1, shape.kv_heads, 7, shape.head_dim) for k in keys)
    assert all(torch.equal(a, b) for a, b in zip(keys, keys_two))
    assert not torch.equal(keys[0], keys[1])  # each layer draws its own
    with pytest.raises(ValueError, match="at least one position"):
        random_cache(model.new_cache(), shape, 0)


def test_operator_seconds_gives_each_call_the_self_time_of_the_operators_it_ran():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    calls = operator_seconds(lambda: torch.cat([a @ b, a]), repeats=2)
    assert len(calls) == 2
    for seconds in calls:
        assert {"aten::mm", "aten::cat"} <= set(seconds)
        assert all(v >= 0 for v in seconds.values()) and seconds["aten::mm"] > 0
        assert "aten::repeat_interleave" not in seconds
    with pytest.raises(ValueError):
        operator_seconds(lambda: None, repeats=0)
