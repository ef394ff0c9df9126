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
