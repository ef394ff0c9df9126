"""Publish the chapters: sync each Jupytext text file to its .ipynb, execute it, store the outputs.

    .venv/bin/python scripts/publish.py [notebooks/ch01_what_is_inference.md ...]
    .venv/bin/python scripts/publish.py --hide-only [notebooks/ch01_what_is_inference.ipynb ...]

The .md file is the one people edit; the .ipynb holds the published outputs that the book renders
and that `pytest --nbval` compares against. Runs in the environment the checks use (see
conftest.py) and records, per notebook, how long it took and with which versions, in
data/published_runs.json and the reproducibility page.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import conftest  # noqa: E402,F401  (sets the environment of the published run, as for nbval)

os.environ["INFERLAB_RECORD"] = "1"  # chapters write their measurements to data/


#: Tags whose code the book's pages do not show; the notebook hides it too (CHAPTER_STANDARD, "Interactive pieces").
HIDDEN_TAGS = frozenset({"hide-input", "remove-input", "remove-cell"})


def hide_sources(notebook: nbformat.NotebookNode) -> int:
    """Collapse the source of every cell the book hides, in Jupyter and in Colab; return how many.

    Jupyter Book reads the tags; JupyterLab and Notebook 7 read ``jupyter.source_hidden`` (nbformat's
    cell metadata), Colab its form view (``cellView: form``), so a reader of the notebook sees the
    chapter's code, not its checks, and can still open each hidden cell.
    """
    hidden = 0
    for cell in notebook.cells:
        if cell.cell_type == "code" and HIDDEN_TAGS & set(cell.metadata.get("tags", [])):
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
            cell.metadata["cellView"] = "form"
            hidden += 1
    return hidden


def publish(md: Path) -> dict:
    """Execute one chapter from its text file and write the paired .ipynb with outputs."""
    notebook = jupytext.read(md)
    notebook.metadata.setdefault("jupytext", {})["formats"] = "ipynb,md:myst"
    start = time.perf_counter()
    NotebookClient(notebook, timeout=1200, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(md.parent)}}).execute()
    seconds = time.perf_counter() - start
    hide_sources(notebook)
    nbformat.write(notebook, md.with_suffix(".ipynb"))
    return {"notebook": md.with_suffix(".ipynb").name, "seconds": round(seconds, 1)}


def versions() -> dict:
    import plotly
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "plotly": plotly.__version__,
            "platform": platform.platform(), "processor": processor_words(), "cpus": os.cpu_count()}


def processor_words() -> str:
    """The processor by name, family and model, as inferlab.cpuinfo reads it ("AMD EPYC (family 25, model 17)")."""
    from inferlab.cpuinfo import processor_facts, processor_words

    return processor_words(processor_facts())


def main(paths: list[str]) -> None:
    if paths[:1] == ["--hide-only"]:  # metadata only: the published outputs stay as they are
        for ipynb in [Path(p).resolve() for p in paths[1:]] or sorted((ROOT / "notebooks").glob("ch*.ipynb")):
            notebook = nbformat.read(ipynb, as_version=4)
            print(f"{ipynb.name}: {hide_sources(notebook)} cells hidden")
            nbformat.write(notebook, ipynb)
        return
    mds = [Path(p).resolve() for p in paths] or sorted((ROOT / "notebooks").glob("ch*.md"))
    log_file = ROOT / "data" / "published_runs.json"
    log = json.loads(log_file.read_text()) if log_file.exists() else {}
    env = versions()
    for md in mds:
        print(f"publishing {md.name} ...", flush=True)
        entry = publish(md)
        entry.update(env, model=os.environ["INFERLAB_MODEL"], device="cpu",
                     published_utc=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        log[entry["notebook"]] = entry
        print(f"  {entry['seconds']} s")
        write_log(log_file, log)  # after every notebook: a later failure keeps the runs that finished


def write_log(log_file: Path, log: dict) -> None:
    """Write the run log and the reproducibility page's table from it."""
    log_file.write_text(json.dumps(log, indent=2, sort_keys=True) + "\n")
    rows = ["| notebook | model | device | processor | seconds | torch | transformers | published (UTC) |",
            "|---|---|---|---|---|---|---|---|"]
    for e in sorted(log.values(), key=lambda e: e["notebook"]):
        rows.append(f"| `{e['notebook']}` | {e['model']} | {e['device']} ({e['cpus']} CPUs) | {e['processor']} | "
                    f"{e['seconds']} | {e['torch']} | {e['transformers']} | {e['published_utc']} |")
    (ROOT / "book" / "_published_runs.md").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
