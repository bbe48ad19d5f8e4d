"""What ``composer build`` must compile for a configuration (orders x paths x arch x MMA shape).

A plan is a list of jobs, each producing one CUBIN with one kernel: CuTe DSL GEMMs (per order
and role, from the schedule's ``[paths.GEMM_CUTE]`` table or the default tiles; for GEMM_FUSED
also the carrier and fold GEMMs with their epilogue trees, per ``[paths.GEMM_FUSED]``), the NVRTC
support kernels the library paths launch (per order) and, for the fused paths, every kernel of
the variant's schedule at the order (face kernel and volume kernels, NVRTC). Every job has a
``key`` over everything that determines its CUBIN, so a rebuild recompiles exactly the jobs whose
key changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from composer.config.schedules import available_orders, load_schedule
from composer.errors import ComposerError
from composer.arch.mma import check_supported, mma_shape
from composer.gemm.cute.tiles import role_kernel, role_overrides
from composer.gemm.roles import ROLES
from composer.paths.registry import PATHS, path_class, paths_with

#: By default: the paths that cannot run without a build (the others compile at run time).
DEFAULT_PATHS = tuple(cls.name for cls in paths_with(needs_build=True))
#: Every path `composer build` has kernels for.
BUILDABLE_PATHS = tuple(cls.name for cls in PATHS if cls.build_kinds)


@dataclass(frozen=True)
class BuildJob:
    """One kernel to compile. ``kind`` is "cute", "nvrtc" or "fused"; ``spec`` is JSON-ready."""

    name: str  # entry symbol prefix and CUBIN file stem
    kind: str
    arch: str
    order: int
    spec: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps({"name": self.name, "kind": self.kind, "arch": self.arch,
                                          "spec": self.spec}, sort_keys=True).encode()).hexdigest()


def gemm_cute_table(order: int) -> dict[str, Any]:
    """The schedule's ``[paths.GEMM_CUTE]`` table ({} when absent)."""
    return dict(load_schedule(order).paths.get("GEMM_CUTE", {}))


def cute_jobs(order: int, arch: str, mma: str) -> list[BuildJob]:
    """The three role GEMMs of ``order`` for ``mma`` on ``arch`` (raises for shapes arch lacks)."""
    check_supported(mma, arch)
    table = gemm_cute_table(order)
    tiles = table.get("tiles", {})
    nq = order + 1
    jobs = []
    for role in ROLES:
        rk = role_kernel(role, nq, 1, mma, role_overrides(tiles, role, mma))
        name = f"dgemm_p{order:04d}_{role}_m{mma.replace('x', '_')}"
        jobs.append(BuildJob(name, "cute", arch, order,
                             {"role": role, "swap": rk.swap, "config": rk.config.to_dict()}))
    return jobs


#: ``composer build``'s choice of GEMM_FUSED variants: the schedule's carrier and fold, or every
#: legal one (each carrier without the fold, and z with it: what a carrier sweep times).
FUSED_VARIANTS = ("schedule", "all")


def cute_tree_jobs(order: int, arch: str, mma: str, variants: str = "schedule") -> list[BuildJob]:
    """GEMM_FUSED's GEMMs with epilogue trees at ``order`` (the carrier; x and y when they fold),
    from the schedule's settings (``composer.epilogues.settings``) with the build's ``mma``, or for
    every legal carrier and fold (``variants="all"``, each as the path resolves it when given that
    carrier and fold as options). Its plain-store GEMMs are GEMM_CUTE's, built by
    :func:`cute_jobs`. The spec records the tree."""
    from composer.epilogues.settings import fused_settings

    if variants not in FUSED_VARIANTS:
        raise ValueError(f"GEMM_FUSED variants {variants!r}: expected one of {FUSED_VARIANTS}")
    check_supported(mma, arch)
    paths = load_schedule(order).paths
    scheduled = fused_settings(order, paths, {"mma": mma})
    chosen = [scheduled]
    if variants == "all":
        for carrier, fold in [*((r, False) for r in ROLES), ("z", True)]:
            if (carrier, fold) != (scheduled.carrier, scheduled.fold):
                chosen.append(fused_settings(order, paths, {"mma": mma, "carrier": carrier, "fold": fold}))
    jobs: dict[str, BuildJob] = {}
    for settings in chosen:
        for role, gemm in settings.gemms().items():
            if gemm.plain:
                continue
            variant = ("carry_fold" if settings.fold else "carry") if role == settings.carrier else "fold"
            name = f"dgemm_p{order:04d}_{role}_m{mma.replace('x', '_')}_{variant}"
            jobs.setdefault(name, BuildJob(name, "cute", arch, order, {
                "role": role, "swap": gemm.swap, "config": gemm.config.to_dict(), "epilogue": gemm.describe(),
                "fused": {"carrier": settings.carrier, "fold": settings.fold}}))
    return list(jobs.values())


def support_jobs(order: int, arch: str) -> list[BuildJob]:
    from composer.kernels.support import DEFAULT_BLOCK, FAMILIES, symbol

    return [BuildJob(symbol(f, order + 1), "nvrtc", arch, order,
                     {"family": f, "nq": order + 1, "block": DEFAULT_BLOCK}) for f in FAMILIES]


def fused_jobs(order: int, arch: str, variant: str) -> list[BuildJob]:
    """Every kernel of ``variant``'s schedule at ``order`` (none when the variant does not implement
    the order). The spec holds the sha256 of the rendered source, which carries every schedule
    parameter, so a schedule or template change rebuilds exactly the kernels it changes."""
    from composer.fused.builder import check_arch, kernel_sources, source_sha
    from composer.fused.config import fused_config

    if order not in path_class(variant).orders:
        return []
    config = fused_config(variant, order)
    try:
        check_arch(config, arch)
    except ComposerError:
        raise ComposerError(f"path {variant} at order {order}: its schedule uses mma {config.mma}, which needs "
                            f"sm_90 or newer; {arch} has only 8x8x4 (FUSED_TC builds for {arch})") from None
    jobs = []
    for k in kernel_sources(config, arch):
        # the face kernel depends on Nq only: the same job whichever variant or schedule asks for it
        spec = ({"kernel": "face"} if k.index is None else {"variant": variant, "kernel": k.index})
        jobs.append(BuildJob(k.name, "fused", arch, order, {**spec, "source_sha": source_sha(k.source)}))
    return jobs


def plan(arch: str, mma: str, orders: list[int] | None = None,
         paths: list[str] | None = None, fused_variants: str = "schedule") -> list[BuildJob]:
    """All jobs for the configuration; orders default to every scheduled order. The MMA shape is
    checked against the arch only when a requested path reads it (``reads_mma``). ``fused_variants``:
    GEMM_FUSED's carrier and fold as scheduled, or every legal one (``"all"``)."""
    mma_shape(mma)
    orders = orders or available_orders()
    paths = [p.upper() for p in (paths or DEFAULT_PATHS)]
    unknown = [p for p in paths if p not in BUILDABLE_PATHS]
    if unknown:
        raise ValueError(f"composer build has no kernels for {unknown}; paths with kernels: {list(BUILDABLE_PATHS)}")
    classes = [path_class(p) for p in paths]
    if any(cls.reads_mma for cls in classes):
        check_supported(mma, arch)
    for cls in classes:
        cls.check_arch(arch)
    kinds = {kind for cls in classes for kind in cls.build_kinds}
    fused = [cls for cls in classes if "fused" in cls.build_kinds]
    jobs: list[BuildJob] = []
    for order in orders:
        if "cute" in kinds:
            jobs += cute_jobs(order, arch, mma)
        if "cute_tree" in kinds:
            jobs += cute_tree_jobs(order, arch, mma, fused_variants)
        if "support" in kinds:
            jobs += support_jobs(order, arch)
        for cls in fused:
            jobs += fused_jobs(order, arch, cls.name)
    for cls in fused:
        if not any(j.kind == "fused" and j.spec.get("variant") == cls.name for j in jobs):
            raise ValueError(f"path {cls.name} implements none of the orders {orders}; "
                             f"it supports {sorted(cls.orders or ())}")
    # the face kernel of an order is the same kernel for every fused variant: build it once
    faces: dict[str, str] = {}
    kept = []
    for job in jobs:
        if job.kind == "fused" and job.spec["kernel"] == "face":
            if faces.get(job.name) == job.spec["source_sha"]:
                continue
            faces[job.name] = job.spec["source_sha"]
        kept.append(job)
    jobs = kept
    names = [j.name for j in jobs]
    dups = {n for n in names if names.count(n) > 1}
    if dups:
        raise ValueError(f"build plan has duplicate kernels {sorted(dups)}")
    return jobs
