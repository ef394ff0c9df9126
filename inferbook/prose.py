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


FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})(.*)$")


def _drop_code(text: str) -> str:
    """Code fences removed with their contents; directive fences (``{admonition}``, ``{dropdown}``) lose only
    their own lines, so their body stays prose. Read line by line, as MyST pairs fences: a closing fence is
    the opening's character, at least as long, with nothing after it; directives may nest code fences."""
    out, directives, code = [], [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        fence, info = (m.group(1), m.group(2).strip()) if m else ("", "")
        if code is not None:  # inside a code fence: only its closing fence ends it
            if m and not info and fence[0] == code[0] and len(fence) >= len(code):
                code = None
            out.append(" ")
        elif m and info.startswith("{"):
            directives.append(fence)
            out.append(" ")
        elif m and not info and directives and fence[0] == directives[-1][0] and len(fence) >= len(directives[-1]):
            directives.pop()
            out.append(" ")
        elif m and fence[0] != ":":
            code = fence
            out.append(" ")
        else:
            out.append(line)
    return "\n".join(out)


def strip(text: str) -> str:
    """Prose with code, mathematics, roles, labels, link targets and list numbers removed."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = _drop_code(text)
    text = re.sub(r"^\s*:[\w-]+:.*$", " ", text, flags=re.M)  # a directive's options
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
