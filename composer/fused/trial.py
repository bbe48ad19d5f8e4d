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
             on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """Validate (and optionally time) fused configurations on one (order, grid); a record each.

    ``variants`` run their schedules; ``extra`` maps a label ``"VARIANT@name"`` to a callable
    ``order -> FusedConfig``. Each is checked against the NumPy reference on the point-varying
    input (``dqdt`` is NaN-filled first, so a point a kernel skips fails), then, with
    ``timing_calls``, timed by CUDA events after two warm-up calls. A failing configuration is
    recorded (``error``) and the rest still run. ``on_start(label)`` and ``on_record(record)`` are
    called around each configuration (progress, incremental results)."""
    from composer.paths.registry import path_class
    from composer.paths.problem import DeviceProblem
    from composer.runtime import Event

    t0 = time.time()
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    scale = float(np.max(np.abs(ref)))
    t_ref = time.time() - t0
    problem = DeviceProblem.upload(fields, order, grid, device)
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
                if timing_calls:
                    for _ in range(2):
                        path.launch(problem.ptr("q"), problem.dqdt.ptr)
                    start, stop = Event(device), Event(device)
                    start.record(problem.stream)
                    for _ in range(timing_calls):
                        path.launch(problem.ptr("q"), problem.dqdt.ptr)
                    stop.record(problem.stream)
                    stop.synchronize()
                    rec["us_per_call"] = 1e3 * start.elapsed_ms(stop) / timing_calls
                    rec["timing_calls"] = timing_calls
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
