"""The benchmark harness: timings that can be trusted, summarised and compared (Chapter 7).

A measurement here is a list of wall-clock samples of one callable, taken after warm-up calls,
with the device synchronised before the clock starts and before it stops (a CUDA launch returns
before its kernel has run). Samples are summarised by order statistics, never by a mean alone:
timings are skewed by whatever else the machine does, and a median with a distribution-free
interval says how far one run can be trusted.

Two variants that are nearly equal are compared *paired*: they run in turns, A then B, then B then
A, so that a machine that drifts during the run slows both alike, and the comparison rests on the
ratio within each pair. Records are JSON files with the provenance of the run, so that a reader's
numbers can be set beside the book's (:func:`compare`, ``python -m inferlab bench compare``).

The statistics come from SciPy: :func:`scipy.stats.binom` for the ranks of the interval around a
median, :func:`scipy.stats.binomtest` for the sign test, :func:`scipy.stats.bootstrap` for the
ratio of two medians from independent runs.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inferlab.errors import InferlabError
from inferlab.timing import intra_op_threads, synchronize

#: The schema of a benchmark record; :meth:`BenchRecord.load` refuses any other.
SCHEMA = "inferlab-bench/1"


class BadRecord(InferlabError, ValueError):
    """A benchmark record that cannot be read or compared (Chapter 7)."""


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median, from order statistics (Chapter 7).

    The number of samples below the true median is Binomial(n, 1/2) whatever the distribution of
    the samples (if they are independent and identically distributed), so the k-th smallest and
    the k-th largest sample bracket the median with probability at least ``level`` for the k that
    :func:`scipy.stats.binom` gives. Needs at least 6 samples for 95 %.
    """
    from scipy.stats import binom

    n = len(values)
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    # ordered[k] lies above the median with probability binom.cdf(k, n, 1/2): take the largest k
    # that leaves at most (1 - level) / 2 on each side
    k = int(binom.ppf((1 - level) / 2, n, 0.5))
    while k >= 0 and binom.cdf(k, n, 0.5) > (1 - level) / 2:
        k -= 1
    if k < 0:
        raise ValueError(f"{n} samples are too few for a {level:.0%} interval around the median")
    ordered = sorted(values)
    return ordered[k], ordered[n - 1 - k]


def interval_coverage(n: int, k: int) -> float:
    """Probability that the (k+1)-th smallest and the (k+1)-th largest of n samples bracket the median (Chapter 7)."""
    from scipy.stats import binom

    return float(1 - 2 * binom.cdf(k, n, 0.5))


@dataclass(frozen=True)
class Summary:
    """Order statistics of a list of samples: median with its interval, percentiles, range (Chapter 7)."""

    n: int
    median: float
    low: float  #: lower end of the distribution-free interval around the median
    high: float  #: upper end of that interval
    level: float
    p10: float
    p90: float
    minimum: float
    maximum: float

    @property
    def relative_halfwidth(self) -> float:
        """Half the interval's width as a fraction of the median: the run's own noise (Chapter 7)."""
        return (self.high - self.low) / 2 / self.median


def summarise(values: Sequence[float], level: float = 0.95) -> Summary:
    """Median, interval, 10th/90th percentiles and range of the samples (Chapter 7)."""
    import numpy as np

    if not values:
        raise ValueError("no samples to summarise")
    low, high = median_interval(values, level)
    p10, p90 = (float(p) for p in np.percentile(values, [10, 90]))
    return Summary(len(values), statistics.median(values), low, high, level, p10, p90, min(values), max(values))


@dataclass
class Measurement:
    """Samples of one timed callable, and how they were taken (Chapter 7).

    ``work`` is what one call does in ``unit`` (for example 16 tokens), so that a rate can be
    reported; ``seconds`` holds one sample per repetition, warm-up calls excluded.
    """

    name: str
    seconds: list[float]
    warmup: int
    device: str = "cpu"
    threads: int | None = None
    work: float | None = None
    unit: str | None = None

    def summary(self, level: float = 0.95) -> Summary:
        """The samples' :class:`Summary` (Chapter 7)."""
        return summarise(self.seconds, level)

    def rate(self) -> float:
        """Median work per second: ``work`` over the median sample (Chapter 7)."""
        if self.work is None:
            raise ValueError(f"{self.name}: no work per call was recorded, so there is no rate")
        return self.work / statistics.median(self.seconds)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the samples and settings (Chapter 7)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Measurement":
        """Rebuild a measurement from :meth:`to_dict`'s output, refusing malformed data (Chapter 7)."""
        try:
            seconds = [float(s) for s in data["seconds"]]
            return cls(name=str(data["name"]), seconds=seconds, warmup=int(data["warmup"]),
                       device=str(data.get("device", "cpu")), threads=data.get("threads"),
                       work=data.get("work"), unit=data.get("unit"))
        except (KeyError, TypeError, ValueError) as error:
            raise BadRecord(f"a measurement needs name, seconds and warmup: {error}") from error


def measure(fn: Callable[[], Any], *, name: str = "call", repeats: int = 10, warmup: int = 1,
            device: str = "cpu", threads: int | None = None, work: float | None = None,
            unit: str | None = None, clock: Callable[[], float] = time.perf_counter) -> Measurement:
    """Call ``fn`` ``warmup`` times untimed, then time ``repeats`` calls one by one (Chapter 7).

    The device is synchronised before each clock read, so a GPU's queued work is inside the sample
    it belongs to; ``threads`` sets PyTorch's intra-op threads for the whole measurement.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    samples = []
    with intra_op_threads(threads):
        for _ in range(warmup):
            fn()
        for _ in range(repeats):
            synchronize(device)
            start = clock()
            fn()
            synchronize(device)
            samples.append(clock() - start)
    return Measurement(name, samples, warmup, device, threads, work, unit)


@dataclass
class PairedComparison:
    """Two variants timed in turns, and the ratio of their times within each pair (Chapter 7)."""

    a: Measurement
    b: Measurement
    level: float = 0.95

    @property
    def ratios(self) -> list[float]:
        """Time of A over time of B in each pair: above 1 where A was slower (Chapter 7)."""
        return [x / y for x, y in zip(self.a.seconds, self.b.seconds)]

    def ratio(self) -> Summary:
        """The median ratio with its distribution-free interval (Chapter 7)."""
        return summarise(self.ratios, self.level)

    def _groups(self) -> list[tuple[float, float]]:
        """The (AB, BA) ratios of each ABBA group: pairs 0 and 1, 2 and 3, ... (an odd last pair is left out)."""
        ratios = self.ratios
        return [(ratios[i], ratios[i + 1]) for i in range(0, len(ratios) - 1, 2)]

    @property
    def group_ratios(self) -> list[float]:
        """Each ABBA group's ratio, the geometric mean of its AB and BA ratios (Chapter 7).

        If whichever variant runs first in a pair pays a factor f, an AB pair's ratio is R f and a BA
        pair's is R / f, with R the true ratio: their geometric mean is R, whatever f is.
        """
        return [math.sqrt(ab * ba) for ab, ba in self._groups()]

    @property
    def order_factors(self) -> list[float]:
        """Each ABBA group's estimate of the cost of going first, sqrt(AB ratio / BA ratio) (Chapter 7).

        Above 1 where the variant that ran first in a pair was the slower for it; 1 where order did not matter.
        """
        return [math.sqrt(ab / ba) for ab, ba in self._groups()]

    def grouped(self) -> Summary:
        """The median of the ABBA groups' ratios with its distribution-free interval (Chapter 7)."""
        return summarise(self.group_ratios, self.level)

    def order_factor(self) -> Summary:
        """The median cost of going first over the ABBA groups, with its interval (Chapter 7)."""
        return summarise(self.order_factors, self.level)

    def sign_test(self) -> float:
        """Two-sided p-value of the sign test: is A slower in as many pairs as B? (Chapter 7)."""
        from scipy.stats import binomtest

        ratios = [r for r in self.ratios if r != 1.0]
        slower = sum(r > 1.0 for r in ratios)
        return float(binomtest(slower, len(ratios), 0.5).pvalue) if ratios else 1.0

    def verdict(self) -> str:
        """"A slower", "A faster" or "within noise": where the interval of the ratio lies (Chapter 7)."""
        summary = self.ratio()
        return "A slower" if summary.low > 1 else "A faster" if summary.high < 1 else "within noise"


def paired(fn_a: Callable[[], Any], fn_b: Callable[[], Any], *, pairs: int = 10, warmup: int = 1,
           names: tuple[str, str] = ("A", "B"), device: str = "cpu", threads: int | None = None,
           work: float | None = None, unit: str | None = None, level: float = 0.95,
           clock: Callable[[], float] = time.perf_counter) -> PairedComparison:
    """Time A and B in ``pairs`` pairs, alternating which goes first (ABBA...), after warm-up (Chapter 7).

    Alternating the order cancels a steady drift of the machine. An advantage of going first or
    second (a cache still warm from the other variant, for instance) cancels only when an AB
    ratio and the next BA ratio are combined; the median of single ratios can still carry it.
    """
    if pairs < 1:
        raise ValueError(f"need at least one pair, got {pairs}")
    samples: dict[int, list[float]] = {0: [], 1: []}
    functions = (fn_a, fn_b)
    with intra_op_threads(threads):
        for _ in range(warmup):
            fn_a()
            fn_b()
        for index in range(pairs):
            order = (0, 1) if index % 2 == 0 else (1, 0)
            for which in order:
                synchronize(device)
                start = clock()
                functions[which]()
                synchronize(device)
                samples[which].append(clock() - start)
    make = lambda which: Measurement(names[which], samples[which], warmup, device, threads, work, unit)  # noqa: E731
    return PairedComparison(make(0), make(1), level)


#: One call of :func:`interleaved`: the callable, its thread count, its work per call and the work's unit.
Call = tuple[Callable[[], Any], "int | None", "float | None", "str | None"]


def interleaved(calls: Mapping[str, Call], rounds: int, *, device: str = "cpu",
                clock: Callable[[], float] = time.perf_counter) -> dict[str, Measurement]:
    """Time each call once per round, the order rotated each round, each at its own thread count (Chapter 8).

    One untimed call of each comes first. Sample r of every call is taken in round r, so the samples
    pair by round: a slow spell of a shared machine falls on every call of that round alike (Chapter 8
    interleaves prompt lengths with the machine's two ceilings; Chapter 10 gives calls their own thread counts).
    """
    if rounds < 1 or not calls:
        raise ValueError(f"need at least one round and one call, got {rounds} rounds and {len(calls)} calls")
    names = list(calls)
    for name in names:
        fn, threads, _, _ = calls[name]
        with intra_op_threads(threads):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, threads, _, _ = calls[name]
            with intra_op_threads(threads):
                synchronize(device)
                start = clock()
                fn()
                synchronize(device)
                samples[name].append(clock() - start)
    return {name: Measurement(name, samples[name], 1, device, calls[name][1], calls[name][2], calls[name][3])
            for name in names}


def ratio_of_medians(a: Sequence[float], b: Sequence[float], level: float = 0.95, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """median(a) / median(b) and a bootstrap interval, for two independent sets of samples (Chapter 7).

    Each set is resampled on its own (:func:`scipy.stats.bootstrap` with ``paired=False``,
    percentile method, a fixed seed so the interval is reproducible). Use it when the samples
    were not taken in pairs: two machines, two days.
    """
    import numpy as np
    from scipy.stats import bootstrap

    if len(a) < 2 or len(b) < 2:
        raise ValueError("a ratio of medians needs at least two samples on each side")

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(x, axis=axis) / np.median(y, axis=axis)

    result = bootstrap((np.asarray(a), np.asarray(b)), statistic, n_resamples=resamples, confidence_level=level,
                       method="percentile", paired=False, vectorized=True, rng=np.random.default_rng(seed))
    return (statistics.median(a) / statistics.median(b), float(result.confidence_interval.low),
            float(result.confidence_interval.high))


@dataclass
class BenchRecord:
    """A comparable record: named measurements, the settings and the provenance of the run (Chapter 7)."""

    name: str
    measurements: dict[str, Measurement]
    provenance: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, with its schema (Chapter 7)."""
        return {"schema": SCHEMA, "name": self.name, "created": self.created, "settings": self.settings,
                "provenance": self.provenance,
                "measurements": {key: m.to_dict() for key, m in self.measurements.items()}}

    def save(self, path: str | Path) -> Path:
        """Write the record as indented JSON (Chapter 7)."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    @classmethod
    def from_dict(cls, data: Any, source: str = "record") -> "BenchRecord":
        """Rebuild a record, refusing another schema or missing fields with a clear error (Chapter 7)."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise BadRecord(f"{source} is not an inferlab benchmark record (schema {SCHEMA!r}, found {found!r})")
        measurements = data.get("measurements")
        if not isinstance(measurements, dict) or not measurements:
            raise BadRecord(f"{source} holds no measurements")
        return cls(name=str(data.get("name", "")), provenance=dict(data.get("provenance") or {}),
                   settings=dict(data.get("settings") or {}), created=str(data.get("created", "")),
                   measurements={k: Measurement.from_dict(m) for k, m in measurements.items()})

    @classmethod
    def load(cls, path: str | Path) -> "BenchRecord":
        """Read a record written by :meth:`save` (Chapter 7)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as error:
            raise BadRecord(f"no benchmark record at {path}") from error
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise BadRecord(f"{path} is not JSON: {error}") from error
        return cls.from_dict(data, str(path))


@dataclass(frozen=True)
class Comparison:
    """One measurement of two records set side by side (Chapter 7)."""

    key: str
    mine_s: float  #: median seconds in the first record
    theirs_s: float  #: median seconds in the second record
    ratio: float  #: mine / theirs (per unit of work where the work differs): above 1 where the first is slower
    low: float
    high: float
    verdict: str  #: "slower", "faster" or "within noise"
    level: float = 0.95
    #: The unit the ratio is taken per when the two records did different amounts of work, else None.
    per: str | None = None


#: Provenance fields whose difference explains a difference of speed; :func:`compare` lists them. The
#: machine's fields are those of :func:`inferlab.provenance.machine_facts` (processor identity, CPUs,
#: matmul features, memory); ``sha256`` identifies weights that have no hub revision.
CONTEXT_FIELDS = ("processor", "cpu_family", "cpu_model", "stepping", "physical_cores", "logical_cpus",
                  "usable_cpus", "matmul_features", "torch_cpu_capability", "memory_bytes", "platform",
                  "gpu", "cuda", "device", "threads", "torch", "transformers", "tokenizers", "python", "model",
                  "revision", "sha256", "parameters", "tokenizer", "dtype")


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def context_differences(mine: BenchRecord, theirs: BenchRecord) -> dict[str, tuple[Any, Any]]:
    """Settings and provenance fields that differ between two records: what else changed (Chapter 7)."""
    a = {**_flatten(mine.provenance), **_flatten(mine.settings, "settings.")}
    b = {**_flatten(theirs.provenance), **_flatten(theirs.settings, "settings.")}
    relevant = lambda key: key.startswith("settings.") or key.rsplit(".", 1)[-1] in CONTEXT_FIELDS  # noqa: E731
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if relevant(k) and a.get(k) != b.get(k)}


def compare(mine: BenchRecord, theirs: BenchRecord, level: float = 0.95) -> list[Comparison]:
    """Every measurement the two records share: ratio of medians, its interval, and a verdict (Chapter 7).

    "within noise" means the bootstrap interval of the ratio contains 1: the two runs do not
    differ by more than their own spread shows. It does not mean the machines are equally fast.
    Where the two measurements did different amounts of work (a larger read on a machine with a
    larger cache, say), the ratio is taken per unit of work, and the row says so.
    """
    shared = [key for key in mine.measurements if key in theirs.measurements]
    if not shared:
        raise BadRecord(f"the records share no measurement: {sorted(mine.measurements)} vs {sorted(theirs.measurements)}")
    rows = []
    for key in shared:
        a, b = mine.measurements[key], theirs.measurements[key]
        if a.work != b.work and (a.work is None or b.work is None or a.unit != b.unit):
            raise BadRecord(f"{key}: the records did different work ({a.work} {a.unit} vs {b.work} {b.unit}) "
                            "and cannot be compared per unit")
        per = a.unit or "unit" if a.work != b.work else None
        x = [t / a.work for t in a.seconds] if per else a.seconds  # type: ignore[operator]
        y = [t / b.work for t in b.seconds] if per else b.seconds  # type: ignore[operator]
        ratio, low, high = ratio_of_medians(x, y, level)
        verdict = "slower" if low > 1 else "faster" if high < 1 else "within noise"
        rows.append(Comparison(key, statistics.median(a.seconds), statistics.median(b.seconds), ratio, low, high,
                               verdict, level, per))
    return rows


def format_comparison(rows: Sequence[Comparison], differences: Mapping[str, tuple[Any, Any]] | None = None,
                      names: tuple[str, str] = ("mine", "book")) -> str:
    """A plain-text table of :func:`compare`'s rows and the context that differs (Chapter 7)."""
    width = max(len("measurement"), *(len(r.key) for r in rows))
    level = f"{rows[0].level:.0%} interval" if rows else "interval"
    lines = [f"{'measurement':<{width}}  {names[0] + ' (ms)':>12}  {names[1] + ' (ms)':>12}  {'ratio':>6}  "
             f"{level:>15}  verdict"]
    for r in rows:
        verdict = "within noise" if r.verdict == "within noise" else f"{names[0]} {r.verdict}"
        if r.per:
            verdict += f" (per {r.per}: the work differs)"
        lines.append(f"{r.key:<{width}}  {r.mine_s * 1e3:12.3f}  {r.theirs_s * 1e3:12.3f}  {r.ratio:6.2f}  "
                     f"{f'{r.low:.2f} to {r.high:.2f}':>15}  {verdict}")
    if differences:
        lines.append("what else differs:")
        lines += [f"  {key}: {a!r} vs {b!r}" for key, (a, b) in differences.items()]
    return "\n".join(lines)
