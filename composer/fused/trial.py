"""Validate and time fused-path configurations on the GPU: the device half of a schedule sweep.

Why in the package: ``composer.fused.sweep run`` (and the GPU tests) validate every candidate
against the NumPy reference before timing it, on the machine that has the GPU, where only the
installed package is guaranteed to exist.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from composer import dg
from composer.fused.config import SUPPORTED_ORDERS

#: The field-to-field tolerance of the operator contract.
TOLERANCE = 1e-12


def run_case(order: int, grid: tuple[int, int, int], variants: list[str], device, timing_calls: int = 0,
             extra: dict | None = None, on_start: Callable[[str], None] | None = None,
             on_record: Callable[[dict], None] | None = None, stage_dt: float | None = None) -> list[dict]:
    """Validate (and optionally time) fused configurations on one (order, grid); a record each.

    ``variants`` run their schedules; ``extra`` maps a label ``"VARIANT@name"`` to a callable
    ``order -> FusedConfig``. Each is checked against the NumPy reference on the point-varying
    input (``dqdt`` is NaN-filled first, so a point a kernel skips fails), then, with
    ``timing_calls``, timed by CUDA events after two warm-up calls. A failing configuration is
    recorded (``error``) and the rest still run. ``on_start(label)`` and ``on_record(record)`` are
    called around each configuration (progress, incremental results).

    ``stage_dt``: time as ``composer bench`` does (``time_stages``), each tendency call followed by
    the RK update with this time step, instead of back-to-back calls. Why: what a call finds in L2
    depends on the kernel before it, in the bench the RK update (which ends on the highest
    elements); back-to-back calls hand over from the call's own last kernel, so a table whose first
    kernel starts where the RK update ended (``descending``) is timed fairly only this way."""
    from composer.paths.registry import path_class
    from composer.paths.problem import DeviceProblem
    from composer.runtime import Event

    t0 = time.time()
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    scale = float(np.max(np.abs(ref)))
    t_ref = time.time() - t0
    problem = DeviceProblem.upload(fields, order, grid, device)
    q_start = fields["q"] if stage_dt is not None else None  # the RK stages move q: put back after each
    del fields
    nan = np.full(ref.shape, np.nan)
    records = []
    try:
        todo = [(v, None) for v in variants] + list((extra or {}).items())
        for label, config in todo:
            name = label.split("@")[0]
            if order not in SUPPORTED_ORDERS[name]:
                continue
            if on_start:
                on_start(label)
            rec: dict = {"variant": label, "order": order, "grid": list(grid), "ref_s": round(t_ref, 1)}
            try:
                opts = {"config": config(order)} if config else {}
                path = path_class(name)(problem, **opts)
                rec["kernels"] = [{"name": k.name, "regs": k.num_regs, "local_bytes": k.local_bytes}
                                  for k in path.kernels]
                problem.dqdt.copy_from(nan, problem.stream)
                path.launch(problem.ptr("q"), problem.dqdt.ptr)
                out = problem.download(problem.dqdt)
                rec["rel_err"] = float(np.max(np.abs(out - ref)) / scale)
                rec["passed"] = bool(rec["rel_err"] <= TOLERANCE)
                if timing_calls and stage_dt is not None:
                    rec["us_per_call"] = 1e6 * time_stages(path, stage_dt, timing_calls, q_start)
                    rec["timing_calls"], rec["timing"] = timing_calls, "stages"
                elif timing_calls:
                    for _ in range(2):
                        path.launch(problem.ptr("q"), problem.dqdt.ptr)
                    start, stop = Event(device), Event(device)
                    start.record(problem.stream)
                    for _ in range(timing_calls):
                        path.launch(problem.ptr("q"), problem.dqdt.ptr)
                    stop.record(problem.stream)
                    stop.synchronize()
                    rec["us_per_call"] = 1e3 * start.elapsed_ms(stop) / timing_calls
                    rec["timing_calls"], rec["timing"] = timing_calls, "calls"
                path.close()
            except Exception as exc:  # record and go on: one failing variant must not hide the rest
                rec["error"] = f"{type(exc).__name__}: {exc}"
                rec["passed"] = False
            records.append(rec)
            if on_record:
                on_record(rec)
    finally:
        problem.close()
    return records


def time_stages(path, dt: float, calls: int, q_start) -> float:
    """Device seconds per tendency call of ``path`` in SSP-RK3 stages (``composer bench``'s step loop:
    each call bracketed by CUDA events, the RK update after it), after one untimed step; the
    problem's q is restored to ``q_start`` afterwards, so that the next configuration validates on
    the input the reference was computed from."""
    from composer.kernels.support import SupportKernels
    from composer.paths.stepper import Stepper
    from composer.paths.timer import EventTimer

    problem = path.problem
    timer = EventTimer(problem.device, problem.stream)
    try:
        stepper = Stepper(path, dt, SupportKernels.load(problem.nq, problem.device), timer)
        stepper.step()
        problem.stream.synchronize()
        timer.reset()
        for n in range(calls):
            stepper.stage(n % 3)
        problem.stream.synchronize()
        timer.flush()
        seconds = timer.total_ms / 1e3 / timer.intervals
    finally:
        timer.close()
        problem.fields["q"].copy_from(q_start, problem.stream)
        problem.stream.synchronize()
    return seconds
