"""Reading the book's prose for numbers and chapter references (back matter; used by the tests).

:func:`strip` removes from MyST markdown everything that is not prose a reader reads as typed
text: code, mathematics, roles (glued numbers among them), labels, link targets, list numbers.
:func:`hand_typed_numbers` then finds the digit strings left, which the book's rule says must be
glued from a run or listed with a reason.
"""
from __future__ import annotations

import re

ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
REF_CHAPTER = re.compile(r"^Chapter (\d+)(?:'s)?\s*<((?:plan-)?ch(\d\d)(?:-[\w-]+)?)>$")
NUMBER = re.compile(r"(?<![\w.\-/#])\d[\d,]*(?:\.\d+)?(?![\w\-])")
NAMED_PLACES = re.compile(r"\b(?:Experiment|Exercise|Question|Part) \d+")


def strip(text: str) -> str:
    """Prose with code, mathematics, roles, labels, link targets and list numbers removed."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    # plain code fences go; directive fences ({admonition} ...) keep their body, lose options
    text = re.sub(r"^(`{3,}|~{3,})(?!\{)[^\n]*\n.*?^\1\s*$", " ", text, flags=re.S | re.M)
    text = re.sub(r"^(`{3,}|:{3,})\{[^\n]*$", " ", text, flags=re.M)
    text = re.sub(r"^:[\w-]+:.*$", " ", text, flags=re.M)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"(?<!\\)\$[^$\n]+\$", " ", text)
    text = ROLE.sub(" \u25af ", text)
    text = re.sub(r"``.*?``|`[^`\n]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"^\([\w-]+\)=\s*$", " ", text, flags=re.M)
    text = re.sub(r"^\s*\d+\.\s", " ", text, flags=re.M)
    text = re.sub(r"^#+\s*\d+\.\s", " ", text, flags=re.M)
    text = re.sub(r"\[\^\w+\]", " ", text)
    text = NAMED_PLACES.sub(" ", text)
    return text


def hand_typed_numbers(text: str, phrases: list[str]) -> list[str]:
    """Digit strings of stripped prose not covered by an allowed phrase, each with its context."""
    covered: list[tuple[int, int]] = []
    for phrase in phrases:
        covered += [(m.start(), m.end()) for m in re.finditer(re.escape(phrase), text)]
    found = []
    for m in NUMBER.finditer(text):
        if not any(a <= m.start() and m.end() <= b for a, b in covered):
            found.append(" ".join(text[max(0, m.start() - 30):m.end() + 20].split()))
    return found
