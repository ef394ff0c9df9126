"""Chapter 8's request metrics, on streams built by hand: no model needed."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inferlab.bench.metrics import (BadStream, RequestMetrics, metrics_from_times, pooled_itl_percentiles,
                                    request_metrics)
from inferlab.errors import InferlabError
from inferlab.records import GenerationResult, StreamEvent


def _result(prompt_ids: list[int], token_ids: list[int], stop_reason: str = "length",
            request_id: int = 0, index: int = 0) -> GenerationResult:
    return GenerationResult(prompt="p", prompt_ids=prompt_ids, token_ids=token_ids,
                            tokens=[f"<{t}>" for t in token_ids], text="".join(f"<{t}>" for t in token_ids),
                            stop_reason=stop_reason, timings=[], simulated_stages=[], params={}, provenance={},
                            request_id=request_id, index=index)


def _stream(times: list[float], prompt_tokens: int = 7, finished: float | None = None,
            stop_reason: str = "length") -> list[StreamEvent]:
    """Events as the engine emits them: one per output token, then the final one with the result."""
    token_ids = [100 + i for i in range(len(times))]
    events = [StreamEvent(0, 0, step, tid, f"<{tid}>", t) for step, (tid, t) in enumerate(zip(token_ids, times))]
    result = _result(list(range(prompt_tokens)), token_ids, stop_reason)
    end = times[-1] if finished is None else finished
    events.append(StreamEvent(0, 0, len(token_ids), None, "", end, done=True, result=result))
    return events


TIMES = [0.40, 0.46, 0.51, 0.58, 0.63, 0.90]  # a prefill, then five gaps, the last one a stall


def test_ttft_e2e_itl_and_tpot_follow_the_definitions():
    m = request_metrics(_stream(TIMES))
    assert (m.prompt_tokens, m.output_tokens) == (7, 6)
    assert m.ttft_s == 0.40 and m.e2e_s == 0.90 and m.finished_s == 0.90
    assert m.itl_s == pytest.approx([0.06, 0.05, 0.07, 0.05, 0.27])
    assert m.tpot_s == pytest.approx((0.90 - 0.40) / 5)
    assert m.tpot_s == pytest.approx(sum(m.itl_s) / len(m.itl_s))  # TPOT is the mean gap: the sum telescopes
    assert m.ttft_s + sum(m.itl_s) == pytest.approx(m.e2e_s)
    assert m.output_tokens_per_s() == pytest.approx(6 / 0.90)
    assert m.decode_tokens_per_s() == pytest.approx(1 / m.tpot_s)
    assert m.prefill_tokens_per_s() == pytest.approx(7 / 0.40)
    assert m.cost_per_million(0.10) == pytest.approx(0.10 / 3600 * 0.90 / 6 * 1e6)


def test_itl_percentiles_are_numpy_percentiles():
    m = request_metrics(_stream(TIMES))
    got = m.itl_percentiles((50, 90, 99))
    want = np.percentile([0.06, 0.05, 0.07, 0.05, 0.27], [50, 90, 99])
    assert list(got) == [50.0, 90.0, 99.0]
    assert list(got.values()) == pytest.approx(list(want))
    assert got[50.0] == pytest.approx(0.06) and got[99.0] < max(m.itl_s)  # p99 of five gaps interpolates
    with pytest.raises(ValueError):
        m.itl_percentiles((101,))


def test_pooled_percentiles_pool_the_gaps_of_every_request():
    a = request_metrics(_stream(TIMES))
    b = metrics_from_times(3, [0.1, 0.2, 0.3])
    one = metrics_from_times(3, [0.2])  # adds no gap
    pooled = pooled_itl_percentiles([a, b, one], (50, 99))
    want = np.percentile(list(a.itl_s) + list(b.itl_s), [50, 99])
    assert list(pooled.values()) == pytest.approx(list(want))
    with pytest.raises(BadStream):
        pooled_itl_percentiles([one])
    with pytest.raises(BadStream):
        pooled_itl_percentiles([])


def test_a_one_token_request_has_a_ttft_and_no_gap():
    m = request_metrics(_stream([0.25]))
    assert m.output_tokens == 1 and m.ttft_s == m.e2e_s == 0.25 and m.itl_s == ()
    assert math.isnan(m.tpot_s) and math.isnan(m.decode_tokens_per_s())
    assert m.output_tokens_per_s() == pytest.approx(4.0)
    with pytest.raises(BadStream, match="one output token"):
        m.itl_percentiles()


def test_an_end_of_sequence_stop_finishes_after_the_last_token():
    # the step that produced the end-of-sequence token emits no output token: E is the last token's time
    events = _stream([0.3, 0.35, 0.41], finished=0.47, stop_reason="eos")
    m = request_metrics(events)
    assert m.e2e_s == 0.41 and m.finished_s == 0.47 and m.output_tokens == 3
    assert m.tpot_s == pytest.approx(0.055)


def test_bad_streams_are_refused_with_a_clear_error():
    with pytest.raises(BadStream, match="no events"):
        request_metrics([])
    unfinished = _stream(TIMES)[:-1]
    with pytest.raises(BadStream, match="not finished"):
        request_metrics(unfinished)
    missing = _stream(TIMES)
    del missing[2]
    with pytest.raises(BadStream, match="do not match"):
        request_metrics(missing)
    mixed = _stream(TIMES)
    mixed[1] = StreamEvent(0, 1, 1, mixed[1].token_id, "", mixed[1].elapsed_s)  # another sample's event
    with pytest.raises(BadStream, match="one sample"):
        request_metrics(mixed)
    backwards = _stream([0.4, 0.3])
    with pytest.raises(BadStream, match="never decrease"):
        request_metrics(backwards)
    no_token = [StreamEvent(0, 0, 0, None, "", 0.2, done=True, result=_result([1, 2], [], "eos"))]
    with pytest.raises(BadStream, match="no output token"):
        request_metrics(no_token)
    # the error is the lab's and a ValueError, as the lab's other input errors are
    assert issubclass(BadStream, InferlabError) and issubclass(BadStream, ValueError)


def test_token_times_are_checked():
    with pytest.raises(BadStream):
        metrics_from_times(3, [])
    with pytest.raises(BadStream):
        metrics_from_times(3, [-0.1, 0.2])
    with pytest.raises(BadStream):
        metrics_from_times(3, [0.1, float("nan")])
    with pytest.raises(BadStream):
        metrics_from_times(-1, [0.1])
    with pytest.raises(BadStream, match="before its last token"):
        metrics_from_times(3, [0.1, 0.2], finished_s=0.15)
    with pytest.raises(ValueError):
        metrics_from_times(3, [0.1]).cost_per_million(-1.0)
    assert isinstance(metrics_from_times(3, (0.1, 0.2)), RequestMetrics)
