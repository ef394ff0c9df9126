"""Execute every chapter in the environments a reader may have, and record what happened.

    .venv/bin/python scripts/run_variants.py [--variant NAME ...] [notebooks/ch01_*.md ...]

Variants (each executes the chapters top to bottom from their text files; nothing is published):

- ``oldest-transformers``: the environment of ``scripts/test_oldest.sh`` (``.venv-oldest``:
  transformers 4.57.6, the lab installed from a wheel, as the Colab cell installs it), with the
  bundled model ``smollm2-135m``.
- ``gpt2-random``: this environment with ``INFERLAB_MODEL=gpt2-random``, GPT-2's exact shape and
  tokenizer with random weights: the path the Colab default ``gpt2`` takes, except trained text.

Results go to ``data/variant_runs.json`` and to the table on the reproducibility page
(``book/_variant_runs.md``). A chapter that raises is recorded with the first line of its error,
and the script exits non-zero.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jupytext
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "data" / "variant_runs.json"
TABLE = ROOT / "book" / "_variant_runs.md"
VARIANTS = {
    "oldest-transformers": {"venv": ".venv-oldest", "model": "smollm2-135m"},
    "gpt2-random": {"venv": ".venv", "model": "gpt2-random"},
}


def kernel_for(venv: Path, where: Path) -> str:
    """Install a Jupyter kernel spec for ``venv`` under ``where``; return its name."""
    name = "inferlab-" + venv.name.lstrip(".")
    subprocess.run([str(venv / "bin" / "python"), "-m", "ipykernel", "install", "--prefix", str(where),
                    "--name", name], check=True, capture_output=True)
    return name


def install_checkout(venv: Path) -> None:
    """Install this checkout into ``venv`` from a wheel, as the Colab cell installs the lab."""
    with tempfile.TemporaryDirectory() as wheels:
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, str(ROOT)],
                       check=True, capture_output=True)
        wheel = next(Path(wheels).glob("inferlab-*.whl"))
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                        str(wheel)], check=True, capture_output=True)
    subprocess.run(["rm", "-rf", str(ROOT / "build")], check=True)  # setuptools' scratch folder


def versions(venv: Path) -> dict:
    code = ("import json, platform, torch, transformers, tokenizers; print(json.dumps({'python': "
            "platform.python_version(), 'torch': torch.__version__, 'transformers': transformers.__version__, "
            "'tokenizers': tokenizers.__version__}))")
    return json.loads(subprocess.run([str(venv / "bin" / "python"), "-c", code], check=True,
                                     capture_output=True, text=True).stdout)


def run_one(md: Path, kernel: str) -> dict:
    """Execute one chapter; return whether it ran, how long it took and its first error line."""
    notebook = jupytext.read(md)
    start = time.perf_counter()
    error = None
    try:
        NotebookClient(notebook, timeout=1200, kernel_name=kernel,
                       resources={"metadata": {"path": str(md.parent)}}).execute()
    except CellExecutionError as exc:
        import re
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in str(exc).splitlines() if line.strip()]
        where = [line.strip() for line in lines if line.lstrip().startswith("---->")]
        error = (lines[-1] + (f" at {where[-1]}" if where else ""))[:300] if lines else repr(exc)
    return {"ok": error is None, "seconds": round(time.perf_counter() - start, 1), "error": error}


def write_table(log: dict) -> None:
    rows = ["| variant | notebook | ran | seconds | model | transformers | torch | run (UTC) |",
            "|---|---|---|---|---|---|---|---|"]
    for variant, entries in sorted(log.items()):
        for name, e in sorted(entries.items()):
            ran = "yes" if e["ok"] else f"no: {e['error']}".replace("|", "\\|")
            rows.append(f"| {variant} | `{name}` | {ran} | {e['seconds']} | {e['model']} | "
                        f"{e['versions']['transformers']} | {e['versions']['torch']} | {e['run_utc']} |")
    TABLE.write_text("\n".join(rows) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    parser.add_argument("chapters", nargs="*")
    args = parser.parse_args()
    mds = [Path(p).resolve() for p in args.chapters] or sorted((ROOT / "notebooks").glob("ch*.md"))
    log = json.loads(LOG.read_text()) if LOG.exists() else {}
    failed = 0
    with tempfile.TemporaryDirectory() as kernels:
        os.environ["JUPYTER_PATH"] = str(Path(kernels) / "share" / "jupyter")
        for variant in args.variant or sorted(VARIANTS):
            spec = VARIANTS[variant]
            venv = ROOT / spec["venv"]
            if not (venv / "bin" / "python").exists():
                print(f"{variant}: no {spec['venv']} (run scripts/test_oldest.sh first)", file=sys.stderr)
                return 2
            if spec["venv"] != ".venv":  # the main environment has the checkout installed in editable mode
                install_checkout(venv)
            kernel = kernel_for(venv, Path(kernels))
            env_versions = versions(venv)
            os.environ.update(INFERLAB_MODEL=spec["model"], INFERLAB_STATIC_PLOTS="1", TQDM_DISABLE="1")
            os.environ.pop("INFERLAB_RECORD", None)
            for md in mds:
                print(f"{variant}: {md.name} ...", flush=True)
                entry = run_one(md, kernel)
                entry.update(model=spec["model"], versions=env_versions,
                             run_utc=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
                log.setdefault(variant, {})[md.with_suffix(".ipynb").name] = entry
                failed += not entry["ok"]
                print(f"  {'ran' if entry['ok'] else 'FAILED: ' + str(entry['error'])} in {entry['seconds']} s", flush=True)
                LOG.write_text(json.dumps(log, indent=2, sort_keys=True) + "\n")
                write_table(log)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
