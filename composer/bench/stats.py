"""Robust statistics over interleaved rounds and the paper's claim tests.

Why these statistics: the paper reports the median and the median absolute deviation
(MAD, unscaled) over interleaved rounds, and decides a ranking from the min-max range
of the rounds, never from a mean or a standard error (Sections 4.2 and 4.5).

Claim thresholds, as stated in Section 4.5 (and S2/S10 for the width):

* paired comparison (same job, node and executable): an ordering is resolved only when
  the repeated-run (min-max) ranges of the two paths do not overlap;
* where only three runs estimate the range (the paper's p >= 575), the 1 % same-build
  cross-campaign criterion applies instead: |ratio - 1| > 1 %;
* across nodes or campaigns with the same compiler and executable, differences below
  1 % are not interpreted;
* across compiler versions, differences up to 3.2 % are unresolved (Table S8 worst case);
* width of a ratio = (max - min) / min of the per-round ratio over the rounds of one
  job (numerator and denominator from the same round); the ratio is "resolved" in the
  width sense when its difference from 1 exceeds that width.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from composer.bench.nvml import ClockSummary, summarize_samples
from composer.bench.records import RunRecord

#: The three timing quantities of Section 4.2; stage wall time is the primary one.
METRICS: tuple[str, ...] = ("stage_wall_s", "device_per_call_s", "end_to_end_s")
PRIMARY_METRIC = "stage_wall_s"

CROSS_CAMPAIGN_THRESHOLD = 0.01   # Sec. 4.5: differences below 1 % not interpreted
CROSS_COMPILER_THRESHOLD = 0.032  # Sec. 4.5: up to 3.2 % unresolved across compilers
#: Sec. 4.5: with only three runs the range is not trusted; fewer rounds than this
#: switch a paired comparison to the 1 % criterion.
MIN_ROUNDS_FOR_RANGE = 4

Comparison = Literal["paired", "cross_campaign", "cross_compiler"]
GroupKey = tuple[str, int, tuple[int, int, int], str]  # (path, order, grid, options_key)


@dataclass(frozen=True)
class MetricStats:
    """Median, MAD, min and max of one metric over the successful rounds of one path."""

    median: float
    mad: float
    min: float
    max: float
    n: int
    rounds: tuple[int, ...] = ()
    values: tuple[float, ...] = ()

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, float]]) -> MetricStats:
        """From (round_index, value) pairs; non-finite values are dropped."""
        kept = [(r, float(v)) for r, v in pairs if v is not None and math.isfinite(v)]
        if not kept:
            nan = math.nan
            return cls(nan, nan, nan, nan, 0)
        vals = [v for _, v in kept]
        med = statistics.median(vals)
        mad = statistics.median(abs(v - med) for v in vals)
        return cls(med, mad, min(vals), max(vals), len(vals),
                   tuple(r for r, _ in kept), tuple(vals))

    @property
    def width(self) -> float:
        """The paper's run-to-run width, (max - min) / min."""
        if self.n == 0 or self.min <= 0:
            return math.nan
        return (self.max - self.min) / self.min

    @property
    def rel_mad(self) -> float:
        return self.mad / self.median if self.n and self.median else math.nan

    def by_round(self) -> dict[int, float]:
        return dict(zip(self.rounds, self.values, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "mad": self.mad, "min": self.min, "max": self.max,
                "n": self.n, "width": self.width, "rounds": list(self.rounds),
                "values": list(self.values)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MetricStats:
        def f(x: Any) -> float:  # summary.json stores NaN as null
            return math.nan if x is None else float(x)

        return cls(f(d["median"]), f(d["mad"]), f(d["min"]), f(d["max"]), int(d["n"]),
                   tuple(d.get("rounds", ())), tuple(f(v) for v in d.get("values", ())))


@dataclass(frozen=True)
class PathSummary:
    """All rounds of one (path, order, grid, options) cell, reduced."""

    path: str
    order: int
    grid: tuple[int, int, int]
    options_key: str
    n_rounds: int
    n_failed: int
    stats: dict[str, MetricStats]
    n_interval_mismatch: int = 0
    device_intervals: tuple[int, ...] = ()
    timed_stages: tuple[int, ...] = ()
    validation_error_max: float | None = None
    clocks: ClockSummary = field(default_factory=lambda: ClockSummary(available=False))

    @property
    def key(self) -> GroupKey:
        return (self.path, self.order, self.grid, self.options_key)

    def __getitem__(self, metric: str) -> MetricStats:
        return self.stats[metric]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "order": self.order, "grid": list(self.grid),
            "options_key": self.options_key, "n_rounds": self.n_rounds,
            "n_failed": self.n_failed, "n_interval_mismatch": self.n_interval_mismatch,
            "device_intervals": list(self.device_intervals),
            "timed_stages": list(self.timed_stages),
            "validation_error_max": self.validation_error_max,
            "stats": {m: s.to_dict() for m, s in self.stats.items()},
            "clocks": self.clocks.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PathSummary:
        c = dict(d.get("clocks") or {"available": False})
        c["reasons_seen"] = tuple(c.get("reasons_seen", ()))
        return cls(
            path=d["path"], order=int(d["order"]), grid=tuple(d["grid"]),  # type: ignore[arg-type]
            options_key=d["options_key"], n_rounds=int(d["n_rounds"]),
            n_failed=int(d["n_failed"]),
            stats={m: MetricStats.from_dict(s) for m, s in d["stats"].items()},
            n_interval_mismatch=int(d.get("n_interval_mismatch", 0)),
            device_intervals=tuple(d.get("device_intervals", ())),
            timed_stages=tuple(d.get("timed_stages", ())),
            validation_error_max=d.get("validation_error_max"),
            clocks=ClockSummary(**c),
        )


def summarize(records: Iterable[RunRecord]) -> list[PathSummary]:
    """Group runs by (path, order, grid, options) and reduce each metric over rounds.

    Failed runs (``error`` set) are counted in ``n_failed`` and excluded from the
    statistics; runs whose device sum does not cover N intervals are counted in
    ``n_interval_mismatch`` (their per-call time still divides by the count covered).
    """
    groups: dict[GroupKey, list[RunRecord]] = {}
    for r in records:
        groups.setdefault((r.path, r.order, r.grid, r.options_key), []).append(r)
    out: list[PathSummary] = []
    for key in sorted(groups, key=lambda k: (k[1], k[2], k[0], k[3])):
        runs = sorted(groups[key], key=lambda r: r.round_index)
        good = [r for r in runs if r.ok]
        verr = [r.validation_error for r in good if r.validation_error is not None]
        out.append(PathSummary(
            path=key[0], order=key[1], grid=key[2], options_key=key[3],
            n_rounds=len(good), n_failed=len(runs) - len(good),
            stats={m: MetricStats.of((r.round_index, getattr(r, m)) for r in good)
                   for m in METRICS},
            n_interval_mismatch=sum(r.intervals_mismatch for r in good),
            device_intervals=tuple(sorted({r.device_intervals for r in good})),
            timed_stages=tuple(sorted({r.timed_stages for r in good})),
            validation_error_max=max(verr) if verr else None,
            clocks=summarize_samples([c for r in good for c in r.clocks],
                                     available=any(r.clocks for r in good),
                                     reason="" if any(r.clocks for r in good)
                                     else "no NVML samples recorded"),
        ))
    return out


def ranges_overlap(a: PathSummary, b: PathSummary, metric: str = PRIMARY_METRIC) -> bool:
    """Whether the closed min-max ranges of two paths overlap (touching counts).

    A side without successful rounds counts as overlapping: nothing can be claimed.
    """
    sa, sb = a.stats[metric], b.stats[metric]
    if sa.n == 0 or sb.n == 0:
        return True
    return sa.min <= sb.max and sb.min <= sa.max


def median_ratio(a: PathSummary, b: PathSummary, metric: str = PRIMARY_METRIC) -> float:
    """median(a) / median(b); below 1 means a is faster."""
    sa, sb = a.stats[metric], b.stats[metric]
    if sa.n == 0 or sb.n == 0 or sb.median == 0:
        return math.nan
    return sa.median / sb.median


def ratio_width(a: PathSummary, b: PathSummary, metric: str = PRIMARY_METRIC) -> float | None:
    """Width of the per-round ratio a/b: (max - min)/min over rounds both paths share.

    None when fewer than two rounds pair up (the paper leaves such a cell without width).
    """
    ra, rb = a.stats[metric].by_round(), b.stats[metric].by_round()
    per_round = [ra[k] / rb[k] for k in sorted(ra.keys() & rb.keys()) if rb[k] > 0]
    if len(per_round) < 2:
        return None
    lo = min(per_round)
    return (max(per_round) - lo) / lo if lo > 0 else None


@dataclass(frozen=True)
class Claim:
    """Outcome of the Section 4.5 claim test for one ratio."""

    ratio: float
    difference: float  # |ratio - 1|
    resolved: bool
    criterion: str  # which rule decided: "range", "1%", "3.2%"


def claim_test(a: PathSummary, b: PathSummary, metric: str = PRIMARY_METRIC,
               comparison: Comparison = "paired",
               min_rounds_for_range: int = MIN_ROUNDS_FOR_RANGE) -> Claim:
    """Decide whether the ordering of a and b is resolved under Section 4.5."""
    ratio = median_ratio(a, b, metric)
    diff = abs(ratio - 1.0) if math.isfinite(ratio) else math.nan
    if not math.isfinite(diff):
        return Claim(ratio, diff, False, "no data")
    if comparison == "cross_compiler":
        return Claim(ratio, diff, diff > CROSS_COMPILER_THRESHOLD, "3.2%")
    if comparison == "cross_campaign":
        return Claim(ratio, diff, diff > CROSS_CAMPAIGN_THRESHOLD, "1%")
    if comparison != "paired":
        raise ValueError(f"unknown comparison {comparison!r}")
    if min(a.stats[metric].n, b.stats[metric].n) < min_rounds_for_range:
        return Claim(ratio, diff, diff > CROSS_CAMPAIGN_THRESHOLD, "1%")
    return Claim(ratio, diff, not ranges_overlap(a, b, metric), "range")


@dataclass(frozen=True)
class MetricRatio:
    ratio: float
    overlap: bool
    width: float | None
    width_resolved: bool | None  # |ratio - 1| > width (S10); None without width
    claim: Claim


@dataclass(frozen=True)
class RatioRow:
    """One path against the baseline at one (order, grid), every metric side by side."""

    path: str
    baseline: str
    order: int
    grid: tuple[int, int, int]
    options_key: str
    metrics: dict[str, MetricRatio]

    def __getitem__(self, metric: str) -> MetricRatio:
        return self.metrics[metric]


def find_baseline(cands: Sequence[PathSummary], s: PathSummary) -> PathSummary | None:
    """The baseline among ``cands`` (same order and grid) to compare ``s`` with."""
    if len(cands) == 1:
        return cands[0]
    same = [c for c in cands if c.options_key == s.options_key]
    return same[0] if len(same) == 1 else None


def compare(a: PathSummary, b: PathSummary, metrics: Sequence[str] = METRICS,
            comparison: Comparison = "paired") -> dict[str, MetricRatio]:
    """Ratio, overlap, width and claim of a against b for each metric."""
    out: dict[str, MetricRatio] = {}
    for m in metrics:
        ratio = median_ratio(a, b, m)
        width = ratio_width(a, b, m)
        out[m] = MetricRatio(
            ratio=ratio, overlap=ranges_overlap(a, b, m), width=width,
            width_resolved=(abs(ratio - 1.0) > width) if width is not None else None,
            claim=claim_test(a, b, m, comparison))
    return out


def ratio_table(summaries: Sequence[PathSummary], baseline_path: str,
                metrics: Sequence[str] = METRICS,
                comparison: Comparison = "paired") -> list[RatioRow]:
    """Median ratio of every path to ``baseline_path`` at the same (order, grid).

    When the baseline ran with several options at one (order, grid), the row uses the
    baseline with the same options key, and is omitted if that is ambiguous.
    """
    base: dict[tuple[int, tuple[int, int, int]], list[PathSummary]] = {}
    for s in summaries:
        if s.path == baseline_path:
            base.setdefault((s.order, s.grid), []).append(s)
    rows: list[RatioRow] = []
    for s in summaries:
        if s.path == baseline_path:
            continue
        b = find_baseline(base.get((s.order, s.grid), []), s)
        if b is None:
            continue
        rows.append(RatioRow(s.path, baseline_path, s.order, s.grid, s.options_key,
                             compare(s, b, metrics, comparison)))
    return rows


@dataclass(frozen=True)
class Fastest:
    """Fastest path of one (order, grid) cell and whether the ranking is resolved."""

    order: int
    grid: tuple[int, int, int]
    path: str
    resolved: bool  # resolved against every other path of the cell
    runner_up: str | None
    margin: float  # median(runner_up)/median(fastest) - 1


def fastest_paths(summaries: Sequence[PathSummary], metric: str = PRIMARY_METRIC,
                  comparison: Comparison = "paired") -> list[Fastest]:
    """Fastest path per (order, grid) under the claim test (Figure 2's markers)."""
    cells: dict[tuple[int, tuple[int, int, int]], list[PathSummary]] = {}
    for s in summaries:
        if s.stats[metric].n:
            cells.setdefault((s.order, s.grid), []).append(s)
    out: list[Fastest] = []
    for (order, grid), members in sorted(cells.items()):
        ranked = sorted(members, key=lambda s: s.stats[metric].median)
        best, rest = ranked[0], ranked[1:]
        resolved = all(claim_test(best, o, metric, comparison).resolved for o in rest)
        margin = median_ratio(rest[0], best, metric) - 1.0 if rest else math.nan
        out.append(Fastest(order, grid, best.path, resolved and bool(rest),
                           rest[0].path if rest else None, margin))
    return out


# -- roofline ----------------------------------------------------------------------------
def roof_fractions(time_s: float, flop: float, bytes: float,  # noqa: A002 (brief's name)
                   peak_flops: float, bandwidth: float) -> tuple[float, float]:
    """(arithmetic, bandwidth) roof fractions: the time the roof allows over the time taken."""
    if time_s <= 0 or not math.isfinite(time_s):
        return (math.nan, math.nan)
    return (flop / peak_flops / time_s, bytes / bandwidth / time_s)


def roof_fraction(time_s: float, flop: float, bytes: float,  # noqa: A002
                  peak_flops: float, bandwidth: float) -> float:
    """Fraction of the binding roof: max(flop/peak, bytes/bw) / time."""
    return max(roof_fractions(time_s, flop, bytes, peak_flops, bandwidth))


def tendency_work(order: int, grid: Sequence[int]) -> tuple[float, float]:
    """(FLOP, unique bytes) of one tendency call, per operator.md "Work and traffic".

    FLOP: the conventional 3 * 2 * Nq^4 * Ne of the contractions; bytes: every input read
    once and dqdt written once, 8 * Ne * (8 Nq^3 + 4 * 6 Nq^2). Index maps are excluded.
    """
    nq = order + 1
    ne = math.prod(int(g) for g in grid)
    return (6.0 * nq**4 * ne, 8.0 * ne * (8 * nq**3 + 24 * nq**2))


__all__ = [
    "METRICS", "PRIMARY_METRIC", "CROSS_CAMPAIGN_THRESHOLD", "CROSS_COMPILER_THRESHOLD",
    "MIN_ROUNDS_FOR_RANGE", "Comparison", "MetricStats", "PathSummary", "summarize",
    "ranges_overlap", "median_ratio", "ratio_width", "Claim", "claim_test", "MetricRatio",
    "RatioRow", "compare", "find_baseline", "ratio_table", "Fastest", "fastest_paths",
    "roof_fractions", "roof_fraction", "tendency_work",
]
