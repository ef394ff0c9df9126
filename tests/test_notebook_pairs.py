"""Each chapter is a Jupytext text file paired with an .ipynb of published outputs: they must agree."""
from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CHAPTERS = sorted(NOTEBOOKS.glob("ch*.md"))


def cells(notebook) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", []))) for c in notebook.cells]


def test_every_chapter_has_both_files():
    assert CHAPTERS, "no chapters found"
    for md in CHAPTERS:
        assert md.with_suffix(".ipynb").exists(), f"{md.name} has no published .ipynb (run scripts/publish.py)"
    for ipynb in NOTEBOOKS.glob("ch*.ipynb"):
        assert ipynb.with_suffix(".md").exists(), f"{ipynb.name} has no Jupytext text twin"


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_text_and_notebook_are_in_sync(md):
    text = jupytext.read(md)
    published = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    assert cells(text) == cells(published), f"{md.name} and its .ipynb differ: run scripts/publish.py {md}"
    assert published.metadata["jupytext"]["formats"] == "ipynb,md:myst"


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_published_notebook_was_executed_in_order_without_errors(md):
    published = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    code = [c for c in published.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), "published outputs must come from one top-to-bottom run"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_cells_the_book_hides_are_hidden_in_jupyter_and_colab(md):
    published = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    hidden_tags = {"hide-input", "remove-input", "remove-cell"}
    for index, cell in enumerate(published.cells):
        if cell.cell_type != "code":
            continue
        tagged = bool(hidden_tags & set(cell.metadata.get("tags", [])))
        in_jupyter = cell.metadata.get("jupyter", {}).get("source_hidden", False)
        in_colab = cell.metadata.get("cellView") == "form"
        assert in_jupyter == in_colab == tagged, (f"{md.name}, cell {index}: tags {cell.metadata.get('tags')} but "
                                                  f"source_hidden={in_jupyter}, cellView form={in_colab} "
                                                  f"(run scripts/publish.py --hide-only)")
