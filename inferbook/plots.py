"""Showing plotly figures both in a live kernel and in the book's static pages (Chapter 1).

In a live kernel (Jupyter, Colab) :func:`show` is ``fig.show()``. When the book is published or
checked (``INFERLAB_STATIC_PLOTS=1``), it emits HTML that draws the figure with the ``plotly.js``
the book ships in ``_static``, under a fixed element id, so the output is identical from run to
run and the page needs no network.
"""
from __future__ import annotations

import os
from typing import Any


def static_plots() -> bool:
    """Whether figures are being rendered for the static book (Chapter 1)."""
    return os.environ.get("INFERLAB_STATIC_PLOTS", "") not in ("", "0")


def show(fig: Any, div_id: str) -> None:
    """Display a plotly figure live, or as self-contained HTML for the book (Chapter 1)."""
    if not static_plots():
        fig.show()
        return
    from IPython.display import HTML, display

    html = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True, "typesetMath": False})
    display(HTML(html))
