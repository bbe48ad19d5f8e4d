"""The GPU side of ``composer bench``: the paper's timing protocol (Sections 4.2, S13, S14.1).

One run = one path at one order: upload the benchmark input, ``warmup_steps`` untimed steps,
then the timed step loop. Per run it records the step-loop wall time per RK stage (primary),
the CUDA-event device time per tendency call (read back one call later; the sum covers
exactly the timed stages), the end-to-end wall time per step (upload, all steps and the
download of q), and NVML clock/power samples. Paths run in interleaved rounds; each
(path, order) is validated on the point-varying input before its timings count.
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from composer import dg
from composer.bench.interleave import Job, interleaved_schedule, remaining_jobs
from composer.bench.nvml import ClockSampler
from composer.bench.progress import SweepProgress
from composer.bench.provenance import collect_provenance
from composer.bench.records import RunRecord
from composer.bench.results import ResultStore, write_results_markdown
from composer.bench.stats import summarize
from composer.arch.machines import Machine
from composer.config.schedules import Schedule, load_schedule
from composer.errors import ComposerError, RunFailure
from composer.kernels.support import SupportKernels
from composer.paths.registry import path_class
from composer.paths.problem import DeviceProblem, check_fits
from composer.paths.stepper import Stepper
from composer.paths.timer import EventTimer
from composer.runtime import Device
from composer.validation import relative_max_difference


@dataclass
class BenchPlan:
    """What one ``composer bench`` invocation runs."""

    paths: Sequence[str]
    orders: Sequence[int]
    rounds: int = 3
    graph: bool = False
    validate: bool = True
    out_dir: Path = Path("results/bench")
    baseline: str | None = None
    arrangement: str = "rotate"
    options: dict[str, dict] = field(default_factory=dict)
    #: When set, only these (path, order) cells run (``--paths auto``: one path per order).
    cells: set[tuple[str, int]] | None = None


def run_once(schedule: Schedule, path: str, fields: dict[str, np.ndarray], device: Device,
             round_index: int, graph: bool, sampler: ClockSampler,
             validation_error: float | None, options: dict) -> RunRecord:
    """Execute one timed run of ``path`` (benchmark configuration of ``schedule``)."""
    cfg = schedule.benchmark
    cls = path_class(path)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t_begin = time.perf_counter()
    problem = DeviceProblem.upload(fields, schedule.order, cfg.grid, device)
    impl = stepper = timer = None
    try:
        impl = cls(problem, **options)
        timer = EventTimer(device, problem.stream)
        stepper = Stepper(impl, cfg.dt, SupportKernels.load(problem.nq, device), timer)
        if graph:
            if not getattr(cls, "supports_graph", True):
                raise ComposerError(f"path {cls.name} cannot be captured into a CUDA graph")
            stepper.use_graphs()
        for _ in range(cfg.warmup_steps):
            stepper.step()
        problem.stream.synchronize()
        timer.reset()
        sampler.start()
        t0 = time.perf_counter()
        for _ in range(cfg.nstep - cfg.warmup_steps):
            stepper.step()
        problem.stream.synchronize()
        t1 = time.perf_counter()
        samples = sampler.stop()
        timer.flush()
        sms = restricted_sms(device, problem.stream)
        q_final = problem.download(problem.fields["q"])
        t_end = time.perf_counter()
        if not np.all(np.isfinite(q_final)):
            raise ComposerError(f"{path} p={schedule.order}: the solution is not finite after {cfg.nstep} steps")
        return RunRecord(
            path=cls.name, order=schedule.order, grid=cfg.grid, round_index=round_index,
            stage_wall_s=(t1 - t0) / cfg.timed_stages, device_sum_ms=timer.total_ms,
            device_intervals=timer.intervals, end_to_end_s=(t_end - t_begin) / cfg.nstep,
            timed_stages=cfg.timed_stages, warmup_steps=cfg.warmup_steps, nstep=cfg.nstep,
            clocks=samples, validation_error=validation_error,
            options={"graph": graph, **options, **sms}, started_utc=started,
            kernel_origin=impl.kernel_origin, diagnostics=impl.diagnostics(),
        )
    finally:
        for part in (stepper, impl, timer):
            if part is not None:
                part.close()
        problem.close()


def restricted_sms(device: Device, stream: object) -> dict[str, int]:
    """``{"sms": N}`` for a run on a green context of N SMs, N read back with %smid on the run's
    stream (an error when it differs from the partition); {} on the whole device."""
    expected = getattr(device, "active_sms", None)
    if expected is None:
        return {}
    from composer.runtime.smid import active_sm_count

    measured = active_sm_count(stream, device)
    if measured != expected:
        raise ComposerError(f"the green context of {expected} SMs ran the probe on {measured} SMs (%smid)")
    return {"sms": measured}


def validate_path(path: str, order: int, grid: tuple[int, int, int], device: Device,
                  reference: tuple[dict[str, np.ndarray], np.ndarray], options: dict) -> float:
    """max|dqdt - ref| / max|ref| of one tendency call on the point-varying input."""
    from composer.api import tendency

    fields, ref = reference
    return relative_max_difference(tendency(fields, order, grid, path=path, device=device, **options), ref)


def unsupported_cells(paths: Sequence[str], orders: Sequence[int]) -> set[tuple[str, int]]:
    """(path, order) pairs a sweep skips because the path does not implement the order."""
    skipped = set()
    for path in paths:
        for order in orders:
            try:
                path_class(path).check_order(order)
            except ComposerError:
                skipped.add((path, order))
    return skipped


def failed_record(job: Job, schedule: Schedule, message: str, graph: bool) -> RunRecord:
    cfg = schedule.benchmark
    nan = float("nan")
    return RunRecord(path=job.path, order=job.order, grid=cfg.grid, round_index=job.round_index,
                     stage_wall_s=nan, device_sum_ms=nan, device_intervals=0, end_to_end_s=nan,
                     timed_stages=cfg.timed_stages, warmup_steps=cfg.warmup_steps, nstep=cfg.nstep,
                     options={"graph": graph}, error=message)


#: ``run_once``'s signature: (schedule, path, fields, device, round_index, graph, sampler,
#: validation_error, options) -> RunRecord, the timed run of one job.
MeasureRun = Callable[[Schedule, str, dict[str, np.ndarray], Device, int, bool, ClockSampler, float | None, dict],
                      RunRecord]
#: ``validate_path``'s signature: (path, order, grid, device, (fields, reference), options) -> error.
ValidateCell = Callable[[str, int, tuple[int, int, int], Device, tuple[dict[str, np.ndarray], np.ndarray], dict],
                        float]


def run_sweep(plan: BenchPlan, machine: Machine | None = None, device: Device | None = None, *,
              measure: MeasureRun = run_once, validate: ValidateCell = validate_path,
              schedule_for: Callable[[int], Schedule] = load_schedule) -> str:
    """Run (or resume) the interleaved sweep; returns the Markdown summary table.

    ``measure``, ``validate`` and ``schedule_for`` are the GPU-side seams, the real ones by
    default: tests/test_bench_runner_cpu.py drives the sweep on the CPU with a fake device,
    deterministic fake timings and schedules shrunk to one element.
    """
    device = device or Device()
    paths = [path_class(p).name for p in plan.paths]
    schedules = {order: schedule_for(order) for order in plan.orders}
    skipped = unsupported_cells(paths, plan.orders)
    unplanned = set() if plan.cells is None else {(p, o) for p in paths for o in plan.orders
                                                  if (p, o) not in plan.cells and (p, o) not in skipped}
    for order, schedule in schedules.items():  # fail fast, before any GPU work
        for path in paths:
            if (path, order) not in skipped | unplanned:
                check_fits(order, schedule.benchmark.grid, path, device, plan.options.get(path, {}))
    if plan.graph:
        no_graph = [p for p in paths if not getattr(path_class(p), "supports_graph", True)]
        if no_graph:
            raise ComposerError(f"--graph: paths {no_graph} cannot be captured into a CUDA graph")
    for path, order in sorted(skipped):
        print(f"note: path {path} does not implement order {order}; that cell is skipped")
    skipped |= unplanned  # not asked for (plan.cells): no note
    store = ResultStore(plan.out_dir)
    store.write_provenance({**collect_provenance(), "device": repr(device), "plan": {
        "paths": paths, "orders": list(plan.orders), "rounds": plan.rounds, "graph": plan.graph,
        "sms": getattr(device, "active_sms", None)},
        # which file (and machine overlay) each order's tables came from
        "schedules": {str(order): schedule.provenance() for order, schedule in schedules.items()}})
    jobs = [j for j in interleaved_schedule(paths, plan.orders, plan.rounds, arrangement=plan.arrangement)  # type: ignore[arg-type]
            if (j.path, j.order) not in skipped]
    if not jobs:
        raise ComposerError(f"none of the paths {paths} implements any of the orders {list(plan.orders)}")
    todo = remaining_jobs(jobs, store.completed_keys())
    sampler = ClockSampler(0)
    validated: dict[tuple[str, int], float | None] = {}
    with SweepProgress(len(jobs), done=len(jobs) - len(todo)) as progress:
        for order in plan.orders:
            order_jobs = [j for j in todo if j.order == order]
            if not order_jobs:
                continue
            schedule = schedules[order]
            if plan.validate:
                grid = schedule.validation.grid
                varying = dg.make_fields(order, grid, varying=True)
                reference = (varying, dg.reference_tendency(varying, order, grid))
                for path in sorted({j.path for j in order_jobs}):
                    err = validate(path, order, grid, device, reference, plan.options.get(path, {}))
                    validated[(path, order)] = err
                    if not err <= schedule.validation.tolerance:
                        raise ComposerError(f"{path} p={order} failed validation: max|diff|/max|ref| = "
                                            f"{err:.3e} > {schedule.validation.tolerance:g}; no timing recorded")
                del varying, reference
                gc.collect()
            fields = dg.make_fields(order, schedule.benchmark.grid)
            for job in order_jobs:
                progress.start(job)
                try:
                    record = measure(schedule, job.path, fields, device, job.round_index, plan.graph,
                                     sampler, validated.get((job.path, order)), plan.options.get(job.path, {}))
                    store.append(record)
                    progress.finish(job, True, f"{record.stage_wall_s * 1e6:.1f} us/stage")
                except Exception as exc:  # a failed run is recorded, the sweep goes on; a wrong request stops it
                    if isinstance(exc, ComposerError) and not isinstance(exc, RunFailure):
                        raise
                    store.append(failed_record(job, schedule, f"{type(exc).__name__}: {exc}", plan.graph))
                    progress.finish(job, False, traceback.format_exception_only(exc)[-1].strip())
            del fields
            gc.collect()
    sampler.close()
    summaries = summarize(store.records())
    baseline = plan.baseline or paths[0]
    store.write_summary(summaries, baseline)
    kwargs = {}
    if machine is not None:
        kwargs = {"peak_flops": machine.fp64_tc_peak_flops, "bandwidth": machine.hbm_bandwidth}
    table = write_results_markdown(summaries, baseline, title=f"composer bench on {device.name}", **kwargs)
    (Path(plan.out_dir) / "summary.md").write_text(table)
    return table
