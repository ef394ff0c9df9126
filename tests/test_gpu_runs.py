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


@pytest.mark.parametrize("name, part", [
    ("Tesla T4", "T4"), ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"), ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H200", "H200"),
    ("NVIDIA A100 80GB PCIe", None), ("NVIDIA H100 PCIe", None), ("NVIDIA H100 NVL", None), ("NVIDIA L4", None),
    ("NVIDIA GH200 480GB", None), ("NVIDIA GH200 144G HBM3e", None), ("NVIDIA H200 NVL", None), (None, None),
])
def test_the_datasheet_bandwidth_is_found_only_for_a_known_part(name, part):
    from inferlab.bench.memory import DATASHEET_BANDWIDTH

    found, bandwidth = load_script().datasheet_bandwidth(name)
    assert found == part
    assert bandwidth == (DATASHEET_BANDWIDTH[part] if part else None)


def test_the_decode_summary_divides_by_the_bf16_floor():
    script = load_script()
    weights = {"float32": 4_000_000, "bfloat16": 2_000_000}
    steps = {"float32/engine": 4e-6, "bfloat16/engine": 1.5e-6, "bfloat16/transformers generate": None}
    summary = script.decode_summary(steps, weights, "NVIDIA H200")
    floor = 2_000_000 / 4.8e12
    assert summary["datasheet_part"] == "H200" and summary["bf16_weight_read_floor_s"] == pytest.approx(floor)
    assert summary["paths"]["float32/engine"]["achieved_bytes_per_s"] == pytest.approx(1e12)
    assert summary["paths"]["bfloat16/engine"]["step_over_bf16_floor"] == pytest.approx(1.5e-6 / floor)
    assert summary["paths"]["float32/engine"]["within_goal"] is False  # 9.6 x the floor
    assert summary["paths"]["bfloat16/engine"]["within_goal"] is False  # 3.6 x
    assert script.decode_summary({"bfloat16/engine": 2 * floor}, weights, "NVIDIA H200")["paths"][
        "bfloat16/engine"]["within_goal"] is True
    assert summary["paths"]["bfloat16/transformers generate"] == {"step_s": None}
    unknown = script.decode_summary(steps, weights, None)
    assert unknown["bf16_weight_read_floor_s"] is None and "no datasheet" in unknown["datasheet_note"]
    assert unknown["paths"]["float32/engine"]["step_over_bf16_floor"] is None


def test_the_launch_record_keeps_the_operations_and_bytes(tmp_path):
    assert load_script().main(["--device", "cpu", "--quick", "--out", str(tmp_path), "--only", "launch"]) == 0
    rows = json.loads((tmp_path / "launch.json").read_text())["result"]["sizes"]
    assert rows["1024"]["ops"] == 20 and rows["1024"]["bytes_per_op"] == 8 * 1024


@pytest.mark.slow
def test_the_decode_experiment_runs_on_the_cpu(tmp_path):
    """Both dtypes, transformers and the engine's eager decode-optimised path; no datasheet for a CPU."""
    assert load_script().main(["--device", "cpu", "--quick", "--out", str(tmp_path), "--only", "decode"]) == 0
    result = json.loads((tmp_path / "decode.json").read_text())["result"]
    assert set(result["weight_bytes_per_token"]) == {"float32", "bfloat16"}
    assert result["weight_bytes_per_token"]["float32"] == 2 * result["weight_bytes_per_token"]["bfloat16"]
    paths = result["paths"]
    assert {"float32/transformers generate", "float32/engine decode-optimised", "bfloat16/transformers generate",
            "bfloat16/engine decode-optimised"} <= set(paths)
    assert all("error" not in row for row in paths.values()), paths
    assert paths["float32/transformers generate"]["tokens_equal_float32_transformers"] is True
    assert paths["float32/engine decode-optimised"]["tokens_equal_float32_transformers"]
    summary = result["summary"]
    assert summary["datasheet_part"] is None and summary["bf16_weight_read_floor_s"] is None
    assert all(row["achieved_bytes_per_s"] > 0 for row in summary["paths"].values())


@pytest.mark.slow
def test_the_decode_reference_is_only_float32_transformers(tmp_path, monkeypatch):
    """With float32 transformers failing, no path is compared with another path's tokens: the flag is None."""
    import inferlab.bench.decode

    def fail(*args, **kwargs):
        raise RuntimeError("transformers path made to fail by the test")

    monkeypatch.setattr(inferlab.bench.decode, "time_transformers", fail)
    assert load_script().main(["--device", "cpu", "--quick", "--out", str(tmp_path), "--only", "decode"]) == 0
    paths = json.loads((tmp_path / "decode.json").read_text())["result"]["paths"]
    assert "error" in paths["float32/transformers generate"]
    engine_rows = [row for key, row in paths.items() if "engine" in key]
    assert engine_rows and all(row["tokens_equal_float32_transformers"] is None for row in engine_rows), paths
