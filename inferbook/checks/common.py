"""What the numeric checkers of Part II share: a relative tolerance and a one-line verdict."""
from __future__ import annotations


def close(answer: float, want: float, rel: float) -> bool:
    """Whether ``answer`` lies within ``rel`` (a fraction) of ``want``."""
    return abs(answer - want) <= rel * abs(want)


def verdict(what: str, answer: float, want: float, ok: bool, unit: str, hint: str = "") -> bool:
    """Print ``right: ...`` or ``not quite: ...`` with the expected value, and return ``ok``."""
    if ok:
        print(f"right: {what}, about {want:,.4g}{unit}")
    else:
        print(f"not quite: {answer:,.4g}{unit}, expected about {want:,.4g}{unit}{hint}")
    return ok
