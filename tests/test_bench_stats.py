"""Records accounting, statistics, claim tests and interleaved schedules on synthetic timings."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from composer.bench.interleave import (
    interleaved_schedule,
    remaining_jobs,
    round_orders,
    williams_rows,
)
from composer.bench.records import RunRecord
from composer.bench.stats import (
    MetricStats,
    claim_test,
    fastest_paths,
    ranges_overlap,
    ratio_table,
    ratio_width,
    roof_fraction,
    roof_fractions,
    summarize,
    tendency_work,
)

GRID = (4, 4, 4)


def rec(path: str, r: int, stage_us: float, *, order: int = 7, dev_us: float | None = None,
        n: int = 69, intervals: int | None = None, error: str | None = None,
        options: dict | None = None) -> RunRecord:
    dev_us = stage_us * 0.8 if dev_us is None else dev_us
    k = n if intervals is None else intervals
    return RunRecord(path=path, order=order, grid=GRID, round_index=r,
                     stage_wall_s=stage_us * 1e-6, device_sum_ms=dev_us * 1e-3 * k,
                     device_intervals=k, end_to_end_s=3 * stage_us * 1.01e-6,
                     timed_stages=n, warmup_steps=2, nstep=2 + n // 3,
                     options=options or {}, error=error)


# -- records -------------------------------------------------------------------------------
def test_device_per_call_divides_by_intervals_covered():
    r = rec("A", 0, 100.0, dev_us=80.0)
    assert r.device_per_call_s == pytest.approx(80e-6)
    assert not r.intervals_mismatch and r.accounting_issues() == []


def test_interval_mismatch_is_flagged_and_divisor_is_count_covered():
    # An executable that keeps the pending warm-up interval covers N + 1 calls.
    r = rec("A", 0, 100.0, dev_us=80.0, n=69, intervals=70)
    assert r.intervals_mismatch
    assert r.device_per_call_s == pytest.approx(80e-6)  # sum / 70, not sum / 69
    assert "N+1" in r.accounting_issues()[0]
    s = summarize([r, rec("A", 1, 100.0)])[0]
    assert s.n_interval_mismatch == 1 and s.device_intervals == (69, 70)


def test_timed_stage_count_checked_against_steps():
    r = rec("A", 0, 100.0)
    r.nstep += 1
    assert any("nstep - warmup" in i for i in r.accounting_issues())


def test_record_roundtrip_and_grid_validation():
    r = rec("A", 3, 123.0, options={"shape": "16x8x4"})
    assert RunRecord.from_dict(r.to_dict()) == r
    r.kernel_origin = "nvrtc 13.5 (build .cache/build_n135)"
    assert RunRecord.from_dict(r.to_dict()) == r
    with pytest.raises(ValueError):
        RunRecord("A", 7, (1, 2), 0, 1.0, 1.0, 1, 1.0, 1, 0, 1)


# -- stats ---------------------------------------------------------------------------------
def test_median_mad_min_max():
    st = MetricStats.of(enumerate([5.0, 1.0, 3.0, 2.0, 100.0]))
    assert (st.median, st.min, st.max, st.n) == (3.0, 1.0, 100.0, 5)
    assert st.mad == 2.0  # |dev| = 2, 2, 0, 1, 97 -> median 2
    even = MetricStats.of(enumerate([1.0, 2.0, 3.0, 4.0]))
    assert even.median == 2.5 and even.mad == 1.0
    assert st.width == pytest.approx(99.0)
    assert MetricStats.of([(0, math.nan)]).n == 0


def test_summarize_groups_and_excludes_failed_runs():
    recs = [rec("A", r, v) for r, v in enumerate([100, 102, 101, 99, 103, 100])]
    recs += [rec("A", 6, 1.0, error="rc=1")]
    recs += [rec("A", 0, 50, options={"shape": "16x8x4"})]
    recs += [rec("A", 0, 400, order=15)]
    out = summarize(recs)
    assert sorted((s.order, s.options_key, s.n_rounds) for s in out) == [
        (7, '{"shape":"16x8x4"}', 1), (7, "{}", 6), (15, "{}", 1)]
    assert [s.order for s in out] == [7, 7, 15]  # sorted by order first
    a = next(s for s in out if s.order == 7 and s.options_key == "{}")
    assert a.n_failed == 1
    assert a["stage_wall_s"].median == pytest.approx(100.5e-6)
    assert a["stage_wall_s"].min == pytest.approx(99e-6)
    assert a["stage_wall_s"].max == pytest.approx(103e-6)
    assert a["device_per_call_s"].median == pytest.approx(0.8 * 100.5e-6)
    assert a["stage_wall_s"].rounds == (0, 1, 2, 3, 4, 5)


def _pair(a_vals, b_vals):
    recs = [rec("A", r, v) for r, v in enumerate(a_vals)]
    recs += [rec("B", r, v) for r, v in enumerate(b_vals)]
    s = {x.path: x for x in summarize(recs)}
    return s["A"], s["B"]


def test_overlap_both_ways():
    a, b = _pair([100, 101, 102, 101], [103, 104, 105, 104])
    assert not ranges_overlap(a, b) and not ranges_overlap(b, a)
    c = claim_test(a, b)
    assert c.resolved and c.criterion == "range" and c.ratio < 1
    a, b = _pair([100, 101, 104, 101], [103, 104, 105, 104])
    assert ranges_overlap(a, b) and ranges_overlap(b, a)
    assert not claim_test(a, b).resolved
    a, b = _pair([100, 103], [103, 104])  # touching endpoints count as overlap
    assert ranges_overlap(a, b)


def test_three_rounds_use_one_percent_criterion_and_other_thresholds():
    a, b = _pair([100, 100.1, 100.2], [100.5, 100.6, 100.7])  # disjoint but 0.5 %
    c = claim_test(a, b)
    assert c.criterion == "1%" and not c.resolved
    a, b = _pair([100, 100.1, 100.2], [102, 102.1, 102.2])
    assert claim_test(a, b).resolved
    assert not claim_test(a, b, comparison="cross_compiler").resolved  # 2 % <= 3.2 %
    assert claim_test(a, b, comparison="cross_campaign").resolved


def test_ratio_width_is_spread_of_per_round_ratio():
    a, b = _pair([100, 110, 105], [100, 100, 100])
    assert ratio_width(a, b) == pytest.approx((1.10 - 1.00) / 1.00)
    a1, _ = _pair([100], [100])
    assert ratio_width(a1, b) is None


def test_ratio_table_side_by_side():
    recs = [rec("BASE", r, 100 + r) for r in range(6)]
    recs += [rec("FAST", r, 90 + r, dev_us=50) for r in range(6)]
    recs += [rec("SAME", r, 100.5 + r) for r in range(6)]
    recs += [rec("ORPHAN", r, 10, order=31) for r in range(6)]
    rows = {r.path: r for r in ratio_table(summarize(recs), "BASE")}
    assert set(rows) == {"FAST", "SAME"}
    fast = rows["FAST"]
    assert fast["stage_wall_s"].ratio == pytest.approx(92.5 / 102.5)
    assert fast["device_per_call_s"].ratio == pytest.approx(50 / (0.8 * 102.5))
    assert not fast["stage_wall_s"].overlap and fast["stage_wall_s"].claim.resolved
    assert rows["SAME"]["stage_wall_s"].overlap and not rows["SAME"]["stage_wall_s"].claim.resolved
    assert fast["stage_wall_s"].width_resolved is True  # per-round ratio spread is ~1.2 %


def test_fastest_paths():
    recs = [rec("A", r, 100 + r) for r in range(6)] + [rec("B", r, 200 + r) for r in range(6)]
    recs += [rec("C", r, 100 + r, order=15) for r in range(6)]
    recs += [rec("D", r, 101 + r, order=15) for r in range(6)]
    f = {x.order: x for x in fastest_paths(summarize(recs))}
    assert f[7].path == "A" and f[7].resolved and f[7].runner_up == "B"
    assert f[15].path == "C" and not f[15].resolved


def test_roof_fraction():
    # 1 TFLOP in 1 s on a 2 TFLOP/s machine -> 0.5; 3 TB at 4 TB/s -> 0.75 binds.
    assert roof_fractions(1.0, 1e12, 3e12, 2e12, 4e12) == pytest.approx((0.5, 0.75))
    assert roof_fraction(1.0, 1e12, 3e12, 2e12, 4e12) == pytest.approx(0.75)
    assert roof_fraction(2.0, 1e12, 3e12, 2e12, 4e12) == pytest.approx(0.375)
    flop, nbytes = tendency_work(7, (2, 1, 1))
    assert flop == 6 * 8**4 * 2 and nbytes == 8 * 2 * (8 * 8**3 + 24 * 8**2)


# -- interleaving --------------------------------------------------------------------------
PATHS = ["FUSED", "FUSED_TC", "GEMM", "GEMM_FUSED"]


def test_schedule_covers_every_job_once():
    jobs = interleaved_schedule(PATHS, [7, 15, 575], rounds={7: 6, 15: 6, 575: 3})
    keys = [j.key for j in jobs]
    assert len(keys) == len(set(keys)) == 4 * (6 + 6 + 3)
    assert set(keys) == {(p, o, r) for o, n in ((7, 6), (15, 6), (575, 3))
                         for r in range(n) for p in PATHS}
    # per order, per round, every path once; rounds are contiguous blocks
    for i in range(0, len(jobs), 4):
        block = jobs[i:i + 4]
        assert sorted(j.path for j in block) == sorted(PATHS)
        assert len({(j.order, j.round_index) for j in block}) == 1
        assert [j.position for j in block] == [0, 1, 2, 3]


def test_rotation_balances_positions():
    orders = round_orders(PATHS, 4, "rotate")
    assert orders[0] == PATHS and orders[1] == PATHS[1:] + PATHS[:1]
    for p in PATHS:
        assert sorted(o.index(p) for o in orders) == [0, 1, 2, 3]
    assert round_orders(PATHS, 3, "fixed") == [PATHS] * 3


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_williams_balances_positions_and_predecessors(n):
    rows = williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    for row in rows:
        assert sorted(row) == list(range(n))
    pairs = Counter((row[i], row[i + 1]) for row in rows for i in range(n - 1))
    assert len(set(pairs.values())) == 1 and len(pairs) == n * (n - 1)
    positions = Counter((t, row.index(t)) for row in rows for t in range(n))
    assert len(set(positions.values())) == 1


def test_seeded_schedule_is_reproducible_and_differs_from_unseeded():
    a = interleaved_schedule(PATHS, [7, 15], 4, seed=1, arrangement="shuffle")
    assert a == interleaved_schedule(PATHS, [7, 15], 4, seed=1, arrangement="shuffle")
    assert {j.key for j in a} == {j.key for j in interleaved_schedule(PATHS, [7, 15], 4)}
    seeded = [interleaved_schedule(PATHS, [7], 4, seed=s) for s in range(5)]
    assert any(s != interleaved_schedule(PATHS, [7], 4) for s in seeded)
    with pytest.raises(ValueError):
        round_orders(["A", "A"], 1)


def test_remaining_jobs_skips_completed():
    jobs = interleaved_schedule(PATHS, [7], rounds=lambda p: 2)
    done = {j.key for j in jobs[:5]}
    rest = remaining_jobs(jobs, done)
    assert rest == jobs[5:]
    assert remaining_jobs(jobs, {j.key for j in jobs}) == []
    assert rec(jobs[0].path, jobs[0].round_index, 1.0).key == jobs[0].key
