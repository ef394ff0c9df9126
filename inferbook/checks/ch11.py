"""Checkers for the questions of Chapter 11: each prints a one-line verdict and returns it as a boolean."""
from __future__ import annotations


def _close(answer: float, want: float, rel: float) -> bool:
    return abs(answer - want) <= rel * abs(want)


def check_crossover(answer_elements: float, fixed_s: float, per_element_s: float, rel: float = 0.05) -> bool:
    """Chapter 11, Check yourself: the tensor size at which an operation's work equals its fixed cost.

    With a time per operation ``t(n) = a + b n``, the work ``b n`` equals the fixed cost ``a`` at
    ``n* = a / b`` elements.
    """
    if fixed_s <= 0 or per_element_s <= 0:
        raise ValueError("the fixed cost and the cost per element must be positive")
    want = fixed_s / per_element_s
    if _close(answer_elements, want, rel):
        print(f"right: about {want:,.0f} elements, where the work equals the fixed cost")
        return True
    hint = " (that is the product a*b; divide instead)" if _close(answer_elements, fixed_s * per_element_s, rel) else ""
    print(f"not quite: {answer_elements:,.0f}, expected about {want:,.0f} elements{hint}")
    return False


def check_launch_over_floor(answer: float, kernels: int, launch_s: float, weight_bytes: float,
                            bytes_per_s: float, rel: float = 0.05) -> bool:
    """Chapter 11, Check yourself: launch time of a step's kernels over its weight-read floor.

    ``kernels * launch_s`` is the host's time to launch a step's kernels one by one; the floor is
    ``weight_bytes / bytes_per_s``. A ratio above one says that, unless launches overlap the work
    or are removed, the step is bound by launching.
    """
    want = kernels * launch_s / (weight_bytes / bytes_per_s)
    if _close(answer, want, rel):
        print(f"right: about {want:.1f} (launches over the read floor)")
        return True
    hint = " (did you invert the ratio?)" if want and _close(answer, 1 / want, rel) else ""
    print(f"not quite: {answer:.3g}, expected about {want:.1f}{hint}")
    return False


def check_break_even_tokens(answer_tokens: float, compile_s: float, eager_s_per_token: float,
                            compiled_s_per_token: float, rel: float = 0.05) -> bool:
    """Chapter 11, Check yourself: tokens a process must decode before a compilation pays for itself.

    Each token saves ``eager_s_per_token - compiled_s_per_token``; the compilation costs
    ``compile_s`` once (the time it added: the compiling request less the same request served
    eagerly), so it pays after ``compile_s / saving`` tokens.
    """
    saving = eager_s_per_token - compiled_s_per_token
    if saving <= 0:
        raise ValueError("the compiled path must be faster per token for a break-even point to exist")
    want = compile_s / saving
    if _close(answer_tokens, want, rel):
        print(f"right: about {want:,.0f} tokens")
        return True
    hint = (" (divide by the saving per token, not by the compiled time per token)"
            if _close(answer_tokens, compile_s / compiled_s_per_token, rel) else "")
    print(f"not quite: {answer_tokens:,.0f}, expected about {want:,.0f} tokens{hint}")
    return False
