"""One record schema: every backend, through the one loop, gives results whose fields mean the same (Chapter 6).

Runs the toy, transformers and native backends on tiny models in which every parameter is random
(biases and norm weights included), under greedy decoding, a seeded sampling rule and a stop string,
and checks each field of :class:`GenerationResult` and the stream against its definition.
"""
from dataclasses import fields

import pytest
import torch

from inferlab.engine import Engine, native_backend, toy_backend, transformers_backend
from inferlab.models.registry import LoadedModel
from inferlab.provenance import Provenance, sha256_parameters, tokenizer_fingerprint
from inferlab.records import STAGES, STOP_REASONS, GenerationResult
from inferlab.sampling import DecodingRule
from inferlab.sampling.params import SamplingParams


def tiny_loaded(kind, tokenizer):
    """A LoadedModel around a two-layer model whose every parameter is drawn at random."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    vocab = len(tokenizer)
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64, vocab_size=vocab))
    else:
        model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                             num_key_value_heads=2, intermediate_size=48, vocab_size=vocab,
                                             max_position_embeddings=64, tie_word_embeddings=True))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    model.eval()
    provenance = Provenance(model=f"tiny-{kind}", source="random", revision=None, sha256=sha256_parameters(model),
                            dtype="float32", parameters=sum(p.numel() for p in model.parameters()),
                            tokenizer=tokenizer_fingerprint(tokenizer), device="cpu", threads=1)
    return LoadedModel(f"tiny-{kind}", model, tokenizer, provenance, 0.0)


@pytest.fixture(scope="module")
def backends(gpt2_tokenizer):
    gpt2, llama = tiny_loaded("gpt2", gpt2_tokenizer), tiny_loaded("llama", gpt2_tokenizer)
    return {"toy": toy_backend(7),
            "transformers-gpt2": transformers_backend(gpt2), "native-gpt2": native_backend(gpt2),
            "transformers-llama": transformers_backend(llama), "native-llama": native_backend(llama)}


REQUESTS = {
    "greedy": SamplingParams(max_new_tokens=12),
    "sampled": SamplingParams(max_new_tokens=12, rule=DecodingRule(do_sample=True, temperature=0.9, top_k=20), seed=5),
    "stop": SamplingParams(max_new_tokens=12, stop=("e", "a")),
}


@pytest.mark.parametrize("request_name", list(REQUESTS))
@pytest.mark.parametrize("backend_name", ["toy", "transformers-gpt2", "native-gpt2", "transformers-llama",
                                          "native-llama"])
def test_every_backend_fills_every_field_with_the_same_meaning(backends, backend_name, request_name):
    backend, params = backends[backend_name], REQUESTS[request_name]
    prompt = "Hello there"
    engine = Engine(backend, threads=1)
    events = list(engine.stream(prompt, params))
    result = events[-1].result
    tokenizer = backend.tokenizer

    assert {f.name for f in fields(GenerationResult)} == {
        "prompt", "prompt_ids", "token_ids", "tokens", "text", "stop_reason", "timings", "simulated_stages",
        "params", "provenance", "request_id", "index"}
    # what was asked
    assert result.prompt == prompt
    assert result.prompt_ids == list(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(prompt)))
    # what came back
    assert result.stop_reason in STOP_REASONS
    assert not set(result.token_ids) & backend.eos_token_ids
    assert (len(result.token_ids) == params.max_new_tokens) == (result.stop_reason == "length") or \
        result.stop_reason == "stop_string"
    assert result.tokens == [tokenizer.decode([i]) for i in result.token_ids]
    full = tokenizer.decode(result.token_ids)
    if result.stop_reason == "stop_string":
        assert full.startswith(result.text) and any(full[len(result.text):].startswith(s) for s in params.stop)
        assert not any(s in result.text for s in params.stop)
    else:
        assert result.text == full
    # the stream
    assert events[-1].done and sum(e.done for e in events) == 1
    assert "".join(e.text for e in events) == result.text
    assert [e.token_id for e in events if e.token_id is not None] == result.token_ids
    assert all(a.elapsed_s <= b.elapsed_s for a, b in zip(events, events[1:]))
    # where the time went
    stages = [t.stage for t in result.timings]
    assert stages[:3] == list(STAGES[:3]) and stages[-1] == "response_format" and set(stages) <= set(STAGES)
    steps = len(result.token_ids) + (result.stop_reason == "eos")
    for stage in ("forward_pass", "sample", "decode"):
        assert [t.step for t in result.timings if t.stage == stage] == list(range(steps))
    assert all(t.seconds >= 0 for t in result.timings)
    # how: parameters as run, and provenance
    assert result.params["max_new_tokens"] == params.max_new_tokens and result.params["stop"] == list(params.stop)
    assert result.params["seed"] == (5 if params.rule.do_sample else None)
    assert result.params["rule"] == params.rule.label()
    assert result.provenance["threads"] == 1 and result.provenance["device"] == "cpu"
    assert result.provenance["backend"] in ("toy", "transformers", "native (inferlab.models)")
    assert bool(result.simulated_stages) == (backend_name == "toy")
    if backend_name != "toy":
        assert result.provenance["sha256"] == backend.provenance["sha256"]
    assert GenerationResult(**{**result.to_dict(), "timings": result.timings}).to_json() == result.to_json()


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_native_and_transformers_backends_give_the_same_tokens(backends, kind):
    params = SamplingParams(max_new_tokens=16, rule=DecodingRule(do_sample=True, top_p=0.9), seed=3)
    native = Engine(backends[f"native-{kind}"]).generate("Hello there", params)
    reference = Engine(backends[f"transformers-{kind}"]).generate("Hello there", params)
    assert native.token_ids == reference.token_ids


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_the_kv_cache_path_gives_the_same_tokens_as_recomputing(backends, kind):
    rule = DecodingRule(do_sample=True, temperature=0.8)
    params = SamplingParams(max_new_tokens=16, rule=rule, seed=11, n=3, stop=("e",))
    plain = Engine(backends[f"transformers-{kind}"]).generate_all("Hello there", params)
    cached_engine = Engine(backends[f"transformers-{kind}"], kv_cache=True)
    cached = cached_engine.generate_all("Hello there", params)
    assert len({len(r.token_ids) for r in plain}) > 1  # samples stop at different steps: rows leave the cache
    assert [r.token_ids for r in cached] == [r.token_ids for r in plain]
    assert [r.stop_reason for r in cached] == [r.stop_reason for r in plain]
    assert cached[0].provenance["kv_cache"] is True
    again = cached_engine.generate("Hello", SamplingParams(max_new_tokens=4))  # a new request starts a new cache
    assert again.token_ids == Engine(backends[f"transformers-{kind}"]).generate("Hello", SamplingParams(max_new_tokens=4)).token_ids
