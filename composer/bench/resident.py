"""Validate, then time, settings of the paths on one resident benchmark problem (GPU steps).

Why one module: the carrier sweep (``composer sweep-carrier``) and the option variants
(``tools/variants_bench.py``) both validate every candidate on the schedule's validation grid and
then time each on the benchmark grid, uploaded once, after every validation (at p = 1023 the
validation input and the benchmark problem do not fit side by side). A candidate is described by
``describe(candidate) -> (path name, options)``; the steps are the callables the pure sweeps take.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from composer.errors import ComposerError

T = TypeVar("T")


def resident_steps(order: int, calls: int, describe: Callable[[T], tuple[str, Mapping[str, Any]]],
                   errors_fail: bool = False, inspect: Callable[[T, Any], None] | None = None) -> tuple[Callable[[T], tuple[bool, str]], Callable[[T], float],
                                                      Callable[[], None]]:
    """(validate, measure, close): validation with the schedule's tolerance against one reference
    made for every candidate; timing by CUDA events around ``calls`` tendency calls after a warm-up
    (``composer.paths.timer.seconds_per_call``) on a path built for the sample and closed after it.
    ``errors_fail``: a ComposerError while validating fails that candidate instead of stopping.
    ``inspect(candidate, path)``: called after each timing, before the path closes (its device counters)."""
    from composer import dg
    from composer.api import tendency
    from composer.config.schedules import load_schedule
    from composer.paths.problem import DeviceProblem
    from composer.paths.registry import path_class
    from composer.paths.timer import seconds_per_call
    from composer.runtime import Event
    from composer.runtime.device import ensure_context
    from composer.validation import field_check

    schedule = load_schedule(order)
    device = ensure_context(None)
    start, end = Event(device), Event(device)
    checked: dict[str, Any] = {}  # the validation input and its reference, made once for every candidate
    resident: dict[str, Any] = {}

    def validate(candidate: T) -> tuple[bool, str]:
        name, options = describe(candidate)
        vgrid = schedule.validation.grid
        if not checked:
            checked["fields"] = dg.make_fields(order, vgrid, varying=True)
            checked["reference"] = dg.reference_tendency(checked["fields"], order, vgrid)

        def run_path(fields, o, g):
            return tendency(fields, o, g, path=name, device=device, **options)
        try:
            check = field_check(run_path, order, vgrid, schedule.validation.tolerance,
                                reference=checked["reference"], fields=checked["fields"])
        except ComposerError as exc:
            if not errors_fail:
                raise
            return False, f"error: {exc}"
        return check.passed, check.criterion().measured

    def measure(candidate: T) -> float:
        if "problem" not in resident:
            checked.clear()  # the validation input and reference are no longer needed on the host
            grid = schedule.benchmark.grid
            resident["problem"] = DeviceProblem.upload(dg.make_fields(order, grid), order, grid, device)
        problem = resident["problem"]
        name, options = describe(candidate)
        path = path_class(name)(problem, **options)  # the path parses its options
        try:
            seconds = seconds_per_call(path, start, end, calls)
            if inspect is not None:
                inspect(candidate, path)
            return seconds
        finally:
            problem.stream.synchronize()
            path.close()

    def close() -> None:
        if "problem" in resident:
            resident.pop("problem").close()

    return validate, measure, close
