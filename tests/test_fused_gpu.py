"""GPU validation of the fused paths against composer.dg.reference_tendency (point-varying input).

Pytest (marked ``gpu``): every variant at every order it supports, on a small non-cubic grid and on
the schedule's benchmark grid, max|dqdt - ref| / max|ref| <= 1e-12.

Run as a script (``PYTHONPATH=. python3 tests/test_fused_gpu.py OUTDIR [deadline_s]``) it does the
same validation plus a CUDA-event timing of each path at the benchmark grid, with a wall-clock
deadline, and writes ``OUTDIR/fused_gpu.json`` incrementally (what the device runs).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from composer import dg
from composer.fused.config import SUPPORTED_ORDERS, VARIANTS
from composer.fused.trial import TOLERANCE, run_case  # noqa: F401  (the scripts below use both)
SMALL_GRIDS: dict[int, tuple[int, int, int]] = {
    7: (3, 2, 2), 15: (2, 2, 1), 31: (2, 1, 1), 63: (1, 2, 1), 127: (2, 1, 1), 255: (1, 1, 1),
    511: (1, 1, 1), 767: (1, 1, 1)}


def varying_fields(order: int, grid: tuple[int, int, int]) -> dict[str, np.ndarray]:
    """The point-varying input (make_fields evaluates its separable factors on 1D axis nodes,
    so this is quick even at p = 767)."""
    return dg.make_fields(order, grid, varying=True)


def bench_grid(order: int) -> tuple[int, int, int]:
    from composer.config.schedules import load_schedule

    return load_schedule(order).benchmark.grid


def cases() -> list[tuple[int, tuple[int, int, int], str]]:
    """(order, grid, kind) for every supported order: the small grid, then the benchmark grid."""
    from composer.config.schedules import load_schedule

    orders = sorted(set().union(*SUPPORTED_ORDERS.values()))
    small = [(o, SMALL_GRIDS[o], "small") for o in orders]
    bench = [(o, load_schedule(o).benchmark.grid, "benchmark") for o in orders]
    multi = [c for c in small if c[1] != bench_grid(c[0])]
    # the single-element orders last: their host reference dominates the run time
    return multi + sorted(bench, key=lambda c: (c[0] >= 511, c[0]))


def assert_candidates_validate(device, order: int, grid_kind: str | tuple[int, int, int], found: list) -> None:
    """Every ``(label, FusedConfig)`` of ``found`` (a candidate family's) against the reference on the
    point-varying input at the order's small non-cubic grid ("small"), its Table S29 grid ("s29") or the
    grid given, max|diff|/max|ref| <= 1e-12, none failing to launch: the GPU check the candidate
    families share."""
    from composer.config.schedules import load_schedule

    assert found
    if isinstance(grid_kind, tuple):
        grid = grid_kind
    else:
        grid = SMALL_GRIDS[order] if grid_kind == "small" else load_schedule(order).benchmark.grid
    extra = {f"{config.variant}@{name}": (lambda o, c=config: c) for name, config in found}
    records = run_case(order, grid, [], device, extra=extra)
    assert len(records) == len(found)
    for rec in records:
        assert "error" not in rec, rec
        assert rec["rel_err"] <= TOLERANCE, rec


def permuting_bricks(grid: tuple[int, int, int], pairs: bool = False) -> tuple[int, int, int] | None:
    """Bricks whose order is not the default one on ``grid`` (a small test grid, where the bricks the
    families rank for the benchmark grid cover it whole and so take the elements in the default order);
    None on a grid no brick permutes (a single row of elements). ``pairs``: bricks of whole x pairs (an
    even bx) that permute the pairs."""
    from composer.fused.order import element_sequence

    ne = grid[0] * grid[1] * grid[2]
    for bricks in ((2, 2, 1), (1, 2, 2), (2, 1, 2), (2, 2, 2), (1, 1, 2)):
        if pairs and bricks[0] % 2:
            continue
        if not np.array_equal(element_sequence(grid, bricks, pairs), np.arange(ne)):
            return bricks
    return None


def assert_family_validates(order: int, grid: str | tuple[int, int, int], family) -> None:
    """Every candidate ``family(variant, order)`` gives for FUSED, FUSED_TC and FUSED_TC16 through
    ``assert_candidates_validate`` on ``grid`` ("s29" or a small grid). On a small grid a bricked table takes
    bricks that permute it (``permuting_bricks``: the ranked ones cover a small grid whole, the default
    order), and a paired table runs only where the x extent pairs (the path refuses it, given explicitly,
    elsewhere)."""
    import dataclasses

    from composer.runtime import default_device

    found = [(name, config) for variant in ("FUSED", "FUSED_TC", "FUSED_TC16") for name, config in family(variant, order)]
    if grid != "s29":
        bricked = any(c.element_bricks for _, c in found)  # a family that orders its elements (not descending's)
        found = [(name, dataclasses.replace(c, element_bricks=permuting_bricks(grid, c.x_pairs)) if c.element_bricks else c)
                 for name, c in found if not c.x_pairs or grid[0] % 2 == 0]
        assert not bricked or permuting_bricks(grid) is None or any(c.element_bricks for _, c in found)
    assert_candidates_validate(default_device(), order, grid, found)


def run_schedule_table(variant: str, order: int, grid: tuple[int, int, int], device, refused=None):
    """The path of ``variant`` built from the order's schedule table (as the path resolves it on this mesh)
    and launched once into a NaN-filled dqdt; returns (the table the path ran, max|diff|/max|ref|).
    ``refused``: a (config, regex) the same path must refuse, given explicitly, on this mesh first."""
    from composer.errors import ConfigError
    from composer.paths.problem import DeviceProblem
    from composer.paths.registry import path_class

    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    problem = DeviceProblem.upload(fields, order, grid, device)
    try:
        if refused is not None:
            with pytest.raises(ConfigError, match=refused[1]):
                path_class(variant)(problem, config=refused[0])
        path = path_class(variant)(problem)
        problem.dqdt.copy_from(np.full(ref.shape, np.nan), problem.stream)
        path.launch(problem.ptr("q"), problem.dqdt.ptr)
        out = problem.download(problem.dqdt)
        path.close()
    finally:
        problem.close()
    return path.config, float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))


@pytest.fixture(scope="module")
def device():
    from composer.runtime import default_device

    return default_device()


@pytest.mark.gpu
@pytest.mark.parametrize("order,grid,kind", cases())
def test_fused_paths_match_reference(device, order: int, grid: tuple[int, int, int], kind: str) -> None:
    records = run_case(order, grid, list(VARIANTS), device)
    assert [rec["variant"] for rec in records] == [v for v in VARIANTS if order in SUPPORTED_ORDERS[v]]
    for rec in records:
        print(rec)
        assert "error" not in rec, rec
        assert rec["rel_err"] <= TOLERANCE, rec


def _tc16_k8(order: int):
    """FUSED_TC16's schedule with the m16n8k8 shape (the shape trial of issue 4)."""
    import dataclasses

    from composer.fused.config import fused_config

    return dataclasses.replace(fused_config("FUSED_TC16", order), mma="16x8x8")


def _build_one(job: tuple[str, int, str | None]) -> str:
    from composer.fused.builder import build
    from composer.fused.config import fused_config

    variant, order, mma = job
    config = _tc16_k8(order) if mma else fused_config(variant, order)
    build(config, "sm_90")
    return f"{variant}{'@' + mma if mma else ''} p={order}"


def prebuild(workers: int = 16) -> None:
    """Fill the NVRTC cache in parallel (a no-op when the carried cache matches this NVRTC)."""
    from concurrent.futures import ProcessPoolExecutor

    jobs = [(v, o, None) for v in VARIANTS for o in sorted(SUPPORTED_ORDERS[v])]
    jobs += [("FUSED_TC16", o, "16x8x8") for o in sorted(SUPPORTED_ORDERS["FUSED_TC16"])]
    t0 = time.time()
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_build_one, jobs))
    print(f"prebuild: {len(jobs)} builds in {time.time() - t0:.1f} s", flush=True)


def main(outdir: str, deadline_s: float = 200.0) -> int:
    from composer.runtime import default_device

    start = time.time()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    prebuild()
    device = default_device()
    log: list[dict] = []
    failures = 0
    for order, grid, kind in cases():
        if time.time() - start > deadline_s:
            log.append({"order": order, "grid": list(grid), "skipped": "deadline"})
            continue
        calls = 0 if kind == "small" else (3 if order >= 511 else 10)
        recs = run_case(order, grid, list(VARIANTS), device, timing_calls=calls,
                        extra={"FUSED_TC16@16x8x8": _tc16_k8})
        for r in recs:
            r["kind"] = kind
            r["elapsed_s"] = round(time.time() - start, 1)
            failures += not r.get("passed", False)
            print(json.dumps(r), flush=True)
        log.extend(recs)
        (out / "fused_gpu.json").write_text(json.dumps(log, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 200.0))


def _cluster_configs() -> dict[str, object]:
    """Clustered kernels (issue 16): at p = 15 and 31 the emulated tables of tests/test_fused_cluster.py
    (each split axis the template allows, clusters of 2 and 4), at p = 127 and 255 the first candidate
    of each variant's cluster family (the sweep's reference), at p = 7 and 15 trace clusters."""
    from composer.fused.candidates import cluster_candidates
    from composer.fused.config import parse_table
    from tests.test_fused_cluster import SPLITS, XY_Z_4, _table

    out: dict[str, object] = {f"FUSED_TC@{name} p15": parse_table("FUSED_TC", 15, _table(kernels))
                              for name, kernels in SPLITS.items()}
    out["FUSED_TC@xy|z c4 p31"] = parse_table("FUSED_TC", 31, _table(XY_Z_4))
    # trace clusters of consecutive elements (p = 7's small grid has 12: the last cluster of 8 padded)
    from tests.test_fused_cluster import _trace_cluster

    for variant, order, size in (("FUSED_TC", 7, 8), ("FUSED", 7, 2), ("FUSED_TC16", 7, 4), ("FUSED_TC16", 15, 2),
                                 ("FUSED_TC", 15, 4)):
        out[f"{variant}@trace cluster {size} p{order}"] = _trace_cluster(variant, order, size)
    for variant in ("FUSED_TC", "FUSED_TC16"):
        for order in (127, 255):
            found = cluster_candidates(variant, order)
            if found:
                out[f"{variant}@cluster p{order}"] = found[0][1]
            inline = [c for _, c in found if c.flux == "inline"]
            if inline:
                out[f"{variant}@cluster inline p{order}"] = inline[0]
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("label", sorted(_cluster_configs()))
def test_clustered_fused_kernels_match_reference(device, label: str) -> None:
    """A thread-block cluster holding a split axis (distributed shared memory) against the reference
    on the point-varying input, on a small non-cubic grid (several clusters per element row)."""
    config = _cluster_configs()[label]
    grid = SMALL_GRIDS[config.order]
    records = run_case(config.order, grid, [], device, extra={label: lambda order, c=config: c})
    assert len(records) == 1 and "error" not in records[0], records
    assert records[0]["rel_err"] <= TOLERANCE, records[0]
