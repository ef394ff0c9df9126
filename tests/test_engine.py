"""The engine's loop, stop rules, streaming, seeds, threads and admission checks (Chapter 6).

A scripted model and tokenizer make every case exact: the model "predicts" a fixed script of ids.
"""
import random

import pytest
import torch

from inferlab.bench.stages import stream_steps
from inferlab.engine import (Backend, Engine, FullDecodeDetokenizer, IncrementalDetokenizer, ToyGenerator, find_stop,
                             held_back, toy_backend)
from inferlab.errors import BadRequest, InferlabError
from inferlab.models.toy import greedy_pick
from inferlab.records import STAGES
from inferlab.sampling import DecodingRule
from inferlab.sampling.params import SamplingParams

VOCAB = ["a", "b", "c", " ", "S", "T", "O", "P", "<eos>"]
EOS = 8


class ScriptTokenizer:
    def __init__(self, vocab):
        self.vocab = vocab

    def tokenize(self, text):
        return list(text)

    def convert_tokens_to_ids(self, pieces):
        return [self.vocab.index(p) for p in pieces]

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)


class ScriptModel:
    """Logits that put the most weight on script[k] at step k; counts its calls."""

    max_positions = 64

    def __init__(self, vocab_size, script):
        self.vocab_size, self.script, self.calls = vocab_size, script, 0

    def new_cache(self):
        return None

    def __call__(self, input_ids, positions=None, cache=None, last_only=False):
        logits = torch.zeros(input_ids.shape[0], input_ids.shape[1], self.vocab_size, dtype=torch.bfloat16)
        logits[:, -1, self.script[self.calls]] = 1.0
        self.calls += 1
        return logits


def scripted(script, vocab=VOCAB, decode=None):
    tokenizer = ScriptTokenizer(vocab)
    if decode is not None:
        tokenizer.decode = decode
    return Backend("scripted", ScriptModel(len(vocab), script), tokenizer, frozenset({EOS}), "cpu",
                   {"backend": "scripted"}, simulated_stages=("forward_pass",))


def run(script, stop=(), max_new_tokens=None, **kw):
    engine = Engine(scripted(script, **kw))
    events = list(engine.stream("a", SamplingParams(max_new_tokens=max_new_tokens or len(script), stop=stop)))
    return engine, events, events[-1].result


def test_stop_at_length_one_model_call_per_step_and_float32_logits():
    engine, events, result = run([0, 1, 2])
    assert result.text == "abc" and result.stop_reason == "length" and result.token_ids == [0, 1, 2]
    assert "".join(e.text for e in events) == "abc" and events[-1].done and engine.backend.model.calls == 3
    logits = Engine(scripted([1])).runner.logits([[0, 1]])
    assert logits.dtype == torch.float32 and logits.shape == (1, len(VOCAB))  # the model returned bfloat16


def test_the_runner_copies_the_last_position_so_the_full_output_is_freed_inside_the_model_call():
    class Float32Script(ScriptModel):
        def __call__(self, input_ids, positions=None, cache=None, last_only=False):
            return super().__call__(input_ids, positions, cache, last_only).float()

    backend = scripted([1])
    backend.model = Float32Script(len(VOCAB), [1])
    runner = Engine(backend).runner
    runner.last_only = False
    logits = runner.logits([[0, 1, 2, 3]])
    assert logits.shape == (1, len(VOCAB))
    assert logits.untyped_storage().nbytes() == logits.numel() * 4  # its own storage, not a view of [1, 4, V]


def test_stop_at_end_of_sequence_which_is_not_part_of_the_text():
    _, events, result = run([0, 1, EOS, 2], max_new_tokens=4)
    assert result.stop_reason == "eos" and result.text == "ab" and result.token_ids == [0, 1]
    assert "".join(e.text for e in events) == "ab" and EOS not in [e.token_id for e in events]


def test_ignore_eos_keeps_going_to_the_budget():
    engine = Engine(scripted([0, EOS, 1]))
    result = engine.generate("a", SamplingParams(max_new_tokens=3, ignore_eos=True))
    assert result.token_ids == [0, EOS, 1] and result.stop_reason == "length"


def test_stop_string_is_cut_and_never_streamed():
    _, events, result = run([0, 3, 4, 5, 6, 7, 1], stop=("STOP",))
    assert result.stop_reason == "stop_string" and result.text == "a " and result.token_ids == [0, 3, 4, 5, 6, 7]
    streamed = "".join(e.text for e in events)
    assert streamed == "a " and "S" not in streamed


def test_earliest_of_several_stop_strings_wins():
    _, _, result = run([0, 4, 5, 6, 7, 1], stop=("OP", "ST"))
    assert result.text == "a" and result.stop_reason == "stop_string"


def test_a_false_start_of_a_stop_string_is_released_later():
    _, events, result = run([4, 5, 0, 1], stop=("STOP",))
    assert result.stop_reason == "length" and result.text == "STab"
    assert [e.text for e in events if not e.done] == ["", "", "STa", "b"]


def test_held_back_and_find_stop():
    assert held_back("abcST", ["STOP"]) == 2 and held_back("abc", ["STOP"]) == 0
    assert held_back("xS", ["STOP", "SX"]) == 1 and held_back("", ["STOP"]) == 0
    assert find_stop("xxSTOP", 2, ["STOP"]) == 2 and find_stop("STOPxx", 2, ["STOP"]) is None


def test_find_stop_in_the_tail_agrees_with_a_full_search():
    rng = random.Random(0)
    for _ in range(2000):
        stops = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 3))]
        text = ""
        for _ in range(12):
            new = "".join(rng.choice("abc") for _ in range(rng.randint(0, 3)))
            text += new
            tail = find_stop(text, len(new), stops)
            hits = [text.find(s) for s in stops if s in text]
            full = min(hits) if hits else None
            assert tail == full, (text, new, stops)
            if full is not None:
                break


def test_incomplete_utf8_characters_wait_for_their_last_byte(gpt2_tokenizer):
    emoji_ids = gpt2_tokenizer.encode("a🙂")
    assert len(emoji_ids) > 2  # GPT-2 splits this emoji into byte-level pieces
    vocab = ["x"] * len(gpt2_tokenizer)
    backend = scripted(emoji_ids, vocab=vocab, decode=gpt2_tokenizer.decode)
    events = list(Engine(backend).stream([0], SamplingParams(max_new_tokens=len(emoji_ids))))
    assert [e.text for e in events[:-1]] == ["a"] + [""] * (len(emoji_ids) - 2) + ["🙂"]


@pytest.mark.parametrize("detokenizer", [IncrementalDetokenizer, FullDecodeDetokenizer])
@pytest.mark.parametrize("which", ["gpt2", "smollm2"])
def test_incremental_detokenization_equals_a_full_decode(which, detokenizer, gpt2_tokenizer):
    if which == "gpt2":
        tokenizer = gpt2_tokenizer
    else:
        from inferlab.text.counts import load_tokenizer
        tokenizer = load_tokenizer("smollm2-135m")
    rng = random.Random(1)
    alphabet = list("abc XYZ,.\n") + list("äöüßéñ") + list("東京晴語") + ["🙂", "🚀", "👩‍💻"]
    decode = lambda ids: tokenizer.decode(ids)  # noqa: E731
    for _ in range(150):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        ids = tokenizer.encode(text, add_special_tokens=False)
        # the prompt ends after a whole character; the answer may hold any characters, split anywhere
        cuts = [c for c in range(1, len(ids)) if not decode(ids[:c]).endswith("\ufffd")]
        if not cuts:
            continue
        prompt, stream = ids[:(cut := rng.choice(cuts))], ids[cut:]
        detok = detokenizer(decode, prompt)
        pieces = []
        for k, token in enumerate(stream, 1):
            pieces.append(detok.push(token))
            # after every token: exactly the whole characters so far, never half of one
            assert detok.text == decode(stream[:k]).rstrip("\ufffd"), (which, text, cut, k)
        pieces.append(detok.flush())
        assert "".join(pieces) == detok.text == decode(stream), (which, text, cut)


def test_the_full_decode_detokenizer_streams_the_same_events(gpt2_tokenizer):
    ids = gpt2_tokenizer.encode("Grüße 東京 🙂 a STOP b")
    vocab = ["x"] * len(gpt2_tokenizer)
    streams = []
    for detokenizer in (IncrementalDetokenizer, FullDecodeDetokenizer):
        engine = Engine(scripted(ids, vocab=vocab, decode=gpt2_tokenizer.decode), detokenizer=detokenizer)
        events = list(engine.stream([0], SamplingParams(max_new_tokens=len(ids), stop=(" STOP",))))
        streams.append([(e.step, e.token_id, e.text, e.done) for e in events])
        assert events[-1].result.text == "Grüße 東京 🙂 a" and events[-1].result.stop_reason == "stop_string"
    assert streams[0] == streams[1]
    with pytest.raises(BadRequest, match="detokenizer"):
        Engine(toy_backend(), detokenizer="incremental")


def test_stream_steps_split_each_step_into_model_and_engine_time():
    engine = Engine(scripted([0, 1, 4, 5, 6, 7, 2]))
    events = list(engine.stream("a", SamplingParams(max_new_tokens=7, stop=("STOP",))))
    steps = stream_steps(events)
    result = events[-1].result
    assert [s.step for s in steps] == list(range(len(result.token_ids)))
    assert [s.text for s in steps] == ["a", "b", "", "", "", ""]  # "STO" held back, then cut
    assert [s.forward_s for s in steps] == result.step_seconds()
    assert steps[0].seconds == steps[0].elapsed_s == events[0].elapsed_s
    assert sum(s.seconds for s in steps) == pytest.approx(events[-1].elapsed_s)
    assert all(s.overhead_s == s.seconds - s.forward_s and s.overhead_s > 0 for s in steps)
    with pytest.raises(ValueError, match="finished"):
        stream_steps(events[:-1])
    two = list(Engine(toy_backend()).stream("Hi", SamplingParams(2, DecodingRule(do_sample=True), seed=0, n=2)))
    with pytest.raises(ValueError, match="one sample"):
        stream_steps(two)


def test_broken_utf8_streams_differ_from_a_full_decode_only_in_replacement_characters(gpt2_tokenizer):
    rng = random.Random(2)
    pool = sorted(set(gpt2_tokenizer.encode("Grüße 東京 🙂🚀 naïve")))
    for _ in range(200):
        stream = [rng.choice(pool) for _ in range(rng.randint(1, 30))]
        detok = IncrementalDetokenizer(gpt2_tokenizer.decode, [rng.choice(pool)])
        text = "".join(detok.push(i) for i in stream) + detok.flush()
        assert text.replace("\ufffd", "") == gpt2_tokenizer.decode(stream).replace("\ufffd", "")


def test_fresh_seed_is_recorded_and_replays_the_run():
    engine = Engine(toy_backend(7))
    rule = DecodingRule(do_sample=True, temperature=1.5)
    first = engine.generate("Hello", SamplingParams(max_new_tokens=24, rule=rule))
    second = engine.generate("Hello", SamplingParams(max_new_tokens=24, rule=rule))
    assert isinstance(first.params["seed"], int) and first.params["seed"] != second.params["seed"]
    assert first.token_ids != second.token_ids  # two users do not get the same "random" text
    replay = engine.generate("Hello", SamplingParams(max_new_tokens=24, rule=rule, seed=first.params["seed"]))
    assert replay.token_ids == first.token_ids
    assert engine.generate("Hello", SamplingParams(max_new_tokens=4)).params["seed"] is None  # greedy


def test_n_samples_equal_single_requests_with_seeds_seed_plus_i():
    engine = Engine(toy_backend(7))
    rule = DecodingRule(do_sample=True, top_k=10)
    together = engine.generate_all("Hi", SamplingParams(max_new_tokens=16, rule=rule, seed=40, n=4))
    alone = [engine.generate("Hi", SamplingParams(max_new_tokens=16, rule=rule, seed=40 + i)) for i in range(4)]
    assert [r.index for r in together] == [0, 1, 2, 3]
    assert [r.token_ids for r in together] == [r.token_ids for r in alone]
    assert [r.params["seed"] for r in together] == [40, 41, 42, 43]
    with pytest.raises(BadRequest, match="generate_all"):
        engine.generate("Hi", SamplingParams(n=2))


def test_toy_generator_is_the_engine_and_matches_an_inline_greedy_loop():
    toy = ToyGenerator(seed=7)
    ids = toy.engine.backend.tokenizer.convert_tokens_to_ids(list("Hello"))
    for _ in range(12):
        ids.append(greedy_pick(toy.model.next_token_probs(ids)))
    result = toy.generate("Hello", 12)
    assert result.token_ids == ids[5:] and result.text == toy.engine.backend.tokenizer.decode(ids[5:])
    assert [t.stage for t in result.timings[:3]] == list(STAGES[:3]) and result.timings[-1].stage == "response_format"


def test_threads_are_set_while_generating_and_restored_even_when_a_stream_is_abandoned():
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    engine = Engine(toy_backend(7), threads=target)
    seen = []

    class Watch:  # a model that records the thread count it runs under
        vocab_size, max_positions = 57, None

        def new_cache(self):
            return None

        def __call__(self, input_ids, positions=None, cache=None, last_only=False):
            seen.append(torch.get_num_threads())
            return torch.zeros(input_ids.shape[0], 1, 57)

    engine.runner.model = Watch()
    assert engine.generate("Hi", SamplingParams(max_new_tokens=3)).provenance["threads"] == target
    assert torch.get_num_threads() == before
    for event in engine.stream("Hi", SamplingParams(max_new_tokens=50)):
        assert torch.get_num_threads() == target
        break  # abandon the stream: the loop drops it, Python closes it
    assert torch.get_num_threads() == before and set(seen) == {target}
    assert not engine.has_unfinished()  # the abandoned request was aborted
    engine.generate("Hi", SamplingParams(max_new_tokens=2))  # and the engine is free again


def test_busy_engine_and_manual_steps():
    engine = Engine(toy_backend(7))
    request_id = engine.add_request("Hello", SamplingParams(max_new_tokens=3))
    with pytest.raises(InferlabError, match="busy"):
        engine.generate("Hi")
    events = []
    while engine.has_unfinished():
        events += engine.step()
    assert events[-1].done and events[-1].result.request_id == request_id
    assert engine.step() == []


@pytest.mark.parametrize("prompt, params, message", [
    ("", SamplingParams(), "prompt is empty"),
    ("   ", SamplingParams(), "prompt is empty"),
    ([], SamplingParams(), "no token ids"),
    (7, SamplingParams(), "text or a list of token ids"),
    ([1, True], SamplingParams(), "whole numbers"),
    ([0, 99], SamplingParams(), "token ids must lie in"),
    ("a" * 60, SamplingParams(max_new_tokens=8), "context holds 64 positions"),
    ("a", "greedy", "params must be SamplingParams"),
])
def test_bad_requests_are_refused_before_anything_is_queued(prompt, params, message):
    engine = Engine(scripted([0] * 8))
    with pytest.raises(BadRequest, match=message):
        engine.add_request(prompt, params)
    assert not engine.has_unfinished() and engine.backend.model.calls == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"max_new_tokens": 0}, "max_new_tokens"), ({"max_new_tokens": 5000}, "max_new_tokens"),
    ({"max_new_tokens": 2.0}, "whole number"), ({"seed": -1}, "seed"), ({"n": 0}, "n must be"),
    ({"stop": ("",)}, "stop strings"), ({"rule": "greedy"}, "DecodingRule"),
])
def test_bad_sampling_parameters_are_refused_when_made(kwargs, message):
    with pytest.raises(BadRequest, match=message):
        SamplingParams(**kwargs)


def test_bad_engine_settings():
    with pytest.raises(BadRequest, match="threads"):
        Engine(toy_backend(), threads=0)
    with pytest.raises(BadRequest, match="keeps no cache|keeps none"):
        Engine(toy_backend(), kv_cache=True)


def test_the_engine_calls_a_model_in_exactly_one_place():
    """Every generation path (generate, stream, n samples, beam search) goes through ModelRunner.forward."""
    import ast
    import pathlib

    import inferlab.engine

    calls = []
    for path in sorted(pathlib.Path(inferlab.engine.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "model":
                calls.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "model":
                calls.append(f"{path.name}:{node.lineno}")
    assert len(calls) == 1 and calls[0].startswith("runner.py:"), calls


def test_only_a_rule_that_reads_the_history_gets_it():
    seen = []

    class Spy(DecodingRule):
        def next_tokens(self, input_ids, logits, generators=None, prompt_length=None):
            seen.append(input_ids)
            return super().next_tokens(input_ids, logits, generators, prompt_length=prompt_length)

    for rule in (Spy(), Spy(do_sample=True, temperature=0.5), Spy(repetition_penalty=1.3)):
        Engine(toy_backend(7)).generate("Hello", SamplingParams(3, rule, seed=0 if rule.do_sample else None))
    hello = toy_backend(7).tokenizer.convert_tokens_to_ids(list("Hello"))
    assert seen[0] is None and seen[3] is None and seen[6].tolist() == [hello] and seen[7].tolist()[0][:5] == hello


def test_additive_penalties_count_generated_ids_only_through_the_engine():
    """The engine tells the rule where the prompt ends: the presence and frequency penalties see the answer alone."""
    import torch

    backend = toy_backend(3)
    rule = DecodingRule(presence_penalty=2.0, frequency_penalty=1.5)
    result = Engine(backend).generate("Hello", SamplingParams(12, rule, ignore_eos=True))
    # The same loop by hand: one forward over all ids, the penalties applied to the generated ids only.
    ids = list(result.prompt_ids)
    for _ in range(12):
        logits = backend.model(torch.tensor([ids]))[:, -1, :].float()
        counts = torch.bincount(torch.tensor(ids[len(result.prompt_ids):], dtype=torch.long),
                                minlength=logits.shape[-1]).float()
        logits = logits - 1.5 * counts - 2.0 * (counts > 0).float()
        ids.append(int(torch.argmax(logits, -1)))
    assert result.token_ids == ids[len(result.prompt_ids):]
    plain = Engine(backend).generate("Hello", SamplingParams(12, DecodingRule(), ignore_eos=True))
    assert plain.token_ids != result.token_ids  # the penalties changed the answer, so the test can fail
