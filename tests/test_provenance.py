import hashlib

import pytest
import torch

from inferlab.errors import InferlabError
from inferlab.provenance import Provenance, sha256_file, sha256_files, sha256_parameters


def record(**changes):
    fields = dict(model="m", source="s", revision=None, sha256="ab" * 32, dtype="float32",
                  parameters=10, tokenizer="t", device="cpu", threads=1)
    fields.update(changes)
    return Provenance(**fields)


def test_file_hashes_match_hashlib(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 3_000_000)
    b.write_bytes(b"y")
    assert sha256_file(a) == hashlib.sha256(b"x" * 3_000_000).hexdigest()
    assert sha256_files([a]) == sha256_file(a)
    assert sha256_files([a, b]) != sha256_files([b, a])


def test_parameter_hash_is_stable_and_sensitive():
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    first = sha256_parameters(layer)
    assert first == sha256_parameters(layer)
    with torch.no_grad():
        layer.weight[0, 0] += 1e-6
    assert sha256_parameters(layer) != first


@pytest.mark.parametrize("changes, missing", [
    ({"revision": None, "sha256": None}, "revision or sha256"),
    ({"model": ""}, "model"),
    ({"dtype": ""}, "dtype"),
    ({"tokenizer": ""}, "tokenizer"),
    ({"parameters": 0}, "parameters"),
    ({"threads": 0}, "threads"),
])
def test_incomplete_provenance_is_refused(changes, missing):
    with pytest.raises(InferlabError, match=missing):
        record(**changes)


def test_provenance_records_versions_time_and_run_settings():
    p = record(revision="607a30d783dfa663caf39e06633721c8d4cfcd7e", sha256=None)
    assert p.versions["torch"] == torch.__version__ and p.created_utc.endswith("+00:00")
    run = p.with_run("cuda:0", 4)
    assert (run.device, run.threads, run.model) == ("cuda:0", 4, "m")
    assert "revision 607a30d783df" in p.short() and "1 thread," in p.short()
    assert p.to_dict()["revision"] == p.revision


def test_machine_facts_name_cores_features_and_memory(monkeypatch):
    import os

    import torch

    from inferlab import provenance

    smt = [{"processor": str(i), "model name": "AMD EPYC", "cpu family": "25", "model": "17", "stepping": "1",
            "physical id": "0", "core id": str(i // 2), "flags": "fpu sse avx avx2 fma avx512f avx512_bf16 amx_tile"}
           for i in range(4)]  # two cores, two hardware threads each
    monkeypatch.setattr(provenance, "_cpuinfo", lambda: smt)
    monkeypatch.setattr(provenance, "_memory_bytes", lambda: 8 << 30)
    facts = provenance.machine_facts()
    assert (facts["cpu_family"], facts["cpu_model"], facts["stepping"]) == ("25", "17", "1")
    assert facts["physical_cores"] == 2 and facts["logical_cpus"] == os.cpu_count()
    assert facts["matmul_features"] == ["avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile"]
    assert facts["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert facts["memory_bytes"] == 8 << 30
    monkeypatch.setattr(provenance, "_cpuinfo", lambda: [])  # no /proc/cpuinfo (macOS, Windows)
    assert provenance.machine_facts()["physical_cores"] is None


def test_cpuinfo_and_memory_are_read_from_this_machine():
    from inferlab.provenance import _cpuinfo, _memory_bytes

    entries = _cpuinfo()
    if not entries:
        pytest.skip("no /proc/cpuinfo here")
    assert len(entries) >= 1 and all("processor" in e for e in entries)
    assert _memory_bytes() is None or _memory_bytes() > 2**28


def _byte_level(pre_tokenizer=None, **processor):
    """A small byte-level BPE tokenizer (GPT-2's alphabet, a few merges), wrapped as transformers wraps one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from inferlab.text.bpe import byte_to_char

    alphabet = list(byte_to_char().values())
    vocab = {c: i for i, c in enumerate(alphabet)}
    merges = [("Ġ", "Ġ"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he")]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizer or pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend)


def test_tokenizer_fingerprint_covers_the_pre_tokenizer():
    """Same vocabulary and merges, another pre-tokenizer: other ids, so another fingerprint (Chapter 3)."""
    from tokenizers import pre_tokenizers

    from inferlab.provenance import tokenizer_fingerprint

    plain = _byte_level()
    digits = _byte_level(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                  pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]))
    text = "is  2025"
    assert plain.encode(text) != digits.encode(text)  # the ids differ ...
    assert tokenizer_fingerprint(plain) != tokenizer_fingerprint(digits)  # ... and so does the fingerprint
    assert tokenizer_fingerprint(plain) == tokenizer_fingerprint(_byte_level())  # and it is stable


def test_tokenizer_fingerprint_ignores_what_changes_no_id():
    """trim_offsets moves offsets only, and an empty normalizer Sequence does nothing: same fingerprint."""
    from tokenizers import normalizers, pre_tokenizers, processors

    from inferlab.provenance import tokenizer_fingerprint

    base = tokenizer_fingerprint(_byte_level())
    trimmed = _byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True, trim_offsets=False))
    assert tokenizer_fingerprint(trimmed) == base
    empty = _byte_level()
    empty.backend_tokenizer.normalizer = normalizers.Sequence([])
    empty.backend_tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    assert tokenizer_fingerprint(empty) == base
    lowered = _byte_level()
    lowered.backend_tokenizer.normalizer = normalizers.Lowercase()
    assert tokenizer_fingerprint(lowered) != base and lowered.encode("The") != _byte_level().encode("The")
    bos = _byte_level()
    bos.backend_tokenizer.post_processor = processors.TemplateProcessing(single="h $A", special_tokens=[("h", 71)])
    assert tokenizer_fingerprint(bos) != base  # a post-processor that adds a token changes ids
