"""Small fixes to the HTML that Jupyter Book 1 produces, so that every page loads without errors.

- sphinx-thebe registers its configuration script twice, and the second copy throws
  "Identifier 'THEBE_JS_URL' has already been declared": keep one copy of each script.
- pydata-sphinx-theme logs "Got invalid theme mode" when the page has no default mode, which
  sphinx-book-theme does not set: set "auto" (follow the reader's system).
"""
from __future__ import annotations

from typing import Any


def _fix_page(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    context["default_mode"] = context.get("default_mode") or "auto"
    seen = set()
    unique = []
    for script in context.get("script_files", []):
        # An inline script is registered once with filename None and once with "": same script.
        key = (script.filename or "", tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"][:] = unique


def setup(app: Any) -> dict:
    app.connect("html-page-context", _fix_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
