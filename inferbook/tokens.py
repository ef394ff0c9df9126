"""Token ids as coloured HTML spans, for the book's pages (Chapter 3). Book-only: the runtime never imports it."""
from __future__ import annotations

import html

from inferlab.text.chat import TokenRow

#: Background colours for consecutive tokens (light, so that the text stays readable).
PALETTE = ("#fde68a", "#bfdbfe", "#bbf7d0", "#fbcfe8", "#ddd6fe", "#fed7aa")


def tokens_html(rows: list[TokenRow], title: str = "") -> str:
    """Coloured token spans as plain HTML, no scripts; hover a span for its id (Chapter 3)."""
    spans = []
    for row in rows:
        style = ("background:#1f2937;color:#f9fafb;font-weight:600" if row.special
                 else f"background:{PALETTE[row.index % len(PALETTE)]};color:#111827")
        spans.append(f'<span title="id {row.token_id}" style="{style};padding:1px 0;margin:0 1px;'
                     f'border-radius:3px;white-space:pre-wrap">{html.escape(row.shown)}</span>')
    head = f'<div style="font-size:0.85em;color:#4b5563">{html.escape(title)} ({len(rows)} tokens)</div>' if title else ""
    body = "".join(spans)
    ids = " ".join(str(r.token_id) for r in rows)
    return (f'<div style="margin:0.4em 0">{head}<div style="font-family:monospace;line-height:1.9">{body}</div>'
            f'<div style="font-family:monospace;font-size:0.75em;color:#6b7280">ids: {html.escape(ids)}</div></div>')
