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


def rows_at_ridge(answer: float, flops_per_s: float, bytes_per_s: float, bytes_per_param: float, rel: float,
                  what: str, unit: str, per: str) -> bool:
    """Check the rows (prompt tokens, or sequences of a batch) per weight pass at which a dense pass reaches the ridge.

    Each row does two FLOPs per weight and the pass reads each weight's ``bytes_per_param`` bytes
    once, so its intensity is ``2 rows / bytes_per_param``: the ridge ``flops_per_s / bytes_per_s``
    is reached at ``rows = flops_per_s / bytes_per_s * bytes_per_param / 2``. ``per`` names a row in
    the hint given to an answer that is the ridge itself.
    """
    ridge = flops_per_s / bytes_per_s
    want = ridge * bytes_per_param / 2
    ok = close(answer, want, rel)
    hint = ""
    if not ok and close(answer, ridge, rel) and not close(ridge, want, rel):
        hint = f" (that is the ridge point itself, the ridge in FLOP per byte; how many FLOPs per byte does one {per} bring?)"
    return verdict(what, answer, want, ok, unit, hint)
