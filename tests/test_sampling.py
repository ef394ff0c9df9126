"""Chapter 5: decoding rules, checked against transformers' processors and beam search."""
from __future__ import annotations

import math

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
    FrequencyPenalty,
    Greedy,
    MinP,
    Multinomial,
    PresencePenalty,
    RepetitionPenalty,
    SamplingParams,
    Temperature,
    TopK,
    TopP,
    apply_processors,
    beam_search,
    generated_ids,
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


def test_min_temperature_is_a_choice_not_an_overflow_guard():
    """The floor's stated reason (Chapter 5): at MIN_TEMPERATURE a float32 softmax is greedy except among
    near-ties, while z / T overflows only far below it."""
    from inferlab.sampling.processors import FLOAT32_ZERO_GAP, MIN_TEMPERATURE

    top = 22.0
    near, far = top - 0.5 * FLOAT32_ZERO_GAP * MIN_TEMPERATURE, top - 1.1 * FLOAT32_ZERO_GAP * MIN_TEMPERATURE
    probs = torch.softmax(Temperature(MIN_TEMPERATURE)(None, torch.tensor([[top, near, far, 0.0]])), dim=-1)[0]
    assert torch.isfinite(probs).all() and probs[1] > 0 and probs[2] == 0 and probs[3] == 0
    assert abs(float(probs.sum()) - 1.0) < 1e-6
    # logits far larger than any model's stay finite at the floor; overflow needs |z| / T above float32's max
    huge = torch.tensor([[3.0e34, 0.0, -3.0e34]])
    assert torch.isfinite(Temperature(MIN_TEMPERATURE)(None, huge)).all()
    limit = torch.finfo(torch.float32).max
    assert torch.isfinite(torch.tensor([top]) / (2 * top / limit)).all()  # finite far below the floor
    assert torch.isnan(torch.softmax(torch.tensor([top, 0.0]) / (top / limit / 2), dim=-1)).any()  # inf - inf
    with pytest.raises(BadRequest, match="greedy decoding except among near-ties"):
        Temperature(MIN_TEMPERATURE / 2)


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


def test_multinomial_is_an_exponential_race():
    # torch.multinomial(p, 1) is argmax(p / q) with q ~ Exp(1), one draw per vocabulary entry
    # (multinomial_out in aten/src/ATen/native/Distributions.cpp): same draw, same generator state after.
    probs = torch.softmax(torch.randn(3, 1000, generator=torch.Generator().manual_seed(5)) * 2, -1)
    for seed in range(20):
        g_draw, g_race = make_generator(seed), make_generator(seed)
        drawn = torch.multinomial(probs, 1, generator=g_draw)
        q = torch.empty_like(probs).exponential_(1, generator=g_race)
        assert torch.equal(drawn, torch.argmax(probs / q, dim=-1, keepdim=True))
        assert torch.equal(g_draw.get_state(), g_race.get_state())
    g_draw, g_race = make_generator(3), make_generator(3)  # the installed torch takes the race for one draw with replacement too
    drawn = torch.multinomial(probs, 1, replacement=True, generator=g_draw)
    q = torch.empty_like(probs).exponential_(1, generator=g_race)
    assert torch.equal(drawn, torch.argmax(probs / q, dim=-1, keepdim=True))
    g_draw, g_uniform = make_generator(0), make_generator(0)
    torch.multinomial(probs[0], 1, generator=g_draw)
    torch.empty(1000, dtype=torch.float64).uniform_(generator=g_uniform)
    assert torch.equal(g_draw.get_state(), g_uniform.get_state())  # one 64-bit number per entry


def test_truncation_with_the_same_generator_keeps_the_untruncated_token_when_it_survives(logits):
    # the race picks argmax(p / q); truncating and renormalising leaves the winner unchanged if it is kept
    for rule in (DecodingRule(do_sample=True, top_k=5), DecodingRule(do_sample=True, top_p=0.5),
                 DecodingRule(do_sample=True, min_p=0.2)):
        kept_sets = torch.isfinite(rule.process(None, logits))
        for seed in range(10):
            plain = Multinomial()(logits, [make_generator(seed + 100 * i) for i in range(len(logits))])
            cut = rule.next_tokens(None, logits, [make_generator(seed + 100 * i) for i in range(len(logits))])
            survives = kept_sets.gather(-1, plain[:, None])[:, 0]
            assert torch.equal(plain == cut, survives)


def test_additive_penalties_match_the_documented_formula():
    # OpenAI: mu[j] -= c[j] * alpha_frequency + float(c[j] > 0) * alpha_presence, c counting generated tokens
    scores = torch.tensor([[2.0, -1.0, 0.5, 3.0, 0.0, -2.5]])
    prompt = [3, 3, 5]
    generated = [0, 2, 0, 0, 1]
    ids = torch.tensor([prompt + generated])
    rule = DecodingRule(frequency_penalty=0.5, presence_penalty=0.3)
    hand = scores[0].tolist()
    for token in set(generated):
        hand[token] -= generated.count(token) * 0.5 + 0.3
    out = rule.process(ids, scores.clone(), prompt_length=len(prompt))
    torch.testing.assert_close(out, torch.tensor([hand]), atol=1e-6, rtol=0)
    assert out[0, 3] == scores[0, 3] and out[0, 5] == scores[0, 5]  # prompt-only tokens are not penalised
    assert torch.equal(FrequencyPenalty(0.5)(torch.tensor(generated), scores[0]),
                       scores[0] - 0.5 * torch.tensor([3.0, 1.0, 1.0, 0.0, 0.0, 0.0]))
    assert torch.equal(PresencePenalty(0.3)(torch.tensor([], dtype=torch.long), scores[0]), scores[0])


def test_additive_penalties_come_after_the_repetition_penalty():
    # vLLM's apply_penalties: repetition (prompt and output) first, then frequency and presence (output only)
    scores = torch.tensor([[2.0, -1.0, 0.5, 3.0]])
    ids = torch.tensor([[3, 0, 0, 1]])  # prompt [3], generated [0, 0, 1]
    rule = DecodingRule(repetition_penalty=2.0, frequency_penalty=1.0, presence_penalty=0.5)
    want = torch.tensor([[2.0 / 2 - 2 - 0.5, -1.0 * 2 - 1 - 0.5, 0.5, 3.0 / 2]])
    torch.testing.assert_close(rule.process(ids, scores, prompt_length=1), want)
    assert rule.needs_history and rule.needs_prompt_length
    assert [type(p) for p in rule.processors] == [RepetitionPenalty, FrequencyPenalty, PresencePenalty]


def test_additive_penalties_need_the_prompt_length_and_count_rows_apart():
    rule = DecodingRule(do_sample=True, presence_penalty=1.0)
    scores = torch.zeros(2, 5)
    ids = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4]])
    with pytest.raises(BadRequest, match="prompt_length"):
        rule.process(ids, scores)
    with pytest.raises(BadRequest, match="prompt_length"):
        rule.next_tokens(ids, scores, [make_generator(0), make_generator(1)])
    out = rule.process(ids, scores, prompt_length=[3, 1])  # row 0 generated [4], row 1 generated [2, 3, 4]
    assert out.tolist() == [[0, 0, 0, 0, -1], [0, 0, -1, -1, -1]]
    assert generated_ids(ids, [3, 1]).tolist() == [[4, -1, -1], [2, 3, 4]]
    with pytest.raises(BadRequest):
        generated_ids(ids, [5, 1])


@pytest.mark.parametrize("bad", [2.5, -2.01, float("nan"), float("inf"), "0.5", True, None])
def test_additive_penalties_are_refused_outside_minus_two_to_two(bad):
    with pytest.raises(BadRequest, match="in \\[-2, 2\\]"):
        DecodingRule(presence_penalty=bad)
    with pytest.raises(BadRequest, match="in \\[-2, 2\\]"):
        DecodingRule(frequency_penalty=bad)


def test_rules_with_additive_penalties_are_labelled_and_recorded_but_have_no_generate_arguments():
    rule = DecodingRule(do_sample=True, top_p=0.9, frequency_penalty=0.5, presence_penalty=-0.2)
    assert rule.label() == "top_p=0.9, frequency_penalty=0.5, presence_penalty=-0.2"
    assert rule.settings() == {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 0.9,
                               "presence_penalty": -0.2, "frequency_penalty": 0.5}
    with pytest.raises(BadRequest, match="generate"):
        rule.hf_kwargs()
    record = SamplingParams(4, rule, seed=1).to_dict(1)
    assert record["frequency_penalty"] == 0.5 and record["rule"] == rule.label()
    assert DecodingRule(presence_penalty=0.0, frequency_penalty=0).processors == ()
    assert not DecodingRule(repetition_penalty=1.2).needs_prompt_length


def test_the_repetition_penalty_depends_on_where_zero_sits_and_the_softmax_does_not():
    scores = torch.tensor([[4.0, 3.0, 1.0, 0.5]])
    seen = torch.tensor([[0]])  # the most probable token has already appeared
    penalty = RepetitionPenalty(1.3)
    for shift in (-4.0, 0.0, 10.0):
        torch.testing.assert_close(torch.softmax(scores + shift, -1), torch.softmax(scores, -1))
    top = {shift: float(torch.softmax(penalty(seen, scores + shift), -1)[0, 0]) for shift in (-4.0, 0.0, 10.0)}
    assert top[-4.0] == pytest.approx(float(torch.softmax(scores, -1)[0, 0]))  # logit 0: not penalised at all
    assert top[10.0] < top[0.0] < top[-4.0]  # the farther above zero, the larger the cut
    # the additive penalties are shift-invariant: same probabilities whatever the offset
    rule = DecodingRule(frequency_penalty=1.0)
    ids = torch.tensor([[2, 0]])
    assert torch.allclose(torch.softmax(rule.process(ids, scores + 10.0, prompt_length=1), -1),
                          torch.softmax(rule.process(ids, scores, prompt_length=1), -1))


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


class ScriptedLogits:
    """A :class:`~inferlab.sampling.beam.LogitsSource` whose next-token probabilities depend on the last id only."""

    vocab_size, max_positions = 4, None  # ids: 0 end-of-sequence, 1 "a", 2 "b", 3 "c"
    TABLE = {None: [0.5, 0.37, 0.13, 1e-9], 1: [0.6, 1e-9, 1e-9, 0.4], 2: [1e-4, 1e-9, 1e-9, 0.9999],
             3: [1e-4, 1e-9, 1e-9, 0.9999]}

    def logits(self, rows):
        return torch.log(torch.tensor([self.TABLE[row[-1] if len(row) > 1 else None] for row in rows]))


def test_early_stopping_false_is_a_heuristic_that_never_corrects():
    # After two steps two hypotheses have finished ("<eos>" at -0.69, "a <eos>" at -0.75 per token) and the
    # best running beam, "a c", scores -1.91 / 2 = -0.96 at its current length: False stops there. But
    # "a c c c ..." costs almost nothing per extra token, and divided by its final length it reaches
    # about -0.16. "never" bounds the running beam at the maximum length (-1.91 / 12) and finds it.
    source, prompt = ScriptedLogits(), [3]
    runs = {mode: beam_search(source, prompt, num_beams=2, max_new_tokens=12, eos_token_id=0,
                              length_penalty=1.0, early_stopping=mode) for mode in (True, False, "never")}
    assert runs[True].steps == runs[False].steps == 2 and runs["never"].steps == 12
    assert runs[False].sequences[0] == [0] and runs[False].scores[0] == pytest.approx(math.log(0.5))
    assert runs["never"].sequences[0] == [1] + [3] * 11
    assert runs["never"].scores[0] == pytest.approx((math.log(0.37) + math.log(0.4) + 10 * math.log(0.9999)) / 12)
    assert runs["never"].scores[0] > runs[False].scores[0] + 0.5
    # without a length penalty the current length is already a bound: the two agree
    flat = {mode: beam_search(source, prompt, 2, 12, eos_token_id=0, length_penalty=0.0, early_stopping=mode)
            for mode in (False, "never")}
    assert flat[False].sequences[0] == flat["never"].sequences[0] and flat[False].steps == flat["never"].steps


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
