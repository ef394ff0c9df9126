"""Perplexity and greedy agreement (inferlab.bench.quality, Chapter 12), on hand computations and tiny random models."""
import math

import pytest
import torch
import torch.nn.functional as F

from inferlab.bench.quality import (agreement_over_prompts, model_logits, perplexity, token_nll, window_spans)
from inferlab.models import decode_optimised, native_from_hf
from inferlab.models.quantized import quantize_decode


def table_model(vocab=5, seed=0):
    """A 'model' whose logits at a position depend only on the token there: a bigram table."""
    table = torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(seed))
    return table, (lambda ids: table[torch.tensor(list(ids))])


def test_perplexity_of_a_bigram_table_by_hand():
    table, fn = table_model()
    ids = [0, 3, 1, 4, 4, 2]
    log_probs = torch.log_softmax(table.double(), dim=-1)
    by_hand = -sum(float(log_probs[a, b]) for a, b in zip(ids, ids[1:])) / (len(ids) - 1)
    result = perplexity(fn, ids, window=len(ids), stride=len(ids) - 1)
    assert result["tokens_scored"] == len(ids) - 1
    assert result["mean_nll"] == pytest.approx(by_hand, rel=1e-12)
    assert result["perplexity"] == pytest.approx(math.exp(by_hand), rel=1e-12)


def test_uniform_logits_give_the_vocabulary_size():
    fn = lambda ids: torch.zeros(len(ids), 7)  # noqa: E731
    assert perplexity(fn, list(range(7)) * 3, window=4, stride=2)["perplexity"] == pytest.approx(7.0)


@pytest.mark.parametrize("n, window, stride", [(10, 4, 3), (10, 4, 2), (10, 4, 1), (2, 2, 1), (17, 5, 3), (9, 64, 32), (600, 512, 511)])
def test_windows_score_every_token_once(n, window, stride):
    spans = window_spans(n, window, stride)
    scored = [j for _, end, first in spans for j in range(first, end)]
    assert scored == list(range(1, n))
    for begin, end, first in spans:
        assert begin < first < end <= begin + window
    # every token after the first window sees at least window - stride tokens before it
    for begin, end, first in spans[1:]:
        assert first - begin >= window - stride


def test_window_settings_are_checked():
    with pytest.raises(ValueError):
        window_spans(10, 4, 4)
    with pytest.raises(ValueError):
        window_spans(1, 4, 4)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_one_window_equals_cross_entropy_of_the_transformers_model(tiny_models, name):
    model = tiny_models[name]
    ids = torch.randint(0, 128, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    expected = F.cross_entropy(logits[:-1].double(), torch.tensor(ids[1:]))
    result = perplexity(model_logits(model), ids, window=64, stride=32)
    assert result["windows"] == 1
    assert result["mean_nll"] == pytest.approx(float(expected), rel=1e-6)


def test_sliding_windows_score_with_the_context_of_their_window(tiny_models):
    model = tiny_models["llama"]
    ids = torch.randint(0, 128, (30,), generator=torch.Generator().manual_seed(2)).tolist()
    nll = token_nll(model_logits(model), ids, window=10, stride=5)
    # windows [0, 10), [5, 15), [10, 20), ...: token 12 is scored in the second, given ids 5 .. 11
    assert window_spans(30, 10, 5)[1] == (5, 15, 10)
    with torch.no_grad():
        logits = model(torch.tensor([ids[5:12]])).logits[0, -1]
    assert float(nll[11]) == pytest.approx(float(F.cross_entropy(logits[None].double(), torch.tensor([ids[12]]))),
                                           rel=1e-6)


def test_quantised_decode_model_gives_logits_at_every_position(tiny_models):
    native = native_from_hf(tiny_models["llama"])
    model = quantize_decode(decode_optimised(native, "streamed"), "q8_0")
    ids = list(range(20))
    fp = perplexity(model_logits(decode_optimised(native, "streamed")), ids, window=20, stride=10)
    q8 = perplexity(model_logits(model), ids, window=20, stride=10)
    assert q8["tokens_scored"] == fp["tokens_scored"] == 19
    assert q8["perplexity"] == pytest.approx(fp["perplexity"], rel=0.05)  # Q8_0 moves a tiny model's logits little


def test_agreement_over_prompts():
    result = agreement_over_prompts([[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[1, 2, 3], [4, 0, 6], [0, 8, 9]])
    assert result["common_prefixes"] == [3, 1, 0]
    assert result["mean_prefix"] == pytest.approx(4 / 3)
    assert result["min_prefix"] == 0 and result["identical"] == 1 and result["prompts"] == 3
    keyed = agreement_over_prompts({"a": [1, 2], "b": [3]}, {"a": [1, 2], "b": [3]})
    assert keyed["common_prefixes"] == [2, 1] and keyed["identical"] == 2
    with pytest.raises(ValueError):
        agreement_over_prompts([[1]], [[1], [2]])
