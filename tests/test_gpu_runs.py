"""scripts/gpu_runs.py runs its GPU experiments' code on the CPU (--quick) and refuses a missing GPU."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_runs.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_refuses_cuda_where_there_is_none(tmp_path, capsys):
    assert load_script().main(["--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_model_free_experiments_write_records_with_provenance(tmp_path):
    assert load_script().main(["--device", "cpu", "--quick", "--out", str(tmp_path), "--only", "sync", "roofline",
                               "launch"]) == 0
    sync = json.loads((tmp_path / "sync.json").read_text())
    roofline = json.loads((tmp_path / "roofline.json").read_text())
    assert sync["error"] is None and sync["quick"] and sync["environment"]["device"] == "cpu"
    assert "processor" in sync["environment"]["machine"]
    assert len(sync["result"]["waited_s"]) == len(sync["result"]["unwaited_s"]) > 0
    assert set(roofline["result"]["matmul_s"]) == {"float32", "bfloat16"}  # TF32 is a CUDA setting
    launch = json.loads((tmp_path / "launch.json").read_text())
    assert launch["error"] is None
    rows = launch["result"]["sizes"]
    assert set(rows) == {"1", "1024"} and all(r["graph_s"] is None and len(r["eager_s"]) == 5 for r in rows.values())


@pytest.mark.slow
def test_the_model_experiments_run_on_the_cpu(tmp_path):
    """The suite and the phase sweep on the bundled model. (The decode experiment loads the model twice,
    once in bfloat16, and compiles; its engine path is tested in tests/test_decode.py.)"""
    assert load_script().main(["--device", "cpu", "--quick", "--out", str(tmp_path), "--only", "suite", "phases"]) == 0
    suite = json.loads((tmp_path / "suite.json").read_text())["result"]
    assert suite["schema"] == "inferlab-bench/1" and "decode_step@1t" in suite["measurements"]
    phases = json.loads((tmp_path / "phases.json").read_text())["result"]
    assert set(phases["prefill_s"]) == set(phases["decode_step_s"]) == {"1", "8", "64"}
