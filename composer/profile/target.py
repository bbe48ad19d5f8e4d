"""The process that ``composer profile`` runs under Nsight Compute.

Why a separate process: ncu must wrap a whole program. The program uploads the benchmark input at
the schedule's grid, runs one untimed warm-up tendency call (module loads, lazy allocations, and
kernels that only run once are kept out of the report), then brackets exactly one tendency call
with cuProfilerStart/Stop so that ``--profile-from-start off`` captures that call's kernels only.
With ``--sms N`` all of it runs in a green context of N SMs; after the profiled call (outside the
profiled range) a %smid probe on the call's stream reads back the active SM count, written as
JSON to ``--smid-out``.

    python3 -m composer.profile.target PATH ORDER [NEX NEY NEZ] [--sms N --smid-out FILE] [--option K=V]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def profile_one_call(path: str, order: int, grid: tuple[int, int, int] | None = None,
                     sms: int | None = None, options: dict[str, str] | None = None,
                     release: bool = True) -> int | None:
    """Profile one call of ``path`` (built with its path ``options``); with ``sms`` return the active
    SM count read back with %smid. ``release=False`` leaves the path, buffers and context to the
    process's exit (what the command-line entry does: see ``main``)."""
    from cuda.bindings import driver

    from composer import dg
    from composer.config.schedules import load_schedule
    from composer.paths.registry import path_class
    from composer.paths.problem import DeviceProblem, check_fits
    from composer.runtime.green import open_device
    from composer.runtime.smid import active_sm_count

    grid = grid or tuple(load_schedule(order).benchmark.grid)
    cls = path_class(path)
    cls.check_order(order)
    device = open_device(sms)
    check_fits(order, grid, cls.name, device, options)
    fields = dg.make_fields(order, grid, varying=True)
    problem = DeviceProblem.upload(fields, order, grid, device)
    del fields
    impl = cls(problem, **(options or {}))
    try:
        impl.launch(problem.ptr("q"), problem.dqdt.ptr)  # warm-up, not profiled
        problem.stream.synchronize()
        (err,) = driver.cuProfilerStart()
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuProfilerStart failed: {err}")
        impl.launch(problem.ptr("q"), problem.dqdt.ptr)
        problem.stream.synchronize()
        driver.cuProfilerStop()
        return None if sms is None else active_sm_count(problem.stream, device)
    finally:
        if release:
            impl.close()
            problem.close()
            device.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m composer.profile.target", description=__doc__)
    parser.add_argument("path")
    parser.add_argument("order", type=int)
    parser.add_argument("grid", type=int, nargs="*", help="NEX NEY NEZ (default: the schedule's)")
    parser.add_argument("--sms", type=int, default=None)
    parser.add_argument("--smid-out", type=Path, default=None)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a path option (as composer profile --option PATH.KEY=VALUE passes it)")
    args = parser.parse_args(argv)
    if len(args.grid) not in (0, 3) or (args.sms is None) != (args.smid_out is None):
        parser.error("give three grid counts or none, and --sms with --smid-out")
    grid = tuple(args.grid) if args.grid else None
    options = dict(item.split("=", 1) for item in args.option)
    active = profile_one_call(args.path, args.order, grid, args.sms, options, release=False)  # type: ignore[arg-type]
    if args.smid_out is not None:
        args.smid_out.write_text(json.dumps({"requested": args.sms, "active": active}))
    return 0


def _exit_without_teardown(status: int) -> None:
    """End the process once the profiled call is done and its results written, without the
    interpreter's teardown (modules unloaded, buffers freed, the context destroyed under ncu's
    injection). Why: at p = 63 every profile's process exited with a native crash (ncu: "The
    application returned an error code (11)") after ncu had logged every kernel of the call
    (docs/data/h200_s6/call3/cal132/FUSED_TC-p63.csv, docs/data/h200_s7/call2/prof/gf/GEMM_FUSED-p63.csv),
    which points at the teardown; the driver releases everything at exit anyway."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    _exit_without_teardown(main(sys.argv[1:]))
