"""The report's carrier-sweep section (composer.report.sections.carrier) on the shipped sweeps, and
the shipped GEMM_FUSED schedules against the winners those sweeps name."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = [ROOT / "docs" / "data" / "h200_s7"]  # its carrier sweeps and, for the report to load, its bench runs


@pytest.fixture(scope="module")
def tables():
    from composer.report import load
    from composer.report.sections.carrier import carrier_table, newest_sweeps, settings_table

    data = load([str(p) for p in SWEEPS], (), "device_per_call_s", "h200")
    sweeps = newest_sweeps(data)
    return sweeps, settings_table(sweeps), carrier_table(sweeps)


def test_every_order_swept_and_its_winner_is_its_fastest_validated_setting(tables):
    sweeps, settings, rows = tables
    assert sorted(sweeps) == [7, 15, 31, 63, 127, 255, 511, 575, 767]
    for order in sweeps:
        mine = [r for r in rows.rows if r["p"] == order]
        winner = [r for r in mine if r["winner"]]
        assert len(winner) == 1 and winner[0]["us"] == min(r["us"] for r in mine)
        assert all(r["error"] is not None and r["error"] <= 1e-12 for r in mine)
        assert all(r["vs_winner"] >= 1.0 for r in mine)


def test_settings_table_cells_are_the_sweeps_medians(tables):
    from composer.report.sections.carrier import ALWAYS_SHOWN, SETTINGS

    sweeps, settings, _ = tables
    for row in settings.rows:
        medians = sweeps[row["p"]].document["medians_s"]
        for key, label in SETTINGS:
            seconds = medians.get(f"{label},tile=shipped")
            if key not in row:  # a flux source no sweep has timed has no column (the staged flux until one)
                assert key.rsplit("_", 1)[1] not in ALWAYS_SHOWN and seconds is None, key
                continue
            assert row[key] == (None if seconds is None else 1e6 * seconds)


def test_shipped_schedules_run_the_sweep_winners(tables):
    """The schedules' [paths.GEMM_FUSED] carrier, fold and flux are the winners of the sweeps they cite
    (p = 511 then moved its carrier to the 16x8x8 tile, measured separately: results.md section 8b)."""
    from composer.paths.gemm_fused import settings_for

    sweeps, settings, _ = tables
    for row in settings.rows:
        s = settings_for(row["p"])
        assert row["winner"] == f"carrier={s.carrier},fold={'on' if s.fold else 'off'},flux={s.flux}", row["p"]


def test_a_results_directory_carries_its_own_exclusions(tmp_path):
    """docs/data/report-exclude.txt: every report and crossover map of the directory leaves the listed
    runs out, with their reason in comments, as if each were given with --exclude."""
    from composer.report.sources import EXCLUDE_FILE, directory_excludes, discover, effective_excludes

    shipped = directory_excludes(ROOT / "docs" / "data")
    assert "h200_s6/call5/ab" in shipped and "h200_s7/*/ab" in shipped
    inputs = discover([str(ROOT / "docs" / "data")])
    included = [str(s.directory).replace("\\", "/") for s in inputs.bench]
    # the launch-cost A/Bs of sessions 6-7 and the A sides of session 36's A B B A (the tables replaced) stay out;
    # session 36's B sides (the tables that ship) are in
    assert not [d for d in included if "/h200_s6/" in d and "/ab" in d or "/h200_s7/" in d and "/ab" in d]
    assert not [d for d in included if "/h200_s36/call1/ab/A" in d or "/h200_s36/call1/ab15/A" in d]
    assert [d for d in included if "/h200_s36/call1/ab/B" in d]
    assert any("h200_s7/call5/ab" in s for s in inputs.skipped)
    (tmp_path / EXCLUDE_FILE).write_text("# reason\nold/*   # the other tree\n\n")
    assert directory_excludes(tmp_path) == ("old/*",)
    assert effective_excludes([str(tmp_path)], ("x",)) == ("x", "old/*")
