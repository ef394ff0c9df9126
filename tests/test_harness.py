"""The benchmark harness of Chapter 7: intervals, paired runs, records and their comparison."""
from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from inferlab.bench.harness import (BadRecord, BenchRecord, Measurement, compare, context_differences,
                                    format_comparison, interval_coverage, measure, median_interval, paired,
                                    ratio_of_medians, summarise)
from inferlab.cli import main


def coverage_by_enumeration(n: int, k: int) -> float:
    """Exact coverage of [x_(k+1), x_(n-k)] by counting the 2^n sign patterns around the median."""
    hits = sum(k < sum(signs) < n - k for signs in itertools.product((0, 1), repeat=n))
    return hits / 2**n


@pytest.mark.parametrize("n", [6, 7, 10, 13, 20])
def test_median_interval_is_the_narrowest_with_its_coverage(n):
    values = list(range(n))
    low, high = median_interval(values)
    k = low
    assert high == n - 1 - k
    assert interval_coverage(n, k) == pytest.approx(coverage_by_enumeration(n, k))
    assert interval_coverage(n, k) >= 0.95 > interval_coverage(n, k + 1)


def test_median_interval_covers_the_true_median_as_often_as_promised():
    rng = random.Random(0)
    trials, n = 4000, 11
    covered = 0
    for _ in range(trials):  # exponential samples, skewed as timings are; true median ln 2
        low, high = median_interval([rng.expovariate(1.0) for _ in range(n)])
        covered += low <= math.log(2) <= high
    promised = interval_coverage(n, median_interval(list(range(n)))[0])
    assert abs(covered / trials - promised) < 4 * math.sqrt(promised * (1 - promised) / trials)


def test_too_few_samples_are_refused():
    with pytest.raises(ValueError, match="too few"):
        median_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    with pytest.raises(ValueError):
        summarise([])


def test_summary_percentiles_and_halfwidth():
    s = summarise([float(v) for v in range(1, 12)])
    assert (s.median, s.minimum, s.maximum) == (6.0, 1.0, 11.0)
    assert s.p10 == pytest.approx(2.0) and s.p90 == pytest.approx(10.0)
    assert s.relative_halfwidth == pytest.approx((s.high - s.low) / 2 / 6.0)


class FakeClock:
    """A clock that advances only when the timed function says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_measure_excludes_warmup_and_times_each_call():
    clock, calls = FakeClock(), []

    def work():
        calls.append(1)
        clock.now += len(calls) * 0.5  # each call takes longer than the last

    m = measure(work, name="w", repeats=3, warmup=2, clock=clock, work=4, unit="tokens")
    assert len(calls) == 5
    assert m.seconds == [1.5, 2.0, 2.5]  # the 3rd, 4th and 5th calls
    assert m.rate() == pytest.approx(4 / 2.0)
    with pytest.raises(ValueError):
        measure(work, repeats=0)


def test_paired_alternates_the_order_and_cancels_a_drift():
    clock, order = FakeClock(), []

    def make(name, cost):
        def fn():
            order.append(name)
            clock.now += cost * (1 + 0.1 * len(order))  # the machine slows down steadily
        return fn

    result = paired(make("A", 1.0), make("B", 1.0), pairs=4, warmup=1, clock=clock)
    assert "".join(order) == "AB" + "AB" + "BA" + "AB" + "BA"
    assert len(result.a.seconds) == len(result.b.seconds) == 4
    ratios = result.ratios  # equal costs: going first is cheaper under the drift, and alternates
    assert sum(r > 1 for r in ratios) == sum(r < 1 for r in ratios) == 2


def test_paired_verdict_and_sign_test():
    a = Measurement("A", [1.10, 1.12, 1.09, 1.11, 1.10, 1.13, 1.08, 1.12], warmup=0)
    b = Measurement("B", [1.00, 1.01, 0.99, 1.00, 1.02, 1.00, 0.99, 1.01], warmup=0)
    from inferlab.bench.harness import PairedComparison

    slower = PairedComparison(a, b)
    assert slower.verdict() == "A slower"
    assert slower.sign_test() == pytest.approx(2 * 0.5**8)
    same = PairedComparison(Measurement("A", [1, 2, 1, 2, 1, 2, 1, 2], 0), Measurement("B", [2, 1, 2, 1, 2, 1, 2, 1], 0))
    assert same.verdict() == "within noise" and same.sign_test() == 1.0


def test_abba_groups_separate_the_ratio_from_the_cost_of_going_first():
    from inferlab.bench.harness import PairedComparison

    clock, log = FakeClock(), []
    true_ratio, first_cost = 1.05, 1.1  # whichever variant runs first in a pair pays 10 %

    def make(name, cost):
        def fn():
            first = len(log) % 2 == 0  # the first call of its pair
            log.append(name)
            clock.now += cost * (first_cost if first else 1.0)
        return fn

    result = paired(make("A", true_ratio), make("B", 1.0), pairs=12, warmup=0, clock=clock)
    assert result.ratios[0] == pytest.approx(true_ratio * first_cost)  # AB
    assert result.ratios[1] == pytest.approx(true_ratio / first_cost)  # BA
    assert result.ratio().median == pytest.approx(true_ratio, rel=0.05)  # the single ratios' median lies between
    assert len(result.group_ratios) == 6
    assert result.group_ratios == pytest.approx([true_ratio] * 6)
    assert result.order_factors == pytest.approx([first_cost] * 6)
    assert result.grouped().median == pytest.approx(true_ratio)
    assert result.order_factor().low == pytest.approx(first_cost)
    odd = PairedComparison(Measurement("A", [1.0] * 7, 0), Measurement("B", [1.0] * 7, 0))
    assert len(odd.group_ratios) == 3  # the unpaired last pair is left out
    with pytest.raises(ValueError):
        odd.grouped()  # three groups are too few for an interval


def test_ratio_of_medians_interval():
    rng = random.Random(1)
    a = [1.0 + rng.random() * 0.02 for _ in range(15)]
    b = [2.0 + rng.random() * 0.04 for _ in range(15)]
    ratio, low, high = ratio_of_medians(a, b)
    assert low <= ratio <= high and high < 0.6
    assert ratio_of_medians(a, b) == (ratio, low, high)  # a fixed seed: reproducible
    with pytest.raises(ValueError):
        ratio_of_medians([1.0], b)


def record(scale: float, threads: int = 1, seed: int = 0) -> BenchRecord:
    rng = random.Random(seed)
    samples = lambda base: [base * scale * (1 + rng.random() * 0.01) for _ in range(9)]  # noqa: E731
    return BenchRecord("suite", {"decode_step@1t": Measurement("step", samples(0.05), 2, work=1, unit="tokens"),
                                 "read_bandwidth@1t": Measurement("read", samples(0.01), 2)},
                       provenance={"machine": {"processor": "cpu X"}, "threads": threads},
                       settings={"threads": [threads]})


def test_record_round_trip(tmp_path):
    original = record(1.0)
    loaded = BenchRecord.load(original.save(tmp_path / "r.json"))
    assert loaded.to_dict() == original.to_dict()


@pytest.mark.parametrize("content, message", [
    ("not json", "not JSON"),
    (json.dumps({"schema": "other"}), "not an inferlab benchmark record"),
    (json.dumps([1, 2]), "not an inferlab benchmark record"),
    (json.dumps({"schema": "inferlab-bench/1", "measurements": {}}), "no measurements"),
    (json.dumps({"schema": "inferlab-bench/1", "measurements": {"x": {"seconds": [1]}}}), "needs name"),
])
def test_bad_records_are_refused_clearly(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BadRecord, match=message):
        BenchRecord.load(path)
    with pytest.raises(BadRecord, match="no benchmark record"):
        BenchRecord.load(tmp_path / "missing.json")


def test_compare_finds_a_real_difference_and_calls_noise_noise():
    base, slower, same = record(1.0, seed=0), record(1.3, seed=1), record(1.0, seed=2)
    verdicts = {r.key: r.verdict for r in compare(slower, base)}
    assert verdicts == {"decode_step@1t": "slower", "read_bandwidth@1t": "slower"}
    assert {r.key: r.verdict for r in compare(base, slower)}["decode_step@1t"] == "faster"
    assert all(r.verdict == "within noise" for r in compare(same, base))
    rows = compare(slower, base)
    assert rows[0].ratio == pytest.approx(1.3, rel=0.02)
    assert "mine slower" in format_comparison(rows)


def test_compare_lists_what_else_differs_and_refuses_disjoint_records():
    differences = context_differences(record(1.0, threads=2), record(1.0, threads=1))
    assert differences == {"threads": (2, 1), "settings.threads": ([2], [1])}
    other = BenchRecord("x", {"other": Measurement("o", [1.0] * 6, 0)}, {})
    with pytest.raises(BadRecord, match="share no measurement"):
        compare(other, record(1.0))


def test_cli_compare_prints_a_table_and_refuses_bad_input(tmp_path, capsys):
    mine, book = record(1.3, seed=1).save(tmp_path / "mine.json"), record(1.0).save(tmp_path / "book.json")
    assert main(["bench", "compare", str(mine), str(book)]) == 0
    out = capsys.readouterr().out
    assert "decode_step@1t" in out and "mine slower" in out
    assert main(["bench", "compare", str(mine), str(book), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["verdict"] == "slower"
    assert main(["bench", "compare", str(tmp_path / "nope.json"), str(book)]) == 2
    assert "no benchmark record" in capsys.readouterr().err
    assert main(["bench", "run", "--out", str(tmp_path / "x.json"), "--repeats", "3"]) == 2
    assert "at least 6" in capsys.readouterr().err
    assert main(["bench", "run", "--out", str(tmp_path / "x.json"), "--threads", "0"]) == 2
    assert main(["bench"]) == 2


@pytest.mark.slow
def test_suite_on_the_bundled_model(tmp_path):
    from inferlab.bench.suite import run_suite

    result = run_suite("smollm2-135m", threads=(1,), repeats=6)
    assert set(result.measurements) == {"read_bandwidth@1t", "matmul_1024@1t", "decode_step@1t",
                                        *[k for k in result.measurements if k.startswith("prefill_")]}
    assert all(len(m.seconds) == 6 for m in result.measurements.values())
    # the settings the chapter's own record writes, so that comparing the two lists no spurious difference
    assert {"model", "threads", "repeats", "prompt", "matmul_size", "other_processes_cpus"} == set(result.settings)
    loaded = BenchRecord.load(result.save(tmp_path / "suite.json"))
    assert all(r.verdict == "within noise" and r.ratio == 1.0 for r in compare(loaded, result))


def test_compare_takes_the_ratio_per_unit_of_work_when_the_work_differs():
    """A machine with a larger cache reads more bytes: its longer time is not a slower read."""
    mine = BenchRecord("s", {"read": Measurement("r", [0.02 * (1 + i * 1e-3) for i in range(9)], 1, work=2e9, unit="bytes")}, {})
    book = BenchRecord("s", {"read": Measurement("r", [0.01 * (1 + i * 1e-3) for i in range(9)], 1, work=1e9, unit="bytes")}, {})
    (row,) = compare(mine, book)
    assert row.per == "bytes" and row.ratio == pytest.approx(1.0) and row.verdict == "within noise"
    assert "per bytes: the work differs" in format_comparison([row])
    odd = BenchRecord("s", {"read": Measurement("r", [0.01] * 9, 1, work=1e9, unit="FLOP")}, {})
    with pytest.raises(BadRecord, match="different work"):
        compare(mine, odd)


def test_context_differences_name_the_machine_and_the_gpu():
    a, b = record(1.0), record(1.0)
    a.provenance["machine"]["logical_cpus"], b.provenance["machine"]["logical_cpus"] = 2, 16
    a.provenance["versions"], b.provenance["versions"] = {"gpu": "H100"}, {"gpu": "T4"}
    differences = context_differences(a, b)
    assert differences["machine.logical_cpus"] == (2, 16) and differences["versions.gpu"] == ("H100", "T4")


def test_format_comparison_names_the_level_it_used():
    rows = compare(record(1.3, seed=1), record(1.0), level=0.9)
    assert "90% interval" in format_comparison(rows)


def test_interleaved_rotates_the_order_and_pairs_the_samples_by_round():
    from inferlab.bench.harness import interleaved

    order = []
    calls = {name: (lambda name=name: order.append(name), None, 2.0, "things") for name in ("a", "b", "c")}
    ticks = iter(range(1000))
    out = interleaved(calls, 3, clock=lambda: float(next(ticks)))
    assert order == ["a", "b", "c"] + ["a", "b", "c"] + ["b", "c", "a"] + ["c", "a", "b"]  # one warm-up each first
    assert all(len(m.seconds) == 3 and m.warmup == 1 and m.work == 2.0 for m in out.values())
    assert all(s == 1.0 for m in out.values() for s in m.seconds)  # each sample one call between two clock reads
    with pytest.raises(ValueError):
        interleaved(calls, 0)
