"""Results store: durable appends, resume, atomic writes, summaries, Markdown, progress."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import warnings

import pytest

from composer.bench.interleave import interleaved_schedule, remaining_jobs
from composer.bench.nvml import ClockSample
from composer.bench.progress import SweepProgress
from composer.bench.records import RunRecord
from composer.bench.results import (
    ResultStore,
    ResultsWarning,
    atomic_write,
    atomic_write_text,
    encode_line,
    write_results_markdown,
)
from composer.bench.stats import summarize

PATHS = ["BASE", "FAST", "SAME"]


def rec(path: str, r: int, stage_us: float, order: int = 7, **kw) -> RunRecord:
    n = 69
    return RunRecord(path=path, order=order, grid=(32, 32, 32), round_index=r,
                     stage_wall_s=stage_us * 1e-6, device_sum_ms=0.8 * stage_us * 1e-3 * n,
                     device_intervals=kw.pop("intervals", n), end_to_end_s=3.03 * stage_us * 1e-6,
                     timed_stages=n, warmup_steps=2, nstep=25, **kw)


def sweep_records() -> list[RunRecord]:
    out = []
    for r in range(6):
        out += [rec("BASE", r, 1000 + r), rec("FAST", r, 900 + r), rec("SAME", r, 1002 + r)]
    return out


# -- runs.jsonl ----------------------------------------------------------------------------
def test_append_roundtrip_with_clocks(tmp_path):
    store = ResultStore(tmp_path / "sweep")
    clk = [ClockSample(0.0, 1980, 2619, 400.5, 700.0, 55, 0x4, ("sw_power_cap",))]
    r = rec("BASE", 0, 1000.0, clocks=clk, validation_error=2e-14, options={"k": 1},
            started_utc="2026-01-01T00:00:00+00:00")
    store.append(r)
    failed = rec("FAST", 0, 900.0, error="rc=139")
    failed.stage_wall_s = failed.end_to_end_s = float("nan")
    store.append(failed)
    got = store.records()
    assert got[0] == r and got[1].error == "rc=139" and math.isnan(got[1].stage_wall_s)
    assert "NaN" not in store.runs_path.read_text()  # strict JSON for jq & co.
    assert store.records(include_failed=False) == [r]
    assert store.completed_keys() == {("BASE", 7, 0), ("FAST", 7, 0)}
    assert store.completed_keys(include_failed=False) == {("BASE", 7, 0)}
    for line in store.runs_path.read_text().splitlines():
        assert set(json.loads(line)) == {"sha256", "record"}  # each line is valid JSON


def test_resume_skips_done_jobs_and_tolerates_truncated_last_line(tmp_path):
    store = ResultStore(tmp_path)
    jobs = interleaved_schedule(PATHS, [7], 2)
    for j in jobs[:4]:
        store.append(rec(j.path, j.round_index, 1000.0))
    # crash in the middle of writing job 5: a partial line without newline
    partial = encode_line(rec(jobs[4].path, jobs[4].round_index, 1000.0))[:57]
    with open(store.runs_path, "ab") as fh:
        fh.write(partial)
    with pytest.warns(ResultsWarning, match="truncated last line"):
        done = ResultStore(tmp_path).completed_keys()
    assert done == {j.key for j in jobs[:4]}
    rest = remaining_jobs(jobs, done)
    assert rest == jobs[4:]
    # resuming appends cleanly after the partial line, which stays isolated and skipped
    for j in rest:
        store.append(rec(j.path, j.round_index, 1000.0))
    with pytest.warns(ResultsWarning, match="damaged line 5"):
        assert ResultStore(tmp_path).completed_keys() == {j.key for j in jobs}


def test_checksum_detects_altered_line(tmp_path):
    store = ResultStore(tmp_path)
    store.append(rec("BASE", 0, 1000.0))
    store.append(rec("BASE", 1, 1001.0))
    lines = store.runs_path.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"stage_wall_s":0.001', '"stage_wall_s":0.002')
    store.runs_path.write_text("".join(lines))
    with pytest.warns(ResultsWarning, match="checksum"):
        assert [r.round_index for r in store.records()] == [1]


def test_clean_file_reads_without_warnings(tmp_path):
    store = ResultStore(tmp_path)
    store.append(rec("BASE", 0, 1000.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(store.records()) == 1
    assert ResultStore(tmp_path / "empty").records() == []


# -- atomic writes -------------------------------------------------------------------------
def test_atomic_write_failure_mid_write_leaves_old_file(tmp_path):
    target = tmp_path / "summary.json"
    atomic_write_text(target, '{"old": true}\n')

    def half_then_fail(fh):
        fh.write('{"new": ')
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, half_then_fail)
    assert target.read_text() == '{"old": true}\n'
    assert sorted(os.listdir(tmp_path)) == ["summary.json"]  # no temp file left


def test_atomic_write_failure_at_rename(tmp_path, monkeypatch):
    target = tmp_path / "summary.csv"
    atomic_write_text(target, "a\n")

    def boom(*a, **k):
        raise OSError("rename failed")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "b\n")
    assert target.read_text() == "a\n" and os.listdir(tmp_path) == ["summary.csv"]


def test_no_partial_file_visible_during_write(tmp_path):
    target = tmp_path / "provenance.json"
    seen = []

    def writer(fh):
        fh.write("x" * 1000)
        seen.append(target.exists())
        fh.write("y")

    atomic_write(target, writer)
    assert seen == [False] and target.read_text() == "x" * 1000 + "y"


# -- summaries and provenance --------------------------------------------------------------
def test_write_summary_json_and_csv(tmp_path):
    store = ResultStore(tmp_path)
    recs = sweep_records() + [rec("BASE", 6, 5.0, error="rc=1")]
    summaries = summarize(recs)
    store.write_summary(summaries, baseline_path="BASE")
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["baseline"] == "BASE" and len(doc["summaries"]) == 3
    fast = next(r for r in doc["ratios"] if r["path"] == "FAST")
    assert fast["metrics"]["stage_wall_s"]["resolved"] is True
    assert fast["metrics"]["stage_wall_s"]["criterion"] == "range"
    back = store.load_summaries()
    assert [s.key for s in back] == [s.key for s in summaries]
    assert back[0]["stage_wall_s"] == summaries[0]["stage_wall_s"]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "summary.csv").read_text())))
    base = next(r for r in rows if r["path"] == "BASE")
    assert base["n_rounds"] == "6" and base["n_failed"] == "1" and base["grid"] == "32x32x32"
    assert float(base["stage_wall_s_median"]) == pytest.approx(1002.5e-6)


def test_provenance_sessions_warn_on_changed_commit(tmp_path):
    store = ResultStore(tmp_path)
    p1 = {"hostname": "n1", "git": {"commit": "abc", "dirty": False}, "nvml": None}
    store.write_provenance(p1)
    store.write_provenance(dict(p1))  # same build/host: silent resume
    with pytest.warns(ResultsWarning, match="commit"):
        store.write_provenance({**p1, "git": {"commit": "def", "dirty": False}})
    assert [s["git"]["commit"] for s in store.provenance_sessions()] == ["abc", "abc", "def"]


# -- markdown ------------------------------------------------------------------------------
def test_markdown_table():
    recs = sweep_records() + [rec("FAST", 6, 900.0, intervals=70)]
    md = write_results_markdown(summarize(recs), "BASE", peak_flops=40.1e12, bandwidth=7.9e12,
                                title="H200 sweep")
    lines = md.splitlines()
    assert lines[0] == "## H200 sweep"
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert header[:4] == ["path", "p", "grid", "stage µs (median ± MAD)"]
    assert "stage ratio vs BASE" in header and "overlap" in header
    assert set(lines[3]) <= {"|", "-"}
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")]
            for r in lines[4:7]}
    assert rows["BASE"][3] == "1002.5 ± 1.5" and rows["BASE"][5] == "1000.0–1005.0"
    assert rows["BASE"][4] == "802.0 ± 1.2"  # device per call = 0.8 x stage
    assert rows["BASE"][8] == "1 (baseline)"
    assert rows["FAST"][8] == f"{902.0 / 1002.5:.3f}" and rows["FAST"][9] == "no"
    assert rows["FAST"][10] == "yes (range)" and rows["FAST"][6] == "7"
    assert rows["FAST"][4].endswith("†")
    assert rows["SAME"][9] == "yes" and rows["SAME"][10] == "no (range)"
    assert "%" in rows["BASE"][7] and "(HBM)" in rows["BASE"][7]
    assert all(len(r.split("|")) == len(lines[2].split("|")) for r in lines[2:7])
    assert "Section S13.3" in md


def test_markdown_without_roof_or_baseline():
    md = write_results_markdown(summarize(sweep_records()))
    row = md.splitlines()[2]
    assert "—" in row  # roof and ratio columns empty


# -- progress ------------------------------------------------------------------------------
def test_progress_plain_lines_and_eta():
    t = [0.0]
    out = io.StringIO()
    jobs = interleaved_schedule(PATHS, [7], 2)
    with SweepProgress(len(jobs), done=2, stream=out, clock=lambda: t[0]) as prog:
        assert prog.plain  # StringIO is not a terminal
        for j in jobs[2:4]:
            prog.start(j)
            t[0] += 10.0
            prog.finish(j, ok=j is not jobs[3], note="rc=1")
        assert prog.eta == pytest.approx(20.0)  # 2 left at 10 s each
    text = out.getvalue().splitlines()
    assert text[0].startswith("[3/6] ") and "ETA ?" in text[0]
    assert "ETA 0:00:30" in text[1]  # 3 left after one 10 s job
    assert text[2].strip().startswith("FAILED") and "rc=1" in text[2]
    assert text[-1] == "sweep: 4/6 done in 0:00:20"


def test_progress_rich_mode_runs():
    out = io.StringIO()
    jobs = interleaved_schedule(PATHS, [7], 1)
    with SweepProgress(len(jobs), stream=out, plain=False) as prog:
        for j in jobs:
            prog.start(j)
            prog.finish(j, ok=j is not jobs[0])
    assert prog.done == 3 and "FAILED" in out.getvalue()
