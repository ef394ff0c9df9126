"""What each operation of one forward pass costs: counted, checked against PyTorch, and timed (Chapter 4).

Counting conventions (stated once, used everywhere):

- A matrix product of [m, k] by [k, n] is 2*m*k*n FLOPs; bias additions are counted separately.
- Element-wise work is counted per element: LayerNorm 8, RMSNorm 4, tanh-GELU 8, SiLU-and-gate 5,
  the attention scale and softmax 6, rotary positions 3, a residual or position addition 1.
- Bytes are the minimum traffic of each operation in isolation: every operand read once and every
  result written once (as if each operation were one fused kernel), at the weights' bytes per value.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch.utils.flop_counter import FlopCounterMode

from inferlab.errors import BadRequest
from inferlab.models.base import NativeCausalLM
from inferlab.models.shape import ModelShape, UnsupportedModel

#: The operation types of a forward pass, in the order they run; the profiler regions carry these names.
OPS = ("embedding", "norm", "attn_proj", "rope", "scores", "softmax", "context", "mlp", "residual", "lm_head")
#: Element-wise FLOPs per element, by the conventions above.
PER_ELEMENT = {"layernorm": 8, "rmsnorm": 4, "gelu": 8, "swiglu": 5, "softmax": 6, "rope": 3, "add": 1}
#: Which native Linear modules belong to which operation type.
LINEAR_OP = {"c_attn": "attn_proj", "c_proj": "attn_proj", "q_proj": "attn_proj", "k_proj": "attn_proj",
             "v_proj": "attn_proj", "o_proj": "attn_proj", "c_fc": "mlp", "mlp_proj": "mlp",
             "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


@dataclass(frozen=True)
class OpCost:
    """FLOPs (matrix products and element-wise, separately) and bytes of one operation type (Chapter 4)."""

    op: str
    matmul_flops: int
    other_flops: int
    bytes: int

    @property
    def flops(self) -> int:
        """All FLOPs of the operation type (Chapter 4)."""
        return self.matmul_flops + self.other_flops


def _matmul(m: int, k: int, n: int, bias: bool, width: int) -> tuple[int, int, int]:
    """(matmul FLOPs, bias FLOPs, bytes) of [m, k] @ [k, n] (+ bias) (Chapter 4)."""
    return 2 * m * k * n, m * n if bias else 0, width * (m * k + k * n + m * n + (n if bias else 0))


def forward_costs(shape: ModelShape, seq: int, batch: int = 1, last_only: bool = False,
                  bytes_per_value: int = 4) -> list[OpCost]:
    """Analytic FLOPs and bytes per operation type of one forward pass over [batch, seq] (Chapter 4).

    ``last_only`` projects only the last position through the LM head, as ``last_logits`` does. The count
    is :func:`step_costs` with nothing cached (Chapter 10 adds the cache).
    A ``seq`` beyond the model's context length is refused: the model cannot run it.
    """
    if seq < 1 or batch < 1:
        raise BadRequest(f"seq and batch must be at least 1, got seq={seq}, batch={batch}")
    if seq > shape.context:
        raise BadRequest(f"seq={seq} exceeds the model's context of {shape.context} positions")
    return step_costs(shape, seq, 0, batch, last_only, bytes_per_value)  # nothing cached


def step_costs(shape: ModelShape, new: int, context: int = 0, batch: int = 1, last_only: bool = True,
               bytes_per_value: int = 4) -> list[OpCost]:
    """FLOPs and bytes per operation type of a pass over `new` positions after `context` cached ones (Chapter 10).

    Chapter 4's `forward_costs` with a KV cache: each new position's attention spans the cached keys and values as
    well as the new ones, and reads them. Writing the new keys and values into the cache is left out. With nothing
    cached it is `forward_costs(shape, new, batch, last_only, bytes_per_value)`.
    """
    s, w = shape, bytes_per_value
    if new < 1 or batch < 1 or context < 0 or context + new > s.context:
        raise BadRequest(f"need new >= 1, batch >= 1, context >= 0 and context + new <= {s.context}")
    rows, d = batch * new, s.hidden
    q_width, kv_width = s.heads * s.head_dim, s.kv_heads * s.head_dim
    keys = context + new  # the keys each new position may attend to
    gpt2 = s.family == "gpt2"
    acc = {op: [0, 0, 0] for op in OPS}

    def add(op: str, mm: int, other: int, nbytes: int) -> None:
        acc[op][0] += mm
        acc[op][1] += other
        acc[op][2] += nbytes

    def linear(op: str, k: int, n: int, m: int = rows, bias: bool = gpt2) -> None:
        add(op, *_matmul(m, k, n, bias, w))

    # embeddings: gather the new rows of the token table (GPT-2 also adds learned positions)
    add("embedding", 0, rows * d if gpt2 else 0, w * rows * d * (3 if gpt2 else 2))
    norm_flops, norm_params = PER_ELEMENT["layernorm" if gpt2 else "rmsnorm"], 2 * d if gpt2 else d
    for _ in range(s.layers):
        for _ in range(2):  # before attention, before the MLP
            add("norm", 0, norm_flops * rows * d, w * (2 * rows * d + norm_params))
            add("residual", 0, rows * d, w * 3 * rows * d)
        if gpt2:
            linear("attn_proj", d, 3 * q_width)
        else:
            for width in (q_width, kv_width, kv_width):
                linear("attn_proj", d, width)
            rotated = rows * (q_width + kv_width)
            add("rope", 0, PER_ELEMENT["rope"] * rotated, w * (2 * rotated + 2 * new * s.head_dim))
        scores = batch * s.heads * new * keys
        add("scores", 2 * scores * s.head_dim, 0, w * (rows * q_width + batch * keys * kv_width + scores))
        add("softmax", 0, PER_ELEMENT["softmax"] * scores, w * 2 * scores)
        add("context", 2 * scores * s.head_dim, 0, w * (scores + batch * keys * kv_width + rows * q_width))
        linear("attn_proj", q_width, d)
        linear("mlp", d, s.intermediate)
        if gpt2:
            add("mlp", 0, PER_ELEMENT["gelu"] * rows * s.intermediate, w * 2 * rows * s.intermediate)
        else:
            linear("mlp", d, s.intermediate)
            add("mlp", 0, PER_ELEMENT["swiglu"] * rows * s.intermediate, w * 3 * rows * s.intermediate)
        linear("mlp", s.intermediate, d)
    add("norm", 0, norm_flops * rows * d, w * (2 * rows * d + norm_params))
    linear("lm_head", d, s.vocab, m=batch if last_only else rows, bias=False)
    return [OpCost(op, *acc[op]) for op in OPS]


def cost_totals(costs: list[OpCost]) -> dict[str, int]:
    """Sum a cost table: matmul FLOPs, other FLOPs, all FLOPs, bytes (Chapter 4)."""
    return {"matmul_flops": sum(c.matmul_flops for c in costs), "other_flops": sum(c.other_flops for c in costs),
            "flops": sum(c.flops for c in costs), "bytes": sum(c.bytes for c in costs)}


def counted_matmul_flops(model: NativeCausalLM, input_ids: torch.Tensor, last_only: bool = False) -> dict[str, int]:
    """Matrix-product FLOPs per operation type as torch's FlopCounterMode counts them (Chapter 4).

    Linear layers are attributed by module name; batched products (``aten.bmm``) are the attention
    scores and context together; the rest of the top-level matrix products is the LM head.
    """
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(input_ids, last_only=last_only)
    counts = counter.get_flop_counts()
    out = {"attn_proj": 0, "mlp": 0, "scores+context": 0, "lm_head": 0}
    root = type(model).__name__
    for name, per_op in counts.items():
        leaf = name.rsplit(".", 1)[-1]
        if name.startswith(root + ".") and leaf in LINEAR_OP:
            out[LINEAR_OP[leaf]] += sum(int(v) for k, v in per_op.items() if "mm" in str(k))
    total = counts.get("Global", {})
    mm = sum(int(v) for k, v in total.items() if str(k) in ("aten.mm", "aten.addmm"))
    out["scores+context"] = sum(int(v) for k, v in total.items() if str(k) == "aten.bmm")
    out["lm_head"] = mm - out["attn_proj"] - out["mlp"]
    other = sum(int(v) for k, v in total.items() if str(k) not in ("aten.mm", "aten.addmm", "aten.bmm"))
    if other:
        raise UnsupportedModel(f"FlopCounterMode counted FLOPs in unexpected ops: {dict(total)}")
    return out


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Silence the profiler library's own start/stop lines, written to file descriptor 2 (Chapter 4)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def profile_ops(model: NativeCausalLM, input_ids: torch.Tensor, repeats: int = 3,
                last_only: bool = False) -> dict[str, float]:
    """Seconds per forward pass spent in each operation type, from torch.profiler on the CPU (Chapter 4).

    Keys are :data:`OPS`, plus ``forward`` (the whole pass) and ``other`` (what no region covers:
    the default positions, Python between regions). One warm-up pass runs first and is not recorded.
    """
    if repeats < 1:
        raise BadRequest(f"repeats must be at least 1, got {repeats}")
    from torch.profiler import ProfilerActivity, profile, record_function

    run = model.last_logits if last_only else model
    with torch.inference_mode():
        run(input_ids)
        with _quiet_native_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(repeats):
                with record_function("forward"):
                    run(input_ids)
    totals = {e.key: e.cpu_time_total for e in prof.key_averages()}  # microseconds, all calls together
    seconds = {op: totals.get(op, 0.0) / repeats / 1e6 for op in OPS}
    seconds["forward"] = totals["forward"] / repeats / 1e6
    seconds["other"] = seconds["forward"] - sum(seconds[op] for op in OPS)
    return seconds


def time_last_only(model: NativeCausalLM, input_ids: torch.Tensor, repeats: int = 15,
                   warmup: int = 2) -> dict[str, Any]:
    """Paired, interleaved timings of ``forward(...)[:, -1]`` against ``last_logits`` (Chapter 4).

    Both paths are warmed up ``warmup`` times first. Then each of ``repeats`` pairs runs both paths
    back to back, alternating which goes first, so that drift on a shared machine hits both alike;
    ``speedup`` is the median over pairs of full time / last-only time.
    """
    if repeats < 1 or warmup < 0:
        raise BadRequest(f"repeats must be at least 1 and warmup at least 0, got {repeats}, {warmup}")
    full, last = [], []

    def timed(fn: Any) -> tuple[float, torch.Tensor]:
        start = time.perf_counter()
        result = fn(input_ids)
        return time.perf_counter() - start, result

    def run_full(ids: torch.Tensor) -> torch.Tensor:
        return model(ids)[:, -1, :]

    with torch.inference_mode():
        for _ in range(warmup):
            run_full(input_ids)
            model.last_logits(input_ids)
        for i in range(repeats):
            if i % 2 == 0:
                (t_full, every), (t_last, only) = timed(run_full), timed(model.last_logits)
            else:
                (t_last, only), (t_full, every) = timed(model.last_logits), timed(run_full)
            full.append(t_full)
            last.append(t_last)
    ratios = [f / l for f, l in zip(full, last)]
    return {"full_s": full, "last_s": last, "full_median_s": statistics.median(full),
            "last_median_s": statistics.median(last), "pair_ratios": ratios,
            "speedup": statistics.median(ratios),  # median of paired ratios: each pair shares the machine's state
            "speedup_of_medians": statistics.median(full) / statistics.median(last),
            "max_abs_diff": float((every - only).abs().max()),
            "same_argmax": bool(torch.equal(every.argmax(-1), only.argmax(-1)))}
