"""The chapters' prose: numbers come from the run, and cross-references resolve by label.

Two rules, checked on the markdown cells of every chapter (code cells are not prose):

* A digit string in the prose is either glued from the run (``{glue:text}``), inside code or
  mathematics, part of a name (GPT-2, float32, Q4_1, 8-bit), or listed with its reason in
  ``notebooks/prose_numbers/<chapter>.yml`` (a cited constant, a setting the code also uses, a year).
  A number typed by hand from a run's output fails here.
* "Chapter N" appears only as a ``{ref}`` to a label of that chapter: ``chNN`` or ``chNN-...``
  for a written chapter, ``plan-chNN`` for a planned one (book/intro.md). A reference therefore
  cannot point at one chapter while its text names another.
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
import yaml

from inferbook.prose import NUMBER, REF_CHAPTER, ROLE, hand_typed_numbers, strip

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "notebooks").glob("ch*.md"))
ALLOWED_DIR = ROOT / "notebooks" / "prose_numbers"


BOOK_PAGES = [ROOT / "book" / name for name in ("intro.md", "glossary.md", "numbers.md", "reproducibility.md")]


def prose(md: Path) -> str:
    """The markdown cells of a chapter, joined (a book page: its text)."""
    if md.parent.name == "book":
        return md.read_text()
    notebook = jupytext.read(md)
    return "\n\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")


def allowed_phrases(chapter: str) -> list[str]:
    """The phrases a chapter may contain with a typed number, each listed with its reason."""
    path = ALLOWED_DIR / f"{chapter}.yml"
    entries = (yaml.safe_load(path.read_text()) if path.exists() else None) or []
    for entry in entries:
        assert set(entry) == {"phrase", "why"} and str(entry["why"]).strip(), \
            f"{path.name}: each allowed phrase needs a reason: {entry}"
    return [str(e["phrase"]) for e in entries]


def test_the_stripper_keeps_what_it_should():
    text = strip("We ran {glue:text}`n` steps of 140 ms with `top_k=40` and $2N$ on GPT-2 in "
                 "float32, 4-bit Q4_1, see {ref}`Chapter 4 <ch04>` and Experiment 2.\n"
                 "```python\nx = 12345\n```\n```{admonition} Solution\n:class: dropdown\nIt is 77.\n```")
    assert [m.group() for m in NUMBER.finditer(text)] == ["140", "77"]
    left = hand_typed_numbers(text, ["140 ms"])
    assert len(left) == 1 and "It is 77" in left[0]
    # a four-backtick directive (a dropdown that holds fences) keeps its body, and so does the text after it
    nested = strip("````{dropdown} Source notes\nSee 12 files.\n```python\nx = 3\n```\n````\nThen 34 tokens.\n```\ny = 5\n```")
    assert [m.group() for m in NUMBER.finditer(nested)] == ["12", "34"]


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_no_number_in_the_prose_is_typed_by_hand(md):
    phrases = allowed_phrases(md.stem)
    text = strip(prose(md))
    found = hand_typed_numbers(text, phrases)
    assert not found, (f"{md.name}: glue these numbers from the run, or list them with a reason in "
                       f"prose_numbers/{md.stem}.yml:\n" + "\n".join(found))
    unused = [p for p in phrases if p not in text]
    assert not unused, f"{md.name}: allowed phrases no longer in the prose: {unused}"


def labels() -> set[str]:
    found: set[str] = set()
    for path in [*CHAPTERS, *(ROOT / "book").glob("*.md")]:
        found |= set(re.findall(r"^\(([\w-]+)\)=\s*$", path.read_text(), flags=re.M))
    return found


@pytest.mark.parametrize("md", CHAPTERS + BOOK_PAGES, ids=lambda p: p.stem)
def test_chapter_references_resolve_by_label_to_the_chapter_they_name(md):
    text = prose(md)
    known = labels()
    problems = []
    for role, body in ROLE.findall(text):
        if role in ("ref", "numref") and "Chapter" in body:
            m = REF_CHAPTER.match(body.strip())
            if not m:
                problems.append(f"cannot read {body!r}")
            elif int(m.group(1)) != int(m.group(3)):
                problems.append(f"{body!r} names Chapter {m.group(1)} but points at {m.group(2)}")
            elif m.group(2) not in known:
                problems.append(f"{body!r}: no label {m.group(2)}")
        elif role == "ref":
            target = body.rsplit("<", 1)[-1].rstrip(">").strip()
            if target not in known:
                problems.append(f"{{ref}} to unknown label {target!r}")
    without_headings = re.sub(r"^#+ .*$", " ", ROLE.sub(" ", text), flags=re.M)
    bare = re.findall(r"[^\n]{0,30}\bChapters? \d+[^\n]{0,10}", without_headings)
    problems += [f"bare chapter number (use {{ref}}): {b.strip()!r}" for b in bare]
    assert not problems, f"{md.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_check_yourself_questions_with_hidden_answers(md):
    text = prose(md)
    assert "\n## Check yourself" in "\n" + text, f"{md.name} has no 'Check yourself' section"
    section = text.split("## Check yourself", 1)[1].split("\n## ", 1)[0]
    questions = re.findall(r"^\d+\. ", section, flags=re.M)
    answers = re.findall(r"```\{admonition\} Answer\s*\n\s*:class: dropdown", section)
    assert 5 <= len(questions) <= 8, f"{md.name}: {len(questions)} questions (want 5 to 8)"
    assert len(answers) == len(questions), f"{md.name}: {len(questions)} questions, {len(answers)} hidden answers"


def test_no_figure_id_is_also_a_section_label():
    """A plotly div whose id is a section label's anchor is never drawn: the label's span comes first in the page."""
    import re

    texts = [p.read_text() for p in sorted((ROOT / "notebooks").glob("ch*.md"))]
    figures = {m for t in texts for m in re.findall(r'show\(fig, "([^"]+)"\)', t)}
    labels = {m for t in texts for m in re.findall(r"^\(([\w-]+)\)=$", t, flags=re.M)}
    assert figures and labels and not figures & labels, figures & labels
