"""The "Your run" box: the reader's numbers beside the published run's, and which claims held (CHAPTER_STANDARD).

A chapter's prose states what its published run showed. Some of those claims hold on any machine of
the book's kind (a 256-token pass is slower than a one-token pass): the notebook asserts them on
every run. Others are results of the published machine that another processor need not repeat
(how much a second thread buys, whether the first call after loading is slower): the machine kind
comes with an AMD EPYC or an Intel Xeon, whose kernels and memory systems differ. For those,
:class:`YourRun` asserts the claim when the chapter is published (``scripts/publish.py`` sets
``INFERLAB_RECORD``), so the prose never states what its own run did not show, and on every other
run reports whether it held, in a box beside the published numbers, instead of failing the
reader's notebook. The box's output is not compared by nbval; what it reports is this run's.
"""
from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from inferlab.cpuinfo import processor_words


def as_shown(value: float, spec: str) -> float:
    """A float rounded to the digits the prose shows (``spec``, e.g. ``".3f"``), for ``glue``.

    Floating-point results differ in their last bits between processors, whose kernels sum in other
    orders; nbval compares a glued value's stored text exactly. Rounded to what the reader sees, the
    stored value is the same on either processor of the book's machine kind unless the two results
    straddle a rounding boundary of the shown digits.
    """
    return float(format(value, spec))


def publishing() -> bool:
    """Whether this run is the chapter's publication (``scripts/publish.py`` sets ``INFERLAB_RECORD``)."""
    return bool(os.environ.get("INFERLAB_RECORD"))


def published_record(chapter: str, data: Path | str = Path("..") / "data") -> dict[str, Any] | None:
    """The chapter's published record, ``data/<chapter>.json``, or None where it is not at hand."""
    path = Path(data) / f"{chapter}.json"
    return json.loads(path.read_text()) if path.exists() else None


machine_words = processor_words  # "Intel(R) Xeon(R) Processor (family 6, model 207)" from a record's ``machine``


class YourRun:
    """One experiment's claims about the published machine, and the numbers to set beside the published ones.

    ``claim(text, holds)`` asserts ``holds`` when publishing and records it otherwise (a sentence of
    fixed prose rests on it); ``report(text, holds)`` only records it (the prose's verdict is built
    from the run, so either outcome can be published); ``number(label, yours, published, spec)``
    adds a row to the table; ``box()`` displays both.
    """

    def __init__(self, experiment: str, published: dict[str, Any] | None, this_machine: dict[str, Any]) -> None:
        self.experiment = experiment
        # When publishing, this run becomes the published one (its record is written at the chapter's end).
        self.published_machine = this_machine if publishing() else (published or {}).get("provenance", {}).get("machine")
        self.this_machine = this_machine
        self.claims: list[tuple[str, bool]] = []
        self.rows: list[tuple[str, str, str]] = []

    def claim(self, text: str, holds: bool, detail: Any = None) -> None:
        """A claim the prose makes of the published run: asserted when publishing, reported otherwise.

        It returns nothing, so that a claim ending a hidden cell prints no stray ``True`` on the page;
        :meth:`held` gives the outcomes.
        """
        if publishing():
            assert holds, (text, detail)
        self.claims.append((text, bool(holds)))

    def report(self, text: str, holds: bool) -> bool:
        """A hypothesis whose verdict the prose reports from the run, whichever way it went: never asserted."""
        self.claims.append((text, bool(holds)))
        return bool(holds)

    def number(self, label: str, yours: Any, published: Any, spec: str = "") -> None:
        """One quantity of this run beside the published run's (None: not recorded there)."""
        def shown(value: Any) -> str:
            return "not recorded" if value is None else format(value, spec)
        self.rows.append((label, shown(yours), shown(yours if publishing() else published)))

    def held(self) -> list[bool]:
        """Whether each claim held in this run, in order."""
        return [holds for _, holds in self.claims]

    def html(self) -> str:
        """The box as HTML: which machine ran what, the numbers side by side, each claim's outcome here."""
        e = html.escape
        lines = [f'<div class="admonition your-run"><p class="admonition-title">Your run: {e(self.experiment)}</p>',
                 f"<p>This run: {e(machine_words(self.this_machine))}. Published run: "
                 f"{e(machine_words(self.published_machine))}. On the book's page both columns show the published "
                 "run; in a notebook the first shows yours.</p>"]
        if self.rows:
            lines.append("<table><tr><th></th><th>this run</th><th>published run</th></tr>")
            lines += [f"<tr><td>{e(a)}</td><td>{e(b)}</td><td>{e(c)}</td></tr>" for a, b, c in self.rows]
            lines.append("</table>")
        if self.claims:
            lines.append("<p>The chapter's claims and hypotheses, checked on this run:</p><ul>")
            lines += [f"<li>{'held' if ok else 'did not hold'}: {e(text)}</li>" for text, ok in self.claims]
            lines.append("</ul>")
        lines.append("</div>")
        return "\n".join(lines)

    def box(self) -> None:
        """Display the box (tag the cell ``nbval-ignore-output``: its numbers are this run's)."""
        from IPython.display import HTML, display

        display(HTML(self.html()))
