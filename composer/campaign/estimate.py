"""Time estimates of the campaign's steps, printed with the plan before anything runs, and used to
stop before a step that would not fit the remaining budget.

Basis of each step, the first that applies ("prior" or "model" in the plan's table):

- bench: only the runs its results directory still lacks (a resumed sweep counts what it has).
  A run is priced at what the same path and order took in any bench run under the campaign
  directory (end-to-end time per step × steps + RUN_SETUP_S) — prior; else from the schedule's
  size: the order's roofline time on the machine over ASSUMED_ROOF_FRACTION, per stage, times its
  stages, + RUN_SETUP_S — model; on N of the machine's SMs (the balance axis) the timed part grows by
  SMs / N, the most it can. A step with runs left also pays, per path, the field check
  (VALIDATION_S) and the first compile (COMPILE_S), and once the NumPy reference the field checks
  compare with (its FLOP at REFERENCE_FLOPS).
- profile: per path not yet in the step's profile summary, PROFILE_S + PROFILE_REPLAYS calls
  (+ the field check, counted as for bench).
- graph: nothing when its file exists; else per path GRAPH_S + 4 × (repeats + 3) calls (+ the
  field check).
- carrier: nothing when its file exists; else CARRIER_CANDIDATES settings (a build of
  ``--fused-variants all``; a tiles build holds more), each validated, then per round a path set up
  and its calls + a warm-up timed at GEMM_FUSED's call time, + the reference once.

The constants are deliberately rough (an H200 session's orders of magnitude); the prior basis
replaces them as soon as one run of a cell exists.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from composer import counts
from composer.arch.machines import Machine
from composer.bench.records import RunRecord
from composer.bench.results import ResultStore
from composer.campaign.plan import GRAPH_REPEATS, Step

ASSUMED_ROOF_FRACTION = 0.3  # the share of the roofline a path reaches when nothing was measured
RUN_SETUP_S = 1.5  # upload, path construction, download per run
VALIDATION_S = 3.0  # one GPU tendency call and the comparison, per (path, order)
REFERENCE_FLOPS = 1e10  # the NumPy reference's rate on a GPU machine's host
COMPILE_S = 20.0  # first NVRTC compile / module load of a path's kernels at an order
PROFILE_S = 30.0  # ncu start-up and report per (path, order)
PROFILE_REPLAYS = 60  # kernel replays of one profiled call (one per metric pass)
GRAPH_S = 5.0  # upload and plan per path
CARRIER_CANDIDATES = 8  # the carrier x fold x flux settings a build of --fused-variants all holds


@dataclass
class PriorTimes:
    """What earlier bench runs under the campaign directory took, per (path, order)."""

    run_s: dict[tuple[str, int], float] = field(default_factory=dict)  # wall of one run
    call_s: dict[tuple[str, int], float] = field(default_factory=dict)  # device time of one call

    @classmethod
    def scan(cls, root: Path) -> PriorTimes:
        runs: dict[tuple[str, int], list[RunRecord]] = {}
        for file in sorted(Path(root).rglob(ResultStore.RUNS)):
            for record in ResultStore(file.parent).records(include_failed=False):
                if not record.options.get("sms"):  # the whole machine; a restricted step scales these
                    runs.setdefault((record.path, record.order), []).append(record)
        prior = cls()
        for k, records in runs.items():
            walls = [r.end_to_end_s * r.nstep for r in records if math.isfinite(r.end_to_end_s)]
            calls = [r.device_per_call_s for r in records if math.isfinite(r.device_per_call_s)]
            if walls:
                prior.run_s[k] = statistics.median(walls) + RUN_SETUP_S
            if calls:
                prior.call_s[k] = statistics.median(calls)
        return prior


@dataclass(frozen=True)
class Estimate:
    seconds: float
    basis: str  # "prior", "model", "done"
    remaining_runs: int = 0


class Estimator:
    """Estimates of steps for one machine, with the prior times under the campaign directory."""

    def __init__(self, root: Path, machine: Machine, schedule_for=None) -> None:
        if schedule_for is None:
            from composer.config.schedules import load_schedule as schedule_for
        self.root = Path(root)
        self.machine = machine
        self.schedule_for = schedule_for
        self.prior = PriorTimes.scan(self.root)

    def call_s(self, path: str, order: int) -> tuple[float, str]:
        if (path, order) in self.prior.call_s:
            return self.prior.call_s[(path, order)], "prior"
        grid = self.schedule_for(order).benchmark.grid
        roof = counts.roofline(order, grid, self.machine).roof
        return roof / ASSUMED_ROOF_FRACTION, "model"

    def run_s(self, path: str, order: int) -> tuple[float, str]:
        if (path, order) in self.prior.run_s:
            return self.prior.run_s[(path, order)], "prior"
        bench = self.schedule_for(order).benchmark
        call, _ = self.call_s(path, order)
        stages = 3 * bench.nstep
        return call * stages * 1.15 + RUN_SETUP_S, "model"  # a stage holds the call and the RK update

    def reference_s(self, order: int) -> float:
        """The NumPy reference on the validation grid, once per step that checks fields."""
        grid = self.schedule_for(order).validation.grid
        return counts.flop(order, grid) / REFERENCE_FLOPS

    def estimate(self, step: Step) -> Estimate:
        out = self.root / step.out
        if step.kind == "bench":
            done = ResultStore(out).completed_keys() if (out / ResultStore.RUNS).is_file() else set()
            total, bases, runs = 0.0, set(), 0
            for path in step.paths:
                left = [r for r in range(step.rounds) if (path, step.order, r) not in done]
                if not left:
                    continue
                seconds, basis = self.run_s(path, step.order)
                if step.sms:  # fewer SMs: the timed loop takes longer in proportion (at most)
                    seconds = RUN_SETUP_S + (seconds - RUN_SETUP_S) * self.machine.sm_count / step.sms
                bases.add(basis)
                runs += len(left)
                total += len(left) * seconds + VALIDATION_S + COMPILE_S
            if not runs:
                return Estimate(0.0, "done")
            return Estimate(total + self.reference_s(step.order), "model" if "model" in bases else "prior", runs)
        if step.kind == "profile":
            summary = out / "profile.json"
            have = set(json.loads(summary.read_text())) if summary.is_file() else set()
            todo = [p for p in step.paths if f"{p}@p{step.order}" not in have]
            total, bases = 0.0, set()
            for path in todo:
                call, basis = self.call_s(path, step.order)
                bases.add(basis)
                total += PROFILE_S + PROFILE_REPLAYS * call + VALIDATION_S
            total += self.reference_s(step.order) if todo else 0.0
            return Estimate(total, "done" if not todo else ("model" if "model" in bases else "prior"), len(todo))
        if step.kind == "graph":
            if out.is_file():
                return Estimate(0.0, "done")
            total, bases = 0.0, set()
            for path in step.paths:
                call, basis = self.call_s(path, step.order)
                bases.add(basis)
                total += GRAPH_S + 4 * (GRAPH_REPEATS + 3) * call + VALIDATION_S
            return Estimate(total + self.reference_s(step.order), "model" if "model" in bases else "prior", len(step.paths))
        if step.kind == "carrier":
            if out.is_file():
                return Estimate(0.0, "done")
            from composer.cli.sweep_carrier import DEFAULT_CALLS

            call, basis = self.call_s("GEMM_FUSED", step.order)
            per = VALIDATION_S + step.rounds * (RUN_SETUP_S + (DEFAULT_CALLS + 1) * call)  # a path and warm-up per sample
            return Estimate(CARRIER_CANDIDATES * per + COMPILE_S + self.reference_s(step.order), basis,
                            CARRIER_CANDIDATES)
        raise ValueError(f"unknown step kind {step.kind!r}")


__all__ = ["ASSUMED_ROOF_FRACTION", "Estimate", "Estimator", "PriorTimes"]
