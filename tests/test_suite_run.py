"""scripts/suite_run.py: the record of a whole-suite run and the reproducibility page's table of processors."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def suite_run(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("suite_run", ROOT / "scripts" / "suite_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, file in (("LATEST", "suite-run.json"), ("LOG", "suite_runs.json"), ("TABLE", "_suite_runs.md")):
        monkeypatch.setattr(module, name, tmp_path / file)
    return module


def junit(path, tests, failures=0, skipped=0):
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest" errors="0" failures="{failures}" '
                    f'skipped="{skipped}" tests="{tests}" time="61.5"/></testsuites>')
    return path


def test_a_run_is_counted_and_recorded_with_its_processor(suite_run, tmp_path, monkeypatch):
    main, oldest = junit(tmp_path / "m.xml", 1250, skipped=3), junit(tmp_path / "o.xml", 700)
    assert suite_run.junit_counts(main) == {"tests": 1250, "failures": 0, "errors": 0, "skipped": 3, "seconds": 61.5,
                                            "passed": 1247}
    run = suite_run.write(1300, main, oldest, [])
    assert run["processor"]["processor"] and "matmul_features" in run["processor"] and run["versions"]["torch"]
    monkeypatch.setattr(suite_run, "git", lambda *a: "" if a[0] == "status" else "abc123")  # a clean tree
    suite_run.write(1300, main, oldest, [])
    assert suite_run.record() == 0
    assert len(json.loads(suite_run.LOG.read_text())) == 1
    table = suite_run.TABLE.read_text().splitlines()
    assert len(table) == 3 and "1,247 + 700" in table[2] and "21.7" in table[2]


@pytest.mark.parametrize("args, failures, reason", [(["-k", "ch01"], 0, "extra pytest arguments"),
                                                     ([], 2, "lane had failures")])
def test_a_partial_or_failed_run_is_not_recorded(suite_run, tmp_path, monkeypatch, capsys, args, failures, reason):
    monkeypatch.setattr(suite_run, "git", lambda *a: "" if a[0] == "status" else "abc123")
    suite_run.write(10, junit(tmp_path / "m.xml", 5, failures=failures), junit(tmp_path / "o.xml", 5), args)
    assert suite_run.record() == 1 and reason in capsys.readouterr().err and not suite_run.LOG.exists()


def test_ci_names_the_processor_first_with_any_python():
    """scripts/processor.py needs only the standard library: .ci/run calls it before any environment exists."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-I", str(ROOT / "scripts" / "processor.py")], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("processor: ") and "matmul features:" in out and out.count("\n") == 1
    assert (ROOT / ".ci" / "run").read_text().index("scripts/processor.py") < (ROOT / ".ci" / "run").read_text().index(
        "scripts/test.sh")
