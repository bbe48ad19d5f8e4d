"""Running the plan: the plan and its estimate first, then the steps in order with progress, a
field check before every timing, the journal after every step, a clean stop at the budget, and
the crossover map written from what was measured (also after a stop).

A rerun of the same command resumes: finished steps are skipped (failed ones too, unless
``retry_failed``), an interrupted step is rerun and its command resumes its own results.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.arch.machines import Machine
from composer.bench.progress import SweepProgress
from composer.campaign.budget import Budget, BudgetExhausted
from composer.campaign.estimate import Estimate, Estimator
from composer.campaign.execute import Executor, log_name
from composer.campaign.journal import DONE, FAILED, INTERRUPTED, RUNNING, Journal, now_utc
from composer.campaign.plan import Plan, Step
from composer.cli import output
from composer.errors import CheckFailed, ComposerError

LOGS = "logs"


@dataclass(frozen=True)
class _Shown:
    """A step as the sweep progress display names jobs: ``bench paths p=7``."""

    path: str
    order: int


@dataclass
class CampaignResult:
    stopped: str  # "done" or "budget"
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    crossover: Path | None = None
    choices: list[str] = field(default_factory=list)


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def plan_rows(plan: Plan, estimates: dict[str, Estimate], journal: Journal) -> list[dict[str, Any]]:
    """One row per step: what the plan table shows (and ``--json`` prints)."""
    rows = []
    for step in plan.steps:
        e = estimates[step.id]
        rows.append({"step": step.id, "what": step.what, "paths": list(step.paths), "runs": e.remaining_runs,
                     "estimate_s": e.seconds, "basis": e.basis, "status": journal.status(step.id) or "to do"})
    return rows


def print_plan(plan: Plan, estimates: dict[str, Estimate], journal: Journal, budget_s: float | None,
               as_json: bool = False) -> float:
    """The plan table (or, ``as_json``, its rows as JSON) on stdout; returns the estimated seconds
    of what is left."""
    rows = plan_rows(plan, estimates, journal)
    left = sum(r["estimate_s"] for r in rows if r["status"] != DONE)
    if as_json:
        print(json.dumps({"steps": rows, "notes": list(plan.notes), "estimated_left_s": left,
                          "budget_s": budget_s}, indent=2))
        return left
    con = output.console()
    table = output.table(["step", "what", "paths", "runs", "estimate", "basis", "status"],
                         title="composer campaign: plan", right=("runs", "estimate"))
    for r in rows:
        table.add_row(r["step"], r["what"], ",".join(r["paths"]), str(r["runs"] or "—"),
                      _hms(r["estimate_s"]) if r["basis"] != "done" else "—", r["basis"], r["status"])
    con.print(table)
    for note in plan.notes:
        con.print(f"note: {note}")
    budget = f"; budget {_hms(budget_s)}" if budget_s is not None else ""
    con.print(f"estimated time left: {_hms(left)} ({sum(journal.status(s.id) == DONE for s in plan.steps)} of "
              f"{len(plan.steps)} steps done){budget}")
    return left


def _ensure_validated(step: Step, executor: Executor, journal: Journal) -> None:
    """The field check of every path of a graph or profile step that no bench step validated yet."""
    if step.kind in ("bench", "carrier"):
        return  # composer bench and sweep-carrier validate every (path, order) or setting before timing it
    for path in step.paths:
        if journal.validated(path, step.order):
            continue
        error, tolerance = executor.validate(path, step.order)
        if not error <= tolerance:
            raise CheckFailed(f"{path} p={step.order} failed validation: max|diff|/max|ref| = {error:.3e} > "
                              f"{tolerance:g}; not timed")
        journal.record_validation(path, step.order, error, f"campaign before {step.id}")


def _record_bench_validation(step: Step, journal: Journal) -> None:
    """A bench step that finished validated its paths as scheduled (those it ran with options, as those)."""
    if step.kind != "bench" or step.sms:
        return
    with_options = {p for p, _ in step.options}
    for path in step.paths:
        if path not in with_options and not journal.validated(path, step.order):
            journal.record_validation(path, step.order, None, step.id)


def run_campaign(plan: Plan, root: Path, executor: Executor, machine: Machine, *, budget_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, hard_stop: bool = True, retry_failed: bool = False,
                 estimator: Estimator | None = None, argv: Sequence[str] = (),
                 write_map: Callable[[], tuple[Path | None, list[str]]] | None = None) -> CampaignResult:
    """Run (or resume) ``plan`` in ``root``; see the module docstring. ``write_map()`` writes the
    crossover map and returns (its file, the choices as lines)."""
    from composer.cli.main import one_line

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    journal = Journal.open(root)
    estimator = estimator or Estimator(root, machine)
    estimates = {s.id: estimator.estimate(s) for s in plan.steps}
    print_plan(plan, estimates, journal, budget_s)
    pending = [s for s in plan.steps if journal.status(s.id) != DONE
               and (retry_failed or journal.status(s.id) != FAILED)]
    result = CampaignResult("done")
    if not pending:
        result.crossover, result.choices = write_map() if write_map else (None, [])
        return result
    first = estimates[pending[0].id]
    if budget_s is not None and first.seconds > budget_s:
        raise ComposerError(f"--budget-s {budget_s:g} is too small for one measurement: the first step to run, "
                            f"{pending[0].id}, needs about {first.seconds:.0f} s ({first.basis} estimate)")
    budget = Budget(budget_s, clock)
    journal.start_session(list(argv), budget_s)
    stopped, note = "done", ""
    try:
        with SweepProgress(len(plan.steps), done=len(plan.steps) - len(pending)) as progress:
            for i, step in enumerate(pending):
                estimate = estimator.estimate(step)
                if not budget.fits(estimate.seconds):
                    stopped = "budget"
                    note = (f"stopped before {step.id}: it needs about {estimate.seconds:.0f} s, "
                            f"{max(budget.remaining(), 0):.0f} s of the budget are left")
                    result.left = [s.id for s in pending[i:]]
                    break
                shown = _Shown(f"{step.kind} {step.axis}", step.order)
                progress.start(shown)
                journal.mark(step.id, RUNNING, started_utc=now_utc(), estimate_s=estimate.seconds,
                             argv=step.argv(root))
                t0 = clock()
                try:
                    with budget.hard_stop(hard_stop):
                        _ensure_validated(step, executor, journal)
                        executor.run(step, root, root / LOGS / log_name(step))
                except BudgetExhausted:
                    journal.mark(step.id, INTERRUPTED, seconds=clock() - t0, error="budget spent while running")
                    progress.finish(shown, False, "budget spent; resumes in the next session")
                    stopped, note = "budget", f"budget spent during {step.id}; its finished runs are kept"
                    result.left = [s.id for s in pending[i:]]
                    break
                except KeyboardInterrupt:
                    journal.mark(step.id, INTERRUPTED, seconds=clock() - t0, error="interrupted")
                    stopped, note = "interrupted", f"interrupted during {step.id}"
                    raise
                except Exception as exc:  # a failed step is recorded; the campaign goes on
                    journal.mark(step.id, FAILED, seconds=clock() - t0, error=one_line(exc))
                    progress.finish(shown, False, one_line(exc))
                    result.failed.append(step.id)
                    continue
                journal.mark(step.id, DONE, seconds=clock() - t0, finished_utc=now_utc(), error=None)
                _record_bench_validation(step, journal)
                progress.finish(shown, True)
                result.done.append(step.id)
    finally:
        if write_map is not None:
            result.crossover, result.choices = write_map()
        journal.end_session(stopped, len(result.done), note)
    result.stopped = stopped
    _print_outcome(result, note)
    return result


def _print_outcome(result: CampaignResult, note: str) -> None:
    con = output.console()
    con.print(f"campaign: {len(result.done)} steps done, {len(result.failed)} failed"
              + (f", {len(result.left)} left" if result.left else ""))
    if note:
        con.print(note)
    if result.left:
        con.print("rerun the same command to continue (finished steps and runs are kept)")
    for step in result.failed:
        con.print(f"failed: {step} (the journal and logs/ say why; --retry-failed reruns it)")
    for line in result.choices:
        con.print(line)
    if result.crossover is not None:
        con.print(f"crossover map: {result.crossover}")


__all__ = ["CampaignResult", "LOGS", "print_plan", "run_campaign"]
