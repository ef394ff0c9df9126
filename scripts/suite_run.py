"""The record of a whole test-suite run, and the reproducibility page's list of processors it passed on.

    .venv/bin/python scripts/suite_run.py write SECONDS MAIN.xml OLDEST.xml [ARGS...]  # scripts/test.sh, at the end
    .venv/bin/python scripts/suite_run.py record                                       # a maintainer, after a pass

``write`` reads the JUnit XML reports of the main pytest session and of the oldest-release lane,
adds the processor (inferlab.provenance.machine_facts), the versions, the commit and whether the
working tree was clean, writes ``suite-run.json`` in the environment that runs it (``.venv``) and prints one line. ``scripts/test.sh``
calls it only after both lanes passed. ``record`` appends that file to ``data/suite_runs.json`` and
rewrites ``book/_suite_runs.md``, the table that the reproducibility page includes; it refuses a
run that was not the whole suite (extra pytest arguments), that had failures, or whose tree was
not clean at a commit.
"""
from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from inferlab.cpuinfo import processor_words

ROOT = Path(__file__).resolve().parent.parent
LATEST = Path(sys.prefix) / "suite-run.json"  # in the environment that runs this: .venv
LOG = ROOT / "data" / "suite_runs.json"
TABLE = ROOT / "book" / "_suite_runs.md"


def junit_counts(path: Path) -> dict[str, Any]:
    """Tests, failures, errors, skips and seconds of one JUnit XML report (pytest's ``--junitxml``)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    total["seconds"] = round(sum(float(s.get("time", 0)) for s in suites), 1)
    total["passed"] = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
    return total


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


def version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def write(seconds: int, main_xml: Path, oldest_xml: Path, args: list[str]) -> dict[str, Any]:
    from inferlab.provenance import machine_facts

    machine = machine_facts()
    record = {
        "finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": git("rev-parse", "HEAD"), "tree_clean": git("status", "--porcelain") == "",
        "seconds": seconds, "pytest_args": args,
        "main": junit_counts(main_xml), "oldest_transformers_lane": junit_counts(oldest_xml),
        "processor": {key: machine[key] for key in ("processor", "cpu_family", "cpu_model", "stepping", "logical_cpus",
                                                    "physical_cores", "matmul_features", "torch_cpu_capability")},
        "versions": {"python": platform.python_version(), **{name: version(name) for name in
                     ("torch", "transformers", "llama-cpp-python", "jupyter-book", "nbval")}},
    }
    LATEST.write_text(json.dumps(record, indent=1) + "\n")
    return record


def table(runs: list[dict[str, Any]]) -> str:
    rows = ["| finished (UTC) | processor | matmul features | tests passed | minutes | torch | transformers | llama-cpp-python | commit |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: r["finished_utc"]):
        p, v = r["processor"], r["versions"]
        passed = f"{r['main']['passed']:,} + {r['oldest_transformers_lane']['passed']:,}"
        rows.append(f"| {r['finished_utc']} | {processor_words(p)}, {p['logical_cpus']} CPUs | {' '.join(p['matmul_features'])} | {passed} | {r['seconds'] / 60:.1f} | "
                    f"{v['torch']} | {v['transformers']} | {v['llama-cpp-python']} | `{r['commit'][:10]}` |")
    return "\n".join(rows) + "\n"


def record() -> int:
    run = json.loads(LATEST.read_text())
    problems = []
    if run["pytest_args"]:
        problems.append(f"it ran with extra pytest arguments {run['pytest_args']}, not the whole suite")
    if not run["tree_clean"]:
        problems.append("its working tree had uncommitted changes")
    for lane in ("main", "oldest_transformers_lane"):
        if run[lane]["failures"] or run[lane]["errors"]:
            problems.append(f"its {lane} lane had failures")
    if problems:
        print("suite_run: not recorded: " + "; ".join(problems), file=sys.stderr)
        return 1
    runs = json.loads(LOG.read_text()) if LOG.exists() else []
    runs = [r for r in runs if (r["commit"], r["finished_utc"]) != (run["commit"], run["finished_utc"])] + [run]
    LOG.write_text(json.dumps(runs, indent=1) + "\n")
    TABLE.write_text(table(runs))
    print(f"suite_run: recorded ({len(runs)} runs in {LOG})")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["record"]:
        return record()
    if argv[:1] == ["table"]:
        TABLE.write_text(table(json.loads(LOG.read_text()) if LOG.exists() else []))
        return 0
    if argv[:1] == ["write"] and len(argv) >= 4:
        run = write(int(argv[1]), Path(argv[2]), Path(argv[3]), argv[4:])
        m, o = run["main"], run["oldest_transformers_lane"]
        print(f"suite: {m['passed']} + {o['passed']} tests passed in {run['seconds'] / 60:.1f} min on "
              f"{processor_words(run['processor'])}; record in {LATEST}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
