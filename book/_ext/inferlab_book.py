"""Small fixes to the HTML that Jupyter Book 1 produces, so that every page loads without errors.

- sphinx-thebe registers its configuration script twice, and the second copy throws
  "Identifier 'THEBE_JS_URL' has already been declared": keep one copy of each script.
- The "Numbers to know" page takes every figure from data/ (inferbook.numbers): its MyST
  substitutions are filled in here, when the configuration is read.
- pydata-sphinx-theme logs "Got invalid theme mode" when the page has no default mode, which
  sphinx-book-theme does not set: set "auto" (follow the reader's system).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


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


def _numbers(app: Any, config: Any) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from inferbook.numbers import substitutions

    config.myst_substitutions = {**(config.myst_substitutions or {}), **substitutions(ROOT)}


def setup(app: Any) -> dict:
    app.connect("config-inited", _numbers)
    app.connect("html-page-context", _fix_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
