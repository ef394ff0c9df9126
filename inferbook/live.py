"""Marking controls that need a running kernel (Chapter 1).

A widget on the book's static page renders its saved state, but nothing runs when a reader moves
it: there is no kernel behind the page. Every live control in a chapter is therefore shown with
:func:`live_only`, which prints a visible note with the chapter's Colab link above it, or it has
a precomputed plotly twin on the page. The browser test checks that every widget carries the note.
"""
from __future__ import annotations

from typing import Any

REPOSITORY = "inference-lab/inference-lab"
BRANCH = "main"


def colab_url(notebook: str) -> str:
    """The Colab address of a chapter notebook, such as ``ch01_what_is_inference`` (Chapter 1)."""
    name = notebook if notebook.endswith(".ipynb") else notebook + ".ipynb"
    return f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/notebooks/{name}"


def live_note_html(notebook: str) -> str:
    """The HTML of the note shown above a live control (Chapter 1)."""
    return ('<div class="live-only"><strong>Live control.</strong> It responds only in a running '
            'notebook (Jupyter, or <a href="' + colab_url(notebook) + '">this chapter in Colab</a>); '
            'on the static page it shows the state it was saved with.</div>')


def live_only(widget: Any, notebook: str) -> Any:
    """Display the live-only note, then ``widget``; return the widget (Chapter 1)."""
    from IPython.display import HTML, display

    display(HTML(live_note_html(notebook)))
    display(widget)
    return widget
