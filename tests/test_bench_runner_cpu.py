"""``composer bench``'s sweep runner end to end on the CPU: resume, atomic results, summary.

The GPU side is replaced through run_sweep's seams: a fake device (memory and name only), a
fake measurement with deterministic timings (it can fail one job or interrupt the sweep), a
fake field check, and the shipped schedules shrunk to one element. Everything between them
is the real code: interleaving, skipping done jobs, the durable store, the statistics, the
summary files and the Markdown table. Expected summaries are recomputed here from the fake
timings and operator.md's work counts, not through composer.bench.stats.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
from pathlib import Path

import pytest

from composer.arch.machines import get_machine
from composer.bench import runner
from composer.bench.records import RunRecord
from composer.bench.results import decode_line
from composer.config.schedules import Schedule, load_schedule
from composer.errors import ComposerError

PATHS = ("GEMM", "FUSED", "FUSED_TC")
ORDERS = (7, 15)
ROUNDS = 3
ALL_JOBS = {(path, order, r) for path in PATHS for order in ORDERS for r in range(ROUNDS)}
#: Step-loop time per stage of one element at p = 7, in ns; scaled by Nq^3 for other orders.
STAGE_NS_AT_P7 = {"GEMM": 40.0, "FUSED": 30.0, "FUSED_TC": 25.0}
ROUND_JITTER = (0.0, 0.02, -0.01)
DEVICE_SHARE = 0.8  # device time per call over stage time
END_TO_END_PER_STAGE = 3.1
VALIDATION_ERROR = {"GEMM": 1e-15, "FUSED": 2e-14, "FUSED_TC": 3e-14}
FAILING_JOB = ("FUSED", 7, 1)  # a run that raises: recorded as failed, the sweep goes on
INTERRUPT_AFTER = 7  # measurements before the first invocation is interrupted (Ctrl-C)


class FakeDevice:
    """What the runner asks of a device outside the measurement: its memory and its name."""

    name = "Fake H200"
    total_memory = 141 * 2**30

    def free_memory(self) -> int:
        return self.total_memory

    def __repr__(self) -> str:
        return f"FakeDevice({self.name!r})"


def fake_stage_s(path: str, order: int, round_index: int) -> float:
    scale = ((order + 1) / 8) ** 3
    return STAGE_NS_AT_P7[path] * scale * (1.0 + ROUND_JITTER[round_index] * (PATHS.index(path) + 1)) * 1e-9


class FakeMeasure:
    """run_once's stand-in: records every call; raises at FAILING_JOB and after ``interrupt_after`` calls."""

    def __init__(self, interrupt_after: int | None = None) -> None:
        self.interrupt_after = interrupt_after
        self.calls: list[tuple[str, int, int]] = []

    def __call__(self, schedule: Schedule, path: str, fields, device, round_index: int, graph: bool,
                 sampler, validation_error: float | None, options: dict) -> RunRecord:
        assert isinstance(device, FakeDevice) and fields["q"].shape[0] == 1  # one element
        if self.interrupt_after is not None and len(self.calls) == self.interrupt_after:
            raise KeyboardInterrupt
        key = (path, schedule.order, round_index)
        self.calls.append(key)
        if key == FAILING_JOB:
            raise RuntimeError("fake launch failure")
        cfg = schedule.benchmark
        stage = fake_stage_s(path, schedule.order, round_index)
        return RunRecord(
            path=path, order=schedule.order, grid=cfg.grid, round_index=round_index, stage_wall_s=stage,
            device_sum_ms=DEVICE_SHARE * stage * 1e3 * cfg.timed_stages, device_intervals=cfg.timed_stages,
            end_to_end_s=END_TO_END_PER_STAGE * stage, timed_stages=cfg.timed_stages,
            warmup_steps=cfg.warmup_steps, nstep=cfg.nstep, validation_error=validation_error,
            options={"graph": graph, **options})


class FakeValidate:
    def __init__(self, errors: dict[str, float]) -> None:
        self.errors = errors
        self.calls: list[tuple[str, int]] = []

    def __call__(self, path: str, order: int, grid, device, reference, options: dict) -> float:
        fields, ref = reference
        assert fields["q"].shape[0] == math.prod(grid) and ref.shape == fields["q"].shape
        self.calls.append((path, order))
        return self.errors[path]


def one_element_schedule(order: int) -> Schedule:
    """The shipped schedule with the benchmark and validation grids shrunk to one element."""
    shipped = load_schedule(order)
    return dataclasses.replace(
        shipped, benchmark=dataclasses.replace(shipped.benchmark, grid=(1, 1, 1)),
        validation=dataclasses.replace(shipped.validation, grid=(1, 1, 1)))


def sweep(out_dir: Path, measure: FakeMeasure, validate: FakeValidate | None = None,
          orders: tuple[int, ...] = ORDERS) -> str:
    plan = runner.BenchPlan(paths=list(PATHS), orders=list(orders), rounds=ROUNDS, out_dir=out_dir)
    return runner.run_sweep(plan, get_machine("h200"), FakeDevice(), measure=measure,
                            validate=validate or FakeValidate(VALIDATION_ERROR), schedule_for=one_element_schedule)


def stored_lines(out_dir: Path) -> list[str]:
    return (out_dir / "runs.jsonl").read_text().splitlines()


def assert_no_temp_files(out_dir: Path) -> None:
    assert [name for name in os.listdir(out_dir) if name.startswith(".")] == []


def expected_work(order: int) -> tuple[float, float]:
    """operator.md "Work and traffic counts" for one element: (FLOP, unique bytes)."""
    nq = order + 1
    return 6.0 * nq**4, 8.0 * (8 * nq**3 + 4 * 6 * nq**2)


def good_rounds(path: str, order: int) -> list[int]:
    return [r for r in range(ROUNDS) if (path, order, r) != FAILING_JOB]


def markdown_rows(table: str) -> dict[tuple[str, int], list[str]]:
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] in PATHS:
            rows[(cells[0], int(cells[1]))] = cells
    return rows


def test_interrupted_sweep_resumes_without_loss_or_repeats_and_summarises(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    first = FakeMeasure(interrupt_after=INTERRUPT_AFTER)
    with pytest.raises(KeyboardInterrupt):
        sweep(out, first)
    # Interrupted: exactly the finished runs are stored, each a complete checksummed line, and
    # no summary (nor a temp file of one) exists yet.
    lines = stored_lines(out)
    assert len(lines) == INTERRUPT_AFTER == len(first.calls)
    assert [decode_line(line).key for line in lines] == first.calls
    assert FAILING_JOB in first.calls and decode_line(lines[first.calls.index(FAILING_JOB)]).error == (
        "RuntimeError: fake launch failure")
    assert sorted(os.listdir(out)) == ["provenance.json", "runs.jsonl"]

    second = FakeMeasure()
    table = sweep(out, second)
    # Resumed: every job ran exactly once over the two invocations; the failed one is not retried.
    assert set(first.calls).isdisjoint(second.calls) and len(second.calls) == len(set(second.calls))
    assert set(first.calls) | set(second.calls) == ALL_JOBS
    records = [decode_line(line) for line in stored_lines(out)]
    assert sorted(r.key for r in records) == sorted(ALL_JOBS)
    assert [r.key for r in records if not r.ok] == [FAILING_JOB]
    assert len(json.loads((out / "provenance.json").read_text())["sessions"]) == 2
    assert_no_temp_files(out)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["baseline"] == "GEMM"
    cells = {(s["path"], s["order"]): s for s in summary["summaries"]}
    assert set(cells) == {(p, o) for p in PATHS for o in ORDERS}
    for (path, order), cell in cells.items():
        stages = [fake_stage_s(path, order, r) for r in good_rounds(path, order)]
        assert cell["n_rounds"] == len(stages) and cell["n_failed"] == ROUNDS - len(stages)
        assert cell["stats"]["stage_wall_s"]["median"] == pytest.approx(statistics.median(stages), rel=1e-12)
        assert cell["stats"]["device_per_call_s"]["median"] == pytest.approx(
            DEVICE_SHARE * statistics.median(stages), rel=1e-12)
        assert cell["validation_error_max"] == VALIDATION_ERROR[path]

    ratios = {(r["path"], r["order"]): r["metrics"] for r in summary["ratios"]}
    assert set(ratios) == {(p, o) for p in PATHS[1:] for o in ORDERS}
    rows = markdown_rows(table)
    assert (out / "summary.md").read_text() == table
    machine = get_machine("h200")
    for path in PATHS:
        for order in ORDERS:
            median = statistics.median(fake_stage_s(path, order, r) for r in good_rounds(path, order))
            flop, nbytes = expected_work(order)
            device_s = DEVICE_SHARE * median
            arithmetic, memory = flop / machine.fp64_tc_peak_flops / device_s, nbytes / machine.hbm_bandwidth / device_s
            percent, binding = rows[(path, order)][7].split()
            assert float(percent.rstrip("%")) == pytest.approx(100 * max(arithmetic, memory), abs=0.051)
            assert binding == ("(FP64)" if arithmetic >= memory else "(HBM)")
            if path == "GEMM":
                assert rows[(path, order)][8] == "1 (baseline)"
                continue
            base = statistics.median(fake_stage_s("GEMM", order, r) for r in good_rounds("GEMM", order))
            stage_ratio = ratios[(path, order)]["stage_wall_s"]
            assert stage_ratio["ratio"] == pytest.approx(median / base, rel=1e-12)
            assert ratios[(path, order)]["end_to_end_s"]["ratio"] == pytest.approx(median / base, rel=1e-12)
            # Fewer than four rounds: Section 4.5's 1 % criterion decides.
            assert stage_ratio["criterion"] == "1%" and stage_ratio["resolved"] == (abs(median / base - 1) > 0.01)
            assert rows[(path, order)][8] == f"{median / base:.3f}"


def test_rerun_of_a_finished_sweep_measures_nothing_and_an_interrupted_summary_write_keeps_the_old(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "sweep"
    sweep(out, FakeMeasure(), orders=(7,))
    before = {name: (out / name).read_bytes() for name in ("runs.jsonl", "summary.json", "summary.csv")}

    real_replace = os.replace

    def replace_interrupted_at_summary(src, dst):
        if Path(dst).name == "summary.json":
            raise KeyboardInterrupt  # the temp file is complete, the rename never happens
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_interrupted_at_summary)
    again = FakeMeasure()
    with pytest.raises(KeyboardInterrupt):
        sweep(out, again, orders=(7,))
    monkeypatch.undo()
    assert again.calls == []
    assert len(json.loads((out / "provenance.json").read_text())["sessions"]) == 2  # the rerun got that far
    assert {name: (out / name).read_bytes() for name in before} == before
    assert_no_temp_files(out)


def test_failed_validation_stops_before_any_timing(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    measure = FakeMeasure()
    validate = FakeValidate({**VALIDATION_ERROR, "FUSED": 1e-9})
    with pytest.raises(ComposerError, match=r"FUSED p=7 failed validation: .* 1\.000e-09 > 1e-12"):
        sweep(out, measure, validate, orders=(7,))
    assert measure.calls == [] and ("FUSED", 7) in validate.calls
    assert not (out / "runs.jsonl").exists()
