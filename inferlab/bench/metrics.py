"""The workload metrics of a streamed request, defined on the times of its events (Chapter 8).

Let ``t_0 < t_1 < ... < t_{n-1}`` be the times at which the ``n`` output tokens of one request left
the engine, counted from the request's admission (:attr:`inferlab.records.StreamEvent.elapsed_s`):

- time to first token, ``TTFT = t_0``;
- end-to-end latency, ``E = t_{n-1}``, the last output token's time;
- inter-token latencies, ``ITL_i = t_i - t_{i-1}`` for ``i = 1 .. n-1``;
- time per output token, ``TPOT = (E - TTFT) / (n - 1)``, the mean of the inter-token latencies
  (the gaps telescope); undefined (``nan``) for a one-token request, which has no gap;
- output rate ``n / E``, decode rate ``1 / TPOT`` and prefill rate ``P / TTFT``, three
  different "tokens per second";
- cost per million output tokens on a machine that serves the request alone, from an assumed price
  per machine-hour.

TPOT follows vLLM's serving benchmark (``calculate_metrics`` in ``vllm/benchmarks/serve.py``), which
also keeps the inter-token latencies of all requests as one pooled list for its percentiles
(:func:`pooled_itl_percentiles`). A request that the engine ends on an end-of-sequence token emits
its final event one step after its last output token (the end-of-sequence token is not an output
token here); ``E`` leaves that step out and :attr:`RequestMetrics.finished_s` keeps it.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from inferlab.errors import InferlabError
from inferlab.records import StreamEvent

#: The inter-token latency percentiles a report gives by default (Chapter 8).
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)


class BadStream(InferlabError, ValueError):
    """Events, or token times, from which a request's metrics cannot be defined (Chapter 8)."""


def _percentiles(values: Sequence[float], qs: Iterable[float]) -> dict[float, float]:
    """``np.percentile`` (linear interpolation between order statistics) at each of ``qs`` (Chapter 8)."""
    import numpy as np

    qs = tuple(float(q) for q in qs)
    if not qs or any(not 0 <= q <= 100 for q in qs):
        raise ValueError(f"percentiles must lie between 0 and 100, got {qs}")
    return {q: float(v) for q, v in zip(qs, np.percentile(np.asarray(values, dtype=float), qs))}


@dataclass(frozen=True)
class RequestMetrics:
    """TTFT, end-to-end latency and inter-token latencies of one streamed request (Chapter 8).

    Times are in seconds from the request's admission. ``finished_s`` is the time of the request's
    final event: equal to ``e2e_s`` unless the request ended on an end-of-sequence token, whose step
    emits no output token.
    """

    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    e2e_s: float
    itl_s: tuple[float, ...]
    finished_s: float | None = None

    @property
    def tpot_s(self) -> float:
        """Time per output token: (end-to-end latency - TTFT) / (output tokens - 1); nan for one token (Chapter 8)."""
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else math.nan

    def output_tokens_per_s(self) -> float:
        """The request's output rate: output tokens over its end-to-end latency (Chapter 8)."""
        return self.output_tokens / self.e2e_s

    def decode_tokens_per_s(self) -> float:
        """The decode phase's rate, 1 / TPOT; nan for a one-token request (Chapter 8)."""
        return 1 / self.tpot_s if self.output_tokens > 1 else math.nan

    def prefill_tokens_per_s(self) -> float:
        """Prompt tokens over the TTFT: the rate at which the prefill read the prompt (Chapter 8)."""
        return self.prompt_tokens / self.ttft_s

    def cost_per_million(self, dollars_per_hour: float) -> float:
        """Dollars per million output tokens on a machine that serves this request alone (Chapter 8).

        The machine costs ``dollars_per_hour / 3600`` per second for the request's ``e2e_s`` seconds.
        """
        if dollars_per_hour < 0:
            raise ValueError(f"a price per hour cannot be negative, got {dollars_per_hour}")
        return dollars_per_hour / 3600 * self.e2e_s / self.output_tokens * 1e6

    def itl_percentiles(self, qs: Iterable[float] = DEFAULT_PERCENTILES) -> dict[float, float]:
        """Percentiles of this request's inter-token latencies, as ``np.percentile`` gives them (Chapter 8).

        A one-token request has no inter-token latency, and is refused with :class:`BadStream`.
        """
        if not self.itl_s:
            raise BadStream("a request of one output token has no inter-token latency")
        return _percentiles(self.itl_s, qs)


def metrics_from_times(prompt_tokens: int, token_times_s: Sequence[float],
                       finished_s: float | None = None) -> RequestMetrics:
    """A request's metrics from the times its output tokens arrived, in seconds from admission (Chapter 8).

    For any source of token times (the engine's stream, a client reading a server's stream). The
    times must be finite, at least zero and never decreasing, and there must be at least one; a
    ``finished_s`` earlier than the last token is refused.
    """
    times = tuple(float(t) for t in token_times_s)
    if prompt_tokens < 0:
        raise BadStream(f"prompt_tokens cannot be negative, got {prompt_tokens}")
    if not times:
        raise BadStream("no output token: a request that produced none has no time to first token")
    if any(not math.isfinite(t) or t < 0 for t in times):
        raise BadStream(f"token times must be finite and at least zero, got {times}")
    if any(b < a for a, b in zip(times, times[1:])):
        raise BadStream(f"token times must never decrease, got {times}")
    if finished_s is not None and not finished_s >= times[-1]:
        raise BadStream(f"the request cannot finish ({finished_s}) before its last token ({times[-1]})")
    return RequestMetrics(prompt_tokens, len(times), times[0], times[-1],
                          tuple(b - a for a, b in zip(times, times[1:])),
                          times[-1] if finished_s is None else float(finished_s))


def request_metrics(events: Iterable[StreamEvent]) -> RequestMetrics:
    """The workload metrics of one finished single-sample stream, from its events' times (Chapter 8).

    Give every event of the stream, the final one (``done=True``, carrying the result) included, as
    ``list(engine.stream(...))`` returns them. Events of several samples or requests, an unfinished
    stream, or a stream whose token events do not match its result's tokens are refused with
    :class:`BadStream`.
    """
    events = list(events)
    if not events:
        raise BadStream("no events: give every event of one finished stream")
    final = events[-1]
    if not final.done or final.result is None:
        raise BadStream("the stream is not finished: its last event must be the final one (done=True, with the result)")
    if len({(e.request_id, e.index) for e in events}) != 1:
        raise BadStream("give the events of one sample of one request (a request with n = 1)")
    if any(e.done for e in events[:-1]):
        raise BadStream("only the last event may be the final one")
    token_events = [e for e in events[:-1] if e.token_id is not None]
    if [e.token_id for e in token_events] != list(final.result.token_ids):
        raise BadStream(f"the stream's {len(token_events)} token events do not match its result's "
                        f"{len(final.result.token_ids)} tokens: give every event")
    return metrics_from_times(len(final.result.prompt_ids), [e.elapsed_s for e in token_events], final.elapsed_s)


def pooled_itl_percentiles(metrics: Iterable[RequestMetrics],
                           qs: Iterable[float] = DEFAULT_PERCENTILES) -> dict[float, float]:
    """Percentiles of the inter-token latencies of many requests, pooled into one list (Chapter 8).

    Serving benchmarks pool the gaps before taking percentiles: a single request's few dozen gaps
    say little about its 99th percentile. Requests of one token add no gap; if no request has a
    gap, :class:`BadStream` is raised.
    """
    pooled = [gap for m in metrics for gap in m.itl_s]
    if not pooled:
        raise BadStream("no inter-token latency to pool: every request had one output token, or none was given")
    return _percentiles(pooled, qs)
