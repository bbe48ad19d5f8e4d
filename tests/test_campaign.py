"""``composer campaign`` on the CPU with a fake device: the plan (steps, sizes, what is left out,
command lines the real parser accepts), the estimate, the budget cut-off (estimate and hard stop),
resume after an interruption with no run lost or repeated, the field check before a timing the
bench does not cover, and the crossover map it writes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from composer.arch.machines import get_machine
from composer.bench.records import RunRecord
from composer.bench.results import ResultStore
from composer.campaign.estimate import Estimate, Estimator
from composer.campaign.journal import DONE, FAILED, INTERRUPTED, Journal
from composer.campaign.plan import Capabilities, Step, build_plan, default_sm_counts, parse_axes
from composer.campaign.runner import run_campaign
from composer.cli.main import build_parser, main
from composer.config.crossover import load_crossover, read_or_empty, write_crossover
from composer.errors import ComposerError

H200 = get_machine("h200")
PATHS = ("GEMM", "FUSED", "FUSED_TC", "FUSED_DFMA", "FUSED_TC16")
CAPS = Capabilities(paths=PATHS, build_dir=None, ncu=True, bench_sms=True)
#: Fake device time per call at p = 7, in µs; other orders scale with Nq^3.
CALL_US = {"GEMM": 2000.0, "FUSED": 470.0, "FUSED_TC": 480.0, "FUSED_DFMA": 580.0, "FUSED_TC16": 530.0}
RUN_S = 10.0  # fake wall seconds per run


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FakeExecutor:
    """The device side: a bench step appends fake runs (resuming what its directory has), a graph
    step writes its file, a profile step its summary; each run advances the fake clock."""

    def __init__(self, clock: FakeClock, interrupt_after_runs: int | None = None, sleep_s: float = 0.0,
                 bad: set[tuple[str, int]] = frozenset()) -> None:
        self.clock = clock
        self.interrupt_after_runs = interrupt_after_runs
        self.sleep_s = sleep_s
        self.bad = bad
        self.runs: list[tuple[str, str, int, int]] = []  # (step, path, order, round)
        self.steps: list[str] = []
        self.validated: list[tuple[str, int]] = []

    def run(self, step: Step, root: Path, log: Path) -> None:
        self.steps.append(step.id)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        out = root / step.out
        if step.kind == "graph":
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"order": step.order, "grid": [1, 1, 1], "paths": []}))
            return
        if step.kind == "profile":
            out.mkdir(parents=True, exist_ok=True)
            (out / "profile.json").write_text(json.dumps({f"{p}@p{step.order}": {} for p in step.paths}))
            return
        store = ResultStore(out)
        done = store.completed_keys()
        for r in range(step.rounds):
            for path in step.paths:
                if (path, step.order, r) in done:
                    continue
                if self.interrupt_after_runs is not None and len(self.runs) == self.interrupt_after_runs:
                    raise KeyboardInterrupt
                t = CALL_US[path] * ((step.order + 1) / 8) ** 3 * 1e-6 * (1 + 0.001 * r)
                store.append(RunRecord(path=path, order=step.order, grid=(1, 1, 1), round_index=r, stage_wall_s=1.2 * t,
                                       device_sum_ms=t * 1e3 * 57, device_intervals=57, end_to_end_s=RUN_S / 20,
                                       timed_stages=57, warmup_steps=1, nstep=20, options={"graph": False}))
                self.runs.append((step.id, path, step.order, r))
                self.clock.t += RUN_S
        store.write_provenance({"date_utc": "2026-12-02T00:00:00+00:00", "git": {"commit": "c" * 40},
                                "nvml": {"gpus": [{"name": "NVIDIA H200"}]}})

    def validate(self, path: str, order: int) -> tuple[float, float]:
        self.validated.append((path, order))
        return (1e-3 if (path, order) in self.bad else 1e-15), 1e-12


class FixedEstimator:
    """Every step that has something left costs ``seconds``."""

    def __init__(self, root: Path, seconds: float) -> None:
        self.root, self.seconds = Path(root), seconds

    def estimate(self, step: Step) -> Estimate:
        if step.kind == "bench" and (self.root / step.out / "runs.jsonl").is_file():
            done = ResultStore(self.root / step.out).completed_keys()
            if len(done) >= step.rounds * len(step.paths):
                return Estimate(0.0, "done")
        return Estimate(self.seconds, "model", 1)


def one_element(order: int) -> tuple[int, int, int]:
    return (1, 1, 1)


def plan_for(orders, axes="paths", **kw):
    return build_plan(orders, parse_axes(axes), H200, CAPS, grid_of=one_element, **kw)


def campaign(tmp_path: Path, plan, executor: FakeExecutor, clock: FakeClock, budget_s=None, seconds=100.0, **kw):
    crossover = tmp_path / "user" / "crossover.toml"

    def write_map():
        from composer.campaign.decide import crossover_entries

        entries = crossover_entries(tmp_path / "c", "h200", "NVIDIA H200", [])
        if not entries:
            return None, []
        m = read_or_empty(crossover)
        for e in entries:
            m = m.with_entry(e)
        return write_crossover(m, crossover), [c.describe() for e in entries for c in e.orders.values()]

    return run_campaign(plan, tmp_path / "c", executor, H200, budget_s=budget_s, clock=clock,
                        estimator=FixedEstimator(tmp_path / "c", seconds), write_map=write_map, **kw)


# --- the plan ----------------------------------------------------------------------------------------------


def test_plan_steps_sizes_and_what_is_left_out(tmp_path):
    plan = build_plan([7, 511, 575], parse_axes("all"), H200, CAPS)
    ids = [s.id for s in plan.steps]
    assert ids[:3] == ["paths/p0007", "paths/p0511", "paths/p0575"]  # the landscape first
    first_later = min(ids.index(i) for i in ids if not i.startswith("paths/"))
    assert all(i.startswith("paths/") for i in ids[:first_later])
    assert {"overlap/p0007", "profiles/p0511"} <= set(ids)
    assert {f"balance/sms{n:03d}/p0511" for n in default_sm_counts(H200)} <= set(ids)
    assert not any(i.startswith("balance/") and i.endswith("p0007") for i in ids)  # p = 63, 255, 511 only
    step = {s.id: s for s in plan.steps}
    assert step["paths/p0511"].paths == ("GEMM", "FUSED_TC", "FUSED_DFMA", "FUSED_TC16")  # FUSED stops at 255
    assert step["paths/p0511"].rounds == 6 and step["paths/p0575"].rounds == 3  # the paper's rounds
    assert default_sm_counts(H200) == [98, 66, 52, 32] and all(n % 2 == 0 for n in default_sm_counts(H200))
    parser = build_parser()
    for s in plan.steps:  # every step is a command line the real composer accepts
        args = parser.parse_args(s.argv(tmp_path))
        assert args.command == s.kind
    bal = parser.parse_args(step["balance/sms066/p0511"].argv(tmp_path))
    assert bal.sms == 66 and bal.orders == [511] and Path(bal.out) == tmp_path / "bench/balance/sms066/p0511"


def test_plan_without_sms_ncu_or_build(tmp_path):
    caps = Capabilities(paths=(*PATHS, "GEMM_CUTE"), build_dir=None, ncu=False, bench_sms=False)
    plan = build_plan([255], parse_axes("all"), H200, caps)
    assert not any(s.axis in ("balance", "profiles") for s in plan.steps)
    assert any("--sms" in n for n in plan.notes) and any("ncu" in n for n in plan.notes)
    assert all("GEMM_CUTE" not in s.paths for s in plan.steps)
    caps = Capabilities(paths=(*PATHS, "GEMM_CUTE"), build_dir=tmp_path, ncu=False, bench_sms=False)
    plan = build_plan([255], parse_axes("mma,library"), H200, caps)
    cute = [s for s in plan.steps if s.id.startswith("cute-")]
    assert [s.path_options() for s in cute] == [{"GEMM_CUTE": {"library": "cute", "mma": "8x8x4"}},
                                               {"GEMM_CUTE": {"library": "cute", "mma": "16x8x4"}}]
    args = build_parser().parse_args(cute[0].argv(tmp_path))
    assert ("GEMM_CUTE", "library", "cute") in args.options and ("GEMM_CUTE", "mma", "8x8x4") in args.options
    with pytest.raises(ComposerError, match="unknown axes"):
        parse_axes("paths,speed")


def test_estimate_from_schedule_sizes_then_from_prior_runs(tmp_path):
    plan = plan_for([7])
    est = Estimator(tmp_path, H200)
    step = plan.steps[0]
    model = est.estimate(step)
    assert model.basis == "model" and model.remaining_runs == len(PATHS) * 6 and model.seconds > 0
    clock = FakeClock()
    FakeExecutor(clock).run(step, tmp_path, tmp_path / "log")
    again = Estimator(tmp_path, H200).estimate(step)
    assert again.basis == "done" and again.seconds == 0.0  # its runs exist
    other = Step("x/p0007", "x", "bench", 7, ("GEMM",), "elsewhere", 2)
    prior = Estimator(tmp_path, H200).estimate(other)
    assert prior.basis == "prior"
    assert prior.seconds == pytest.approx(2 * (RUN_S + 1.5) + 3.0 + 20.0 + Estimator(tmp_path, H200).reference_s(7))


# --- running: budget, resume, validation ---------------------------------------------------------------------


def test_budget_cut_off_keeps_what_it_has_and_writes_the_map(tmp_path, capsys):
    clock = FakeClock()
    executor = FakeExecutor(clock)
    plan = plan_for([7, 15, 31])
    result = campaign(tmp_path, plan, executor, clock, budget_s=250.0, hard_stop=False)
    assert result.stopped == "budget" and result.done == ["paths/p0007"]  # 30 runs x 10 s spent 300 s
    assert result.left == ["paths/p0015", "paths/p0031"]
    journal = Journal.open(tmp_path / "c")
    assert journal.status("paths/p0007") == DONE and journal.status("paths/p0015") is None
    assert journal.data["sessions"][-1]["stopped"] == "budget"
    out = capsys.readouterr().out
    assert "estimated time left" in out and "rerun the same command" in out and "stopped before paths/p0015" in out
    choice = load_crossover(tmp_path / "user" / "crossover.toml").machines["h200"].orders[7]
    assert choice.path == "FUSED" and choice.decided == "measured" and choice.runner_up == "FUSED_TC"
    assert choice.margin_pct == pytest.approx(100 * (480 / 470 - 1), rel=1e-9) and choice.rounds == 6


def test_budget_too_small_for_one_measurement(tmp_path):
    clock = FakeClock()
    with pytest.raises(ComposerError, match="too small for one measurement"):
        campaign(tmp_path, plan_for([7]), FakeExecutor(clock), clock, budget_s=50.0)


def test_hard_stop_when_the_budget_runs_out_inside_a_step(tmp_path):
    executor = FakeExecutor(FakeClock(), sleep_s=3.0)
    result = run_campaign(plan_for([7, 15]), tmp_path / "c", executor, H200, budget_s=0.5,
                          estimator=FixedEstimator(tmp_path / "c", 0.1))
    assert result.stopped == "budget" and result.done == []
    assert Journal.open(tmp_path / "c").status("paths/p0007") == INTERRUPTED
    assert executor.steps == ["paths/p0007"]


def test_resume_after_an_interruption_loses_and_repeats_nothing(tmp_path):
    clock = FakeClock()
    plan = plan_for([7, 15], axes="paths,overlap")
    first = FakeExecutor(clock, interrupt_after_runs=40)  # inside the second bench step
    with pytest.raises(KeyboardInterrupt):
        campaign(tmp_path, plan, first, clock)
    journal = Journal.open(tmp_path / "c")
    assert journal.status("paths/p0007") == DONE and journal.status("paths/p0015") == INTERRUPTED
    kept = ResultStore(tmp_path / "c" / "bench/paths/p0015").records()
    assert len(kept) == 10
    second = FakeExecutor(clock)
    result = campaign(tmp_path, plan, second, clock)
    assert result.stopped == "done" and "paths/p0007" not in second.steps  # finished steps are skipped
    assert len(second.runs) == 20  # only the runs the interruption left
    records = ResultStore(tmp_path / "c" / "bench/paths/p0015").records()
    assert len(records) == 30 and len({r.key for r in records}) == 30
    assert [s["stopped"] for s in Journal.open(tmp_path / "c").data["sessions"]] == ["interrupted", "done"]
    assert second.validated == []  # the bench steps validated every path the graph steps time
    assert (tmp_path / "c" / "graph/p0015.json").is_file()


def test_validation_before_a_timing_the_bench_does_not_cover(tmp_path):
    clock = FakeClock()
    executor = FakeExecutor(clock, bad={("FUSED_DFMA", 7)})
    result = campaign(tmp_path, plan_for([7], axes="overlap"), executor, clock)
    assert ("GEMM", 7) in executor.validated and result.failed == ["overlap/p0007"]
    assert executor.steps == []  # validation failed: nothing timed
    journal = Journal.open(tmp_path / "c")
    assert journal.status("overlap/p0007") == FAILED and "failed validation" in journal.data["steps"]["overlap/p0007"]["error"]
    rerun = FakeExecutor(clock)
    campaign(tmp_path, plan_for([7], axes="overlap"), rerun, clock)
    assert rerun.steps == []  # a failed step is not retried by default
    campaign(tmp_path, plan_for([7], axes="overlap"), rerun, clock, retry_failed=True)
    assert rerun.steps == ["overlap/p0007"]


def test_cli_without_gpu_says_what_works(tmp_path, capsys):
    from composer.runtime.device import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present: the campaign would run")
    assert main(["campaign", "--out", str(tmp_path / "c"), "--orders", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs an NVIDIA GPU" in err[0] and "--dry-run" in err[0] and "composer report" in err[0]
    assert main(["campaign", "--out", str(tmp_path / "c"), "--orders", "7,15", "--axes", "paths", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "paths/p0007" in out and "estimated time left" in out
    assert main(["campaign", "--out", str(tmp_path / "c"), "--orders", "7,15", "--axes", "paths", "--dry-run",
                 "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["step"] for s in plan["steps"]] == ["paths/p0007", "paths/p0015"]
    assert plan["estimated_left_s"] == pytest.approx(sum(s["estimate_s"] for s in plan["steps"]))
    assert not (tmp_path / "c").exists()  # a dry run writes nothing


def test_write_crossover_without_gpu_from_measurements_and_a_prediction(tmp_path, capsys):
    clock = FakeClock()
    FakeExecutor(clock).run(plan_for([7]).steps[0], tmp_path / "c", tmp_path / "log")
    prediction = {"schema": "composer.model-predictions", "version": 1,
                  "target": {"machine": "h200", "label": "h200", "sm_count": 132, "full_sm_count": 132},
                  "paths": [{"path": "FUSED_TC", "order": 7, "seconds": 1e-4}, {"path": "FUSED_TC", "order": 767, "seconds": 1e-2},
                            {"path": "GEMM", "order": 767, "seconds": 2e-2}],
                  "fastest": [{"order": 7, "path": "FUSED_TC", "seconds": 1e-4, "paths": 1, "se": None, "screened": None},
                              {"order": 767, "path": "FUSED_TC", "seconds": 1e-2, "paths": 2, "se": 0.4,
                               "screened": False}]}
    (tmp_path / "p.json").write_text(json.dumps(prediction))
    target = tmp_path / "crossover.toml"
    assert main(["campaign", "--out", str(tmp_path / "c"), "--write-crossover", "--predictions", str(tmp_path / "p.json"),
                 "--crossover", str(target)]) == 0
    entry = load_crossover(target).machines["h200"]
    assert entry.gpu == "NVIDIA H200"  # the GPU the measurements name
    orders = entry.orders
    assert orders[7].decided == "measured" and orders[7].path == "FUSED"  # a measurement wins over a prediction
    assert orders[767].decided == "predicted" and orders[767].se == 0.4 and orders[767].runner_up == "GEMM"
    assert "p=767 -> FUSED_TC (predicted on h200: 100.0 % ahead of GEMM, S/E 0.40 not screened in" in capsys.readouterr().out


# --- the carrier axis and the recorded node times ---------------------------------------------------------


def test_carrier_steps_precede_their_orders_benches_and_graph_steps_record_times(tmp_path):
    caps = Capabilities(paths=(*PATHS, "GEMM_CUTE", "GEMM_FUSED"), build_dir=tmp_path / "build", ncu=False,
                        bench_sms=False)
    plan = build_plan([7, 63], parse_axes("carrier,paths,overlap"), H200, caps, grid_of=one_element)
    ids = [s.id for s in plan.steps]
    assert ids.index("carrier/p0007") < ids.index("paths/p0007") < ids.index("carrier/p0063") < ids.index("paths/p0063")
    step = plan.step("carrier/p0063")
    argv = step.argv(tmp_path / "c")
    assert argv[:3] == ["sweep-carrier", "--order", "63"] and argv[argv.index("--out") + 1].endswith("carrier/p0063.json")
    from composer.cli.main import build_parser

    build_parser().parse_args(argv)  # the plan's command line is one the command accepts
    graph = plan.step("overlap/p0007").argv(tmp_path / "c")
    assert "--record-times" in graph
    build_parser().parse_args(graph)
    # without GEMM_FUSED (no build directory) there is nothing to sweep
    none = build_plan([7], parse_axes("carrier,paths"), H200, CAPS, grid_of=one_element)
    assert not [s for s in none.steps if s.axis == "carrier"]


def test_carrier_step_estimate_and_done_once_its_report_exists(tmp_path):
    from composer.campaign.estimate import Estimator

    caps = Capabilities(paths=("GEMM_FUSED",), build_dir=tmp_path / "build", ncu=False, bench_sms=False)
    step = build_plan([63], parse_axes("carrier"), H200, caps, grid_of=one_element).step("carrier/p0063")
    est = Estimator(tmp_path / "c", H200).estimate(step)
    assert est.seconds > 0 and est.basis == "model" and est.remaining_runs == 8
    (tmp_path / "c" / "carrier").mkdir(parents=True)
    (tmp_path / "c" / step.out).write_text("{}")
    assert Estimator(tmp_path / "c", H200).estimate(step).basis == "done"


def test_sweep_carrier_out_file_is_written_after_the_winner(tmp_path, monkeypatch):
    import argparse
    import json

    from composer.cli import sweep_carrier
    from composer.config.schedules import load_schedule
    from composer.epilogues import carrier_sweep as cs

    cands = [c for c in cs.candidates(7, load_schedule(7).paths, "sm_90") if c.settings is not None][:3]
    monkeypatch.setattr(sweep_carrier, "with_build", lambda cs_, entries, arch: cands)
    steps = lambda o, b, c: ((lambda cand: (True, "ok")), (lambda cand: 1.0 + cands.index(cand)), lambda: None)
    out = tmp_path / "c" / "carrier" / "p0007.json"
    args = argparse.Namespace(order=7, mma=None, arch="sm_90", build_dir=str(tmp_path / "b"), rounds=2, calls=1,
                              schedules_dir=str(tmp_path / "user"), dry_run=False, tiles=False, out=out)
    assert sweep_carrier.run(args, steps=steps) == 0
    report = json.loads(out.read_text())
    assert report["winner"] == cands[0].label and report["written_to"].endswith("p0007.toml")
    from composer.report.sources import classify

    assert classify(report) == "carrier"  # composer report reads the campaign's carrier steps


def test_write_crossover_refuses_runs_of_two_gpus_in_one_directory(tmp_path, capsys):
    """An H100 run newer than the H200's of the same cell must not decide the H200's choice: a directory
    holding both is refused in one line, and each GPU's directory on its own writes its entry."""
    import shutil

    root = Path(__file__).resolve().parents[1] / "docs" / "data"
    shutil.copytree(root / "h200_s21" / "call1" / "bench" / "b", tmp_path / "data" / "h200")
    shutil.copytree(root / "h100_s24" / "call2" / "bench" / "hi", tmp_path / "data" / "h100")
    out = tmp_path / "crossover.toml"
    argv = ["campaign", "--write-crossover", "--out", str(tmp_path / "data"), "--crossover", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "several GPUs" in err[0] and "NVIDIA H100 80GB HBM3" in err[0] and not out.exists()
    assert main(argv + ["--exclude", "h100"]) == 0
    assert load_crossover(out).machines["h200"].gpu == "NVIDIA H200"
    assert main(["campaign", "--write-crossover", "--out", str(tmp_path / "data" / "h100"), "--machine", "h100_sxm",
                 "--crossover", str(out)]) == 0
    written = load_crossover(out).machines
    assert written["h100_sxm"].orders[511].path == "FUSED_TC16" and written["h100_sxm"].orders[511].decided == "measured"
    assert set(written["h200"].orders) == {7, 15, 31, 63}
