import pytest
import torch

from inferlab.engine.backends_old import NativeBackend, ToyBackend, TransformersBackend
from inferlab.engine import STOP_REASONS, Backend, Engine, held_back
from inferlab.sampling import DecodingRule
from inferlab.errors import BadRequest
from inferlab.records import TokenGenerator
from inferlab.runner import RealModelRunner
from inferlab.toy import ToyGenerator


class Scripted:
    """A backend that 'predicts' a fixed script of ids, over a tiny vocabulary."""

    device, context, simulated_stages, name = "cpu", 64, ["forward_pass"], "scripted"

    def __init__(self, vocab: list[str], script: list[int], eos: int | None = None):
        self.vocab, self.script = vocab, script
        self.eos_token_ids = frozenset() if eos is None else frozenset({eos})
        self.calls = 0

    def tokenize(self, text):
        return list(text)

    def encode(self, pieces):
        return [self.vocab.index(p) for p in pieces]

    def next_token_logits(self, ids):
        logits = torch.zeros(len(self.vocab))
        logits[self.script[self.calls]] = 1.0
        self.calls += 1
        return logits

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)

    def describe(self):
        return {"backend": "scripted"}


VOCAB = ["a", "b", "c", " ", "S", "T", "O", "P", "<eos>"]


def run(script, stop=(), eos=None, n=None):
    engine = Engine(Scripted(VOCAB, script, eos))
    events = list(engine.stream("a", n or len(script), stop))
    return events, events[-1].result


def test_the_engine_is_a_token_generator_and_backends_are_backends(smollm2):
    assert isinstance(Engine(ToyBackend()), TokenGenerator)
    assert isinstance(ToyBackend(), Backend) and isinstance(TransformersBackend(smollm2), Backend)
    assert set(STOP_REASONS) == {"length", "eos", "stop_string"}


def test_toy_backend_gives_the_toy_generators_tokens():
    assert Engine(ToyBackend(seed=7)).generate("Hello", 12).text == ToyGenerator(seed=7).generate("Hello", 12).text


def test_transformers_backend_matches_the_chapter_1_runner(smollm2):
    engine_result = Engine(TransformersBackend(smollm2)).generate("The capital of France is", 6)
    runner_result = RealModelRunner(smollm2).generate("The capital of France is", 6)
    assert engine_result.token_ids == runner_result.token_ids
    assert engine_result.stop_reason == "length" and engine_result.simulated_stages == []
    assert engine_result.metadata["backend"]["sha256"] == smollm2.provenance.sha256


def test_native_backend_matches_transformers_token_for_token(smollm2):
    prompt = "An inference engine takes a trained model and a request, and it must turn them into"
    native = Engine(NativeBackend(smollm2)).generate(prompt, 12)
    reference = Engine(TransformersBackend(smollm2)).generate(prompt, 12)
    assert native.token_ids == reference.token_ids
    assert native.metadata["backend"]["backend"] == "native (inferlab.models)"


def test_stop_at_length():
    events, result = run([0, 1, 2])
    assert result.text == "abc" and result.stop_reason == "length" and result.token_ids == [0, 1, 2]
    assert "".join(e.text for e in events) == "abc" and events[-1].done


def test_stop_at_end_of_sequence_which_is_not_part_of_the_text():
    events, result = run([0, 1, 8, 2], eos=8, n=4)
    assert result.stop_reason == "eos" and result.text == "ab" and result.token_ids == [0, 1]
    assert "".join(e.text for e in events) == "ab"


def test_stop_string_is_cut_and_never_streamed():
    events, result = run([0, 3, 4, 5, 6, 7, 1], stop=["STOP"])
    assert result.stop_reason == "stop_string" and result.text == "a "
    streamed = "".join(e.text for e in events)
    assert streamed == "a " and "S" not in streamed


def test_a_false_start_of_a_stop_string_is_released_later():
    events, result = run([4, 5, 0, 1], stop=["STOP"])
    assert result.stop_reason == "length" and result.text == "STab"
    assert [e.text for e in events if not e.done] == ["", "", "STa", "b"]


def test_held_back():
    assert held_back("abcST", ["STOP"]) == 2
    assert held_back("abc", ["STOP"]) == 0
    assert held_back("xS", ["STOP", "SX"]) == 1
    assert held_back("", ["STOP"]) == 0


def test_incomplete_utf8_characters_wait_for_their_last_byte(gpt2_tokenizer):
    class Bytes(Scripted):
        def decode(self, ids):
            return gpt2_tokenizer.decode(ids)

    emoji_ids = gpt2_tokenizer.encode("🙂")
    assert len(emoji_ids) > 1  # GPT-2 splits this emoji into byte-level pieces
    engine = Engine(Bytes(VOCAB + [""] * 60000, emoji_ids))
    events = list(engine.stream("a", len(emoji_ids)))
    assert [e.text for e in events[:-1]] == [""] * (len(emoji_ids) - 1) + ["🙂"]


def test_decoding_rule_is_pluggable_and_seeded_per_request():
    engine = Engine(ToyBackend(), DecodingRule(do_sample=True, temperature=2.0))
    first, again = engine.generate("Hello", 24, seed=1), engine.generate("Hello", 24, seed=1)
    other = engine.generate("Hello", 24, seed=2)
    assert first.token_ids == again.token_ids and first.token_ids != other.token_ids
    assert first.metadata["rule"] == "T=2" and first.metadata["seed"] == 1
    greedy = Engine(ToyBackend()).generate("Hello", 24)
    assert greedy.metadata["rule"] == "greedy" and greedy.token_ids != first.token_ids
    top1 = Engine(ToyBackend(), DecodingRule(do_sample=True, top_k=1)).generate("Hello", 24, seed=5)
    assert top1.token_ids == greedy.token_ids  # sampling from the top-1 set is greedy decoding


def test_bad_requests(smollm2):
    engine = Engine(TransformersBackend(smollm2))
    with pytest.raises(BadRequest, match="empty"):
        engine.generate("", 4)
    with pytest.raises(BadRequest, match="stop strings"):
        engine.generate("hi", 4, stop=[""])
    with pytest.raises(BadRequest, match="8192 positions"):
        engine.generate("word " * 8200, 4)
    with pytest.raises(ValueError):
        Engine(ToyBackend(), threads=0)


def test_threads_are_set_for_the_request_and_restored(smollm2):
    before = torch.get_num_threads()
    result = Engine(TransformersBackend(smollm2), threads=before + 1).generate("Hi", 1)
    assert result.metadata["threads"] == before + 1 and torch.get_num_threads() == before
    stream = Engine(TransformersBackend(smollm2), threads=before + 1).stream("Hi", 3)
    next(stream)
    stream.close()  # a caller that stops reading early still gets its thread count back
    assert torch.get_num_threads() == before


def test_a_single_stop_string_is_not_split_into_characters():
    _, result = run([0, 4, 1, 2], stop="ST")
    assert result.stop_reason == "length" and result.text == "aSbc"


def test_overlapping_stop_strings_cut_at_the_first_completed_match():
    # "answer" is still incomplete when "sw" completes, so the engine stops at "sw".
    vocab = list("answer ")
    engine = Engine(Scripted(vocab, [vocab.index(c) for c in "answer"]))
    assert engine.generate("a", 6, stop=["answer", "sw"]).text == "an"
    # Two stop strings completed by the same token: the earlier start wins.
    assert Engine(Scripted(vocab, [vocab.index(c) for c in "answer"])).generate("a", 6, stop=["wer", "swer"]).text == "an"


def test_a_stop_string_inside_one_token():
    vocab = ["x.y", "z"]
    result = Engine(Scripted(vocab + ["a"], [0, 1])).generate("a", 2, stop=["."])
    assert result.text == "x" and result.stop_reason == "stop_string" and result.token_ids == [0]


def test_held_back_text_is_released_when_the_model_ends():
    events, result = run([0, 4, 8], stop=["STOP"], eos=8)
    assert result.stop_reason == "eos" and result.text == "aS"
    assert "".join(e.text for e in events) == "aS" and events[-2].text == "S"


def test_stream_equals_text_for_random_scripts():
    import random

    rng = random.Random(0)
    for _ in range(200):
        script = [rng.randrange(len(VOCAB) - 1) for _ in range(rng.randrange(1, 12))]
        stop = rng.sample(["STOP", "ab", "c ", "OP", "b"], rng.randrange(0, 3))
        events, result = run(script, stop=stop)
        assert "".join(e.text for e in events) == result.text
        assert not any(s in result.text for s in stop)
        stages = [t.stage for t in result.timings]
        assert stages.count("forward_pass") == stages.count("sample") >= 1


def test_sampled_requests_ignore_the_global_random_state():
    engine = Engine(ToyBackend(), DecodingRule(do_sample=True, temperature=2.0))
    torch.manual_seed(123)
    first = engine.generate("Hello", 16, seed=4)
    torch.manual_seed(999)
    torch.rand(10)
    assert engine.generate("Hello", 16, seed=4).token_ids == first.token_ids


def test_result_records_what_is_needed_to_replay_it():
    _, result = run([0, 1], stop=["zz"])
    assert result.metadata["stop"] == ["zz"] and result.metadata["max_new_tokens"] == 2
