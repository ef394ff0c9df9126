"""Chapter 5: decoding rules, checked against transformers' processors and beam search."""
from __future__ import annotations


import pytest
import torch
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from inferlab.errors import BadRequest, InferlabError
from inferlab.sampling import (
    DecodingRule,
    Greedy,
    MinP,
    Multinomial,
    RepetitionPenalty,
    Temperature,
    TopK,
    TopP,
    apply_processors,
    beam_search,
    make_generator,
)


@pytest.fixture(scope="module")
def logits():
    """Eight rows of peaked random logits over a vocabulary of 500."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 500, generator=g) * 3.0


@pytest.fixture(scope="module")
def input_ids():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 500, (8, 12), generator=g)


def kept(scores):
    return torch.isfinite(scores)


PAIRS = [
    (Temperature(0.7), TemperatureLogitsWarper(0.7)),
    (Temperature(1.6), TemperatureLogitsWarper(1.6)),
    (TopK(5), TopKLogitsWarper(5)),
    (TopK(40, min_tokens_to_keep=3), TopKLogitsWarper(40, min_tokens_to_keep=3)),
    (TopP(0.5), TopPLogitsWarper(0.5)),
    (TopP(0.9), TopPLogitsWarper(0.9)),
    (TopP(0.05, min_tokens_to_keep=4), TopPLogitsWarper(0.05, min_tokens_to_keep=4)),
    (MinP(0.1), MinPLogitsWarper(0.1)),
    (MinP(0.9, min_tokens_to_keep=3), MinPLogitsWarper(0.9, min_tokens_to_keep=3)),
    (RepetitionPenalty(1.3), RepetitionPenaltyLogitsProcessor(1.3)),
    (RepetitionPenalty(0.8), RepetitionPenaltyLogitsProcessor(0.8)),
]


@pytest.mark.parametrize("ours,theirs", PAIRS, ids=[repr(p[0]) for p in PAIRS])
def test_processor_matches_transformers(ours, theirs, logits, input_ids):
    mine = ours(input_ids, logits.clone())
    ref = theirs(input_ids, logits.clone())
    assert torch.equal(kept(mine), kept(ref))
    torch.testing.assert_close(torch.softmax(mine, -1), torch.softmax(ref, -1), atol=1e-6, rtol=1e-5)


def test_chain_matches_transformers(logits, input_ids):
    ours = [RepetitionPenalty(1.2), Temperature(0.8), TopK(50), TopP(0.9), MinP(0.05)]
    theirs = [RepetitionPenaltyLogitsProcessor(1.2), TemperatureLogitsWarper(0.8), TopKLogitsWarper(50),
              TopPLogitsWarper(0.9), MinPLogitsWarper(0.05)]
    ref = logits.clone()
    for p in theirs:
        ref = p(input_ids, ref)
    mine = apply_processors(ours, input_ids, logits.clone())
    assert torch.equal(kept(mine), kept(ref))
    torch.testing.assert_close(torch.softmax(mine, -1), torch.softmax(ref, -1), atol=1e-6, rtol=1e-5)
    assert DecodingRule(do_sample=True, temperature=0.8, top_k=50, top_p=0.9, min_p=0.05,
                        repetition_penalty=1.2).processors == tuple(ours)


def test_one_dimensional_input_is_one_row(logits, input_ids):
    for processor in (TopK(7), TopP(0.8), MinP(0.2), RepetitionPenalty(1.5)):
        assert torch.equal(processor(input_ids[0], logits[0]), processor(input_ids, logits)[0])


def test_top_k_keeps_ties_at_the_boundary():
    scores = torch.tensor([[5.0, 3.0, 3.0, 3.0, 1.0, 0.0]])
    out = TopK(2)(None, scores)
    assert kept(out).tolist() == [[True, True, True, True, False, False]]
    assert torch.equal(kept(out), kept(TopKLogitsWarper(2)(None, scores)))


def test_top_p_keeps_tied_tokens_together():
    # probabilities 0.4, 0.2, 0.2, 0.2: p = 0.5 needs the first two, and the tie brings in all three
    scores = torch.log(torch.tensor([[0.4, 0.2, 0.2, 0.2]]))
    assert kept(TopP(0.5)(None, scores)).tolist() == [[True, True, True, True]]
    assert kept(TopP(0.4)(None, scores)).tolist() == [[True, False, False, False]]


def test_top_p_departs_from_transformers_on_exact_ties_only():
    # logits [2, 1, 1, 0], p = 0.7: after token 0 (mass 0.475) the two tied tokens come next.
    # The lab keeps both tied tokens; transformers ranks them by sort position and keeps only one.
    scores = torch.tensor([[2.0, 1.0, 1.0, 0.0]])
    assert kept(TopP(0.7)(None, scores)).tolist() == [[True, True, True, False]]
    assert kept(TopPLogitsWarper(0.7)(None, scores.clone())).tolist() == [[True, False, True, False]]
    # nudge one of the tied logits and the tie is gone: then both agree
    untied = torch.tensor([[2.0, 1.0, 1.001, 0.0]])
    assert torch.equal(kept(TopP(0.7)(None, untied)), kept(TopPLogitsWarper(0.7)(None, untied.clone())))


def test_top_p_one_keeps_everything(logits):
    assert torch.equal(TopP(1.0)(None, logits), logits)
    assert kept(TopPLogitsWarper(1.0)(None, logits.clone())).all()


def test_min_tokens_to_keep_overrides_the_threshold():
    scores = torch.tensor([[10.0, 0.0, -1.0, -2.0]])
    assert kept(TopP(0.5, min_tokens_to_keep=3)(None, scores)).sum() == 3
    assert kept(MinP(0.99, min_tokens_to_keep=2)(None, scores)).sum() == 2
    assert kept(TopK(1, min_tokens_to_keep=3)(None, scores)).sum() == 3
    assert kept(TopP(0.5)(None, scores)).sum() == 1


@pytest.mark.parametrize("bad", [0, 0.0, -0.5, float("nan"), float("inf"), "1", True, None, 1e-300])
def test_temperature_must_be_positive(bad):
    with pytest.raises(BadRequest, match="temperature"):
        Temperature(bad)
    with pytest.raises(InferlabError):
        DecodingRule(do_sample=True, temperature=bad)


@pytest.mark.parametrize("make", [lambda: TopK(0), lambda: TopK(2.5), lambda: TopP(0.0), lambda: TopP(1.5),
                                  lambda: MinP(-0.1), lambda: MinP(0.1, min_tokens_to_keep=0),
                                  lambda: RepetitionPenalty(0.0), lambda: RepetitionPenalty(None),
                                  lambda: DecodingRule(repetition_penalty="1.2"), lambda: make_generator(-1)])
def test_bad_parameters_are_refused(make):
    with pytest.raises(BadRequest):
        make()


def test_greedy_and_seeded_multinomial(logits):
    assert torch.equal(Greedy()(logits), logits.argmax(-1))
    gens = lambda seed: [make_generator(seed + i) for i in range(logits.shape[0])]  # noqa: E731
    first, again = Multinomial()(logits, gens(3)), Multinomial()(logits, gens(3))
    assert torch.equal(first, again)
    draws = torch.stack([Multinomial()(logits, gens(s)) for s in range(20)])
    assert len({tuple(row.tolist()) for row in draws}) > 1  # different seeds, different draws
    with pytest.raises(BadRequest):
        Multinomial()(logits, gens(0)[:2])


def test_multinomial_follows_the_distribution():
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0])
    g = make_generator(0)
    draws = torch.stack([Multinomial()(probs.log(), [g]) for _ in range(4000)])
    freq = torch.bincount(draws, minlength=4).float() / 4000
    assert freq[3] == 0
    torch.testing.assert_close(freq, probs, atol=0.03, rtol=0)


def test_decoding_rule_matches_transformers_names():
    rule = DecodingRule(do_sample=True, temperature=0.7, top_p=0.9)
    assert rule.hf_kwargs() == {"do_sample": True, "temperature": 0.7, "top_k": 0, "top_p": 0.9}
    assert rule.label() == "T=0.7, top_p=0.9"
    assert DecodingRule().label() == "greedy" and DecodingRule().processors == ()
    assert DecodingRule(top_k=5, top_p=0.5).processors == ()  # greedy ignores the warpers


def test_multinomial_rows_draw_as_if_alone(logits):
    # each row's draw depends on its own generator alone: a request's tokens do not change with its batch
    batch = Multinomial()(logits, [make_generator(seed) for seed in range(logits.shape[0])])
    alone = [int(Multinomial()(row, [make_generator(seed)])) for seed, row in enumerate(logits)]
    assert batch.tolist() == alone


class ModelLogits:
    """A test :class:`~inferlab.sampling.beam.LogitsSource` over a transformers model, counting its rows."""

    def __init__(self, model, max_positions: int):
        self.model = model
        self.vocab_size = model.config.vocab_size
        self.max_positions = max_positions
        self.calls: list[list[list[int]]] = []

    def logits(self, rows):
        self.calls.append([list(row) for row in rows])
        with torch.inference_mode():
            return self.model(input_ids=torch.tensor(rows), use_cache=False).logits[:, -1].float()


TINY_CONTEXT = 64


def _tiny_gpt2(seed: int = 0):
    """A two-layer GPT-2 over 97 ids in which every parameter, norms and biases included, is random."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=97, n_positions=TINY_CONTEXT,
                        bos_token_id=0, eos_token_id=None, pad_token_id=1)
    model = GPT2LMHeadModel(config).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=g) * 0.7)
    return model


PROMPT = [0, 17, 42, 8, 33]


def _hf_beams(model, prompt, eos, early_stopping, length_penalty=1.0, max_new_tokens=10):
    """transformers' beam search and the number of forward passes (steps) it ran."""
    calls = []
    hook = model.register_forward_hook(lambda module, args, output: calls.append(1))
    try:
        with torch.inference_mode():
            ref = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                 num_beams=3, do_sample=False, early_stopping=early_stopping,
                                 max_new_tokens=max_new_tokens, length_penalty=length_penalty, eos_token_id=eos,
                                 pad_token_id=1, use_cache=False, return_dict_in_generate=True, output_scores=True)
    finally:
        hook.remove()
    return ref, len(calls)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("early_stopping", [True, False, "never"])
@pytest.mark.parametrize("eos_at", [None, 1, 4])
def test_beam_search_matches_generate(seed, early_stopping, eos_at):
    model = _tiny_gpt2(seed)
    source = ModelLogits(model, TINY_CONTEXT)
    # make end-of-sequence a token the beams actually reach: the eos_at-th token of the plain best beam
    eos = None if eos_at is None else beam_search(source, PROMPT, 3, 10).sequences[0][eos_at]
    ours = beam_search(source, PROMPT, num_beams=3, max_new_tokens=10, eos_token_id=eos,
                       early_stopping=early_stopping)
    ref, _ = _hf_beams(model, PROMPT, eos, early_stopping)
    best = ref.sequences[0, len(PROMPT):].tolist()
    n = len(ours.sequences[0])
    assert best[:n] == ours.sequences[0] and all(t == 1 for t in best[n:])  # the rest is padding
    assert ours.scores[0] == pytest.approx(float(ref.sequences_scores[0]), abs=1e-4)


def _many_eos(seed: int, count: int) -> list[int]:
    """``count`` end-of-sequence ids out of 2..96: enough that several hypotheses finish early."""
    g = torch.Generator().manual_seed(seed)
    return sorted(torch.randperm(95, generator=g)[:count].add(2).tolist())


@pytest.mark.parametrize("seed,n_eos", [(0, 12), (4, 24), (7, 8)])
@pytest.mark.parametrize("early_stopping", [True, False, "never"])
@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
def test_beam_search_stops_like_generate_when_hypotheses_finish_early(seed, n_eos, early_stopping, length_penalty):
    model = _tiny_gpt2(seed)
    eos = _many_eos(seed, n_eos)
    ours = beam_search(ModelLogits(model, TINY_CONTEXT), PROMPT, num_beams=3, max_new_tokens=12, eos_token_id=eos,
                       early_stopping=early_stopping, length_penalty=length_penalty)
    ref, hf_steps = _hf_beams(model, PROMPT, eos, early_stopping, length_penalty, max_new_tokens=12)
    best = ref.sequences[0, len(PROMPT):].tolist()
    n = len(ours.sequences[0])
    assert best[:n] == ours.sequences[0] and all(t == 1 for t in best[n:])  # the rest is padding
    assert ours.scores[0] == pytest.approx(float(ref.sequences_scores[0]), abs=1e-4)
    assert ours.steps == hf_steps


def test_early_stopping_modes_differ_when_beams_finish_early():
    source = ModelLogits(_tiny_gpt2(4), TINY_CONTEXT)
    eos = _many_eos(4, 24)
    runs = {mode: beam_search(source, PROMPT, 3, 12, eos_token_id=eos, early_stopping=mode)
            for mode in (True, False, "never")}
    # True stops once three hypotheses have finished; False once no running beam can beat them at its
    # current length; "never" (length_penalty > 0) scores running beams at the maximum length, so runs longer.
    assert runs[True].steps < runs[False].steps < runs["never"].steps
    assert runs[True].sequences[0] != runs[False].sequences[0]  # stopping early lost the best hypothesis
    assert runs[True].scores[0] < runs[False].scores[0]


def test_beam_search_asks_the_source_for_equal_rows_and_counts_them():
    source = ModelLogits(_tiny_gpt2(0), TINY_CONTEXT)
    result = beam_search(source, PROMPT, num_beams=3, max_new_tokens=6)
    assert len(source.calls) == result.steps == 6
    assert [len(rows) for rows in source.calls] == [1, 3, 3, 3, 3, 3]  # the prompt, then one row per beam
    assert result.rows_forwarded == sum(len(rows) for rows in source.calls)
    for step, rows in enumerate(source.calls):
        assert {len(row) for row in rows} == {len(PROMPT) + step}
        assert all(row[:len(PROMPT)] == PROMPT for row in rows)


def test_beam_search_refuses_bad_prompts():
    source = ModelLogits(_tiny_gpt2(0), TINY_CONTEXT)
    with pytest.raises(BadRequest, match="no token ids"):
        beam_search(source, [], num_beams=2, max_new_tokens=4)
    with pytest.raises(BadRequest, match="context"):
        beam_search(source, [0] * 60, num_beams=2, max_new_tokens=5)
    with pytest.raises(BadRequest, match="token ids"):
        beam_search(source, [0, 97], num_beams=2, max_new_tokens=4)
    with pytest.raises(BadRequest, match="whole numbers"):  # the same check as the engine's admission
        beam_search(source, [0, 2.7], num_beams=2, max_new_tokens=4)
    assert source.calls == []  # refused before any forward pass


def test_beam_search_finishes_on_end_of_sequence():
    source = ModelLogits(_tiny_gpt2(0), TINY_CONTEXT)
    plain = beam_search(source, PROMPT, 3, 10).sequences[0]
    eos = plain[2]  # a token the best beam reaches, first at its third step
    ended = beam_search(source, PROMPT, 3, 10, eos_token_id=eos)
    assert ended.sequences[0] == plain[:3]  # the hypothesis that ended there won


def test_beam_search_with_one_beam_is_greedy():
    model = _tiny_gpt2(3)
    prompt = [0, 5, 6]
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        for _ in range(8):
            ids = torch.cat([ids, model(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    beams = beam_search(ModelLogits(model, TINY_CONTEXT), prompt, num_beams=1, max_new_tokens=8)
    assert beams.sequences[0] == ids[0, 3:].tolist()


@pytest.mark.parametrize("settings", [dict(num_beams=0), dict(num_beams=True), dict(max_new_tokens=0),
                                      dict(early_stopping="sometimes")])
def test_beam_search_refuses_bad_settings(settings):
    source = ModelLogits(_tiny_gpt2(0), TINY_CONTEXT)
    with pytest.raises(BadRequest):
        beam_search(source, [0, 1], **{"num_beams": 2, "max_new_tokens": 4, **settings})


def test_top_p_checker_tells_right_from_wrong():
    from inferbook.checks.ch05 import check_top_p

    assert check_top_p(lambda scores, p: TopP(p)(None, scores)) is True
    assert check_top_p(lambda scores, p: scores) is False

    def crosses(scores, p):  # the common mistake: remove the token whose cumulative mass crosses p
        sp, order = torch.sort(torch.softmax(scores, -1), descending=True)
        remove = sp.cumsum(-1) > p
        return scores.masked_fill(torch.zeros_like(remove).scatter(-1, order, remove), float("-inf"))

    assert check_top_p(crosses) is False


@pytest.mark.slow
def test_beam_search_on_the_bundled_model_matches_generate(smollm2):
    model = smollm2.model
    source = ModelLogits(model, smollm2.context)
    prompt = smollm2.tokenizer("Once upon a time", add_special_tokens=False).input_ids
    ours = beam_search(source, prompt, num_beams=3, max_new_tokens=8, eos_token_id=smollm2.tokenizer.eos_token_id)
    with torch.inference_mode():
        ref = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             num_beams=3, do_sample=False, max_new_tokens=8, length_penalty=1.0, early_stopping=False,
                             eos_token_id=smollm2.tokenizer.eos_token_id, pad_token_id=smollm2.tokenizer.eos_token_id,
                             use_cache=False, return_dict_in_generate=True, output_scores=True)
    assert ours.sequences[0] == ref.sequences[0, len(prompt):].tolist()
    assert ours.scores[0] == pytest.approx(float(ref.sequences_scores[0]), abs=1e-4)
