import pytest

from inferlab.records import GenerationResult, StageTiming
from inferlab.timing import StageClock, format_summary, run_repeated, summarise_timings
from inferlab.toy import ToyGenerator


def test_stage_clock_records_elapsed_time_with_steps():
    ticks = iter([1.0, 1.5, 2.0, 4.0])
    clock = StageClock("cpu", clock=lambda: next(ticks))
    with clock.stage("tokenize"):
        pass
    with clock.stage("forward_pass", step=0):
        pass
    assert clock.timings == [StageTiming("tokenize", 0.5), StageTiming("forward_pass", 2.0, 0)]


def test_stage_clock_records_nothing_when_the_stage_fails():
    clock = StageClock("cpu")
    with pytest.raises(RuntimeError):
        with clock.stage("encode"):
            raise RuntimeError("boom")
    assert clock.timings == []


def test_run_repeated_sends_the_same_request_k_times():
    results = run_repeated(ToyGenerator(), "Hello", 4, 5)
    assert len(results) == 5 and len({r.text for r in results}) == 1
    with pytest.raises(ValueError):
        run_repeated(ToyGenerator(), "Hello", 4, 0)


def fake(values: dict[str, list[float]]) -> GenerationResult:
    timings = [StageTiming(stage, s) for stage, seconds in values.items() for s in seconds]
    return GenerationResult("p", [], [], [], "", timings, [], {})


def test_summary_totals_medians_and_shares():
    rows = summarise_timings([fake({"encode": [1.0], "forward_pass": [2.0, 4.0]}),
                              fake({"encode": [3.0], "forward_pass": [10.0]})])
    by = {r.stage: r for r in rows}
    assert [r.stage for r in rows] == ["encode", "forward_pass"]
    assert by["forward_pass"].count == 3 and by["forward_pass"].median_s == 4.0
    assert by["encode"].total_s == 4.0 and by["encode"].median_s == 2.0
    assert by["forward_pass"].share == pytest.approx(16 / 20)
    assert sum(r.share for r in rows) == pytest.approx(1.0)
    assert "forward_pass" in format_summary(rows) and "80.00%" in format_summary(rows)
    with pytest.raises(ValueError):
        summarise_timings([])
