"""What ``composer build`` must compile for a configuration (orders x paths x arch x MMA shape).

A plan is a list of jobs, each producing one CUBIN with one kernel: CuTe DSL GEMMs (per order
and role, from the schedule's ``[paths.GEMM_CUTE]`` table or the default tiles, in the MMA shape
GEMM_CUTE loads at run time unless one is given; for GEMM_FUSED the GEMMs it launches, the carrier
and fold GEMMs with their epilogue trees, per ``[paths.GEMM_FUSED]``), the NVRTC support kernels
the library paths launch (per order) and, for the fused paths, every kernel of the variant's
schedule at the order (face kernel and volume kernels, NVRTC). Every job has a ``key`` over everything that determines
its CUBIN, so a rebuild recompiles exactly the jobs whose key changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from composer.config.schedules import available_orders, load_schedule
from composer.errors import ComposerError
from composer.arch.mma import UnsupportedShapeError, arch_number, check_supported, mma_shape
from composer.gemm.cute.tiles import role_kernel, role_overrides
from composer.gemm.roles import ROLES
from composer.paths.registry import PATHS, path_class, paths_with

#: By default: the paths that cannot run without a build (the others compile at run time).
DEFAULT_PATHS = tuple(cls.name for cls in paths_with(needs_build=True))
#: Every path `composer build` has kernels for.
BUILDABLE_PATHS = tuple(cls.name for cls in PATHS if cls.build_kinds)


class PlanError(ComposerError, ValueError):
    """A build configuration that cannot be planned: an unknown path or target, or nothing to build."""


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


def gemm_cute_mma(order: int) -> str:
    """The MMA shape GEMM_CUTE runs at ``order`` without an ``mma`` option (its schedule's, else the
    path's default): what ``composer build`` compiles when no ``--mma`` is given."""
    from composer.paths.gemm_cute import resolve_settings

    return resolve_settings(order, {})[0]


def cute_jobs(order: int, arch: str, mma: str | None = None) -> list[BuildJob]:
    """The three role GEMMs of ``order`` for ``mma`` (default: ``gemm_cute_mma(order)``) on ``arch``;
    raises UnsupportedShapeError for a shape ``arch`` lacks."""
    given = mma is not None
    mma = mma if given else gemm_cute_mma(order)
    try:
        check_supported(mma, arch)
    except UnsupportedShapeError as exc:
        if given:
            raise
        raise UnsupportedShapeError(f"order {order}: GEMM_CUTE runs mma {mma} (its schedule's "
                                    f"[paths.GEMM_CUTE] mma, else the default): {exc}") from None
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


#: ``composer build``'s choice of GEMM_FUSED variants: the schedule's carrier, fold and flux source,
#: or every legal one (each carrier without the fold and z with it, each with the flux from arrays
#: or formed in the mainloop: what a carrier sweep times).
FUSED_VARIANTS = ("schedule", "all", "tiles")


def gemm_fused_jobs(order: int, arch: str, mma: str | None = None, variants: str = "schedule") -> list[BuildJob]:
    """The CuTe GEMMs GEMM_FUSED launches at ``order``: the carrier's and (with the fold) x's and
    y's with their epilogue trees, and the plain-store GEMMs it runs on CuTe (GEMM_CUTE's kernels,
    the same jobs as :func:`cute_jobs`), from the settings the path resolves
    (``composer.epilogues.settings``; ``mma`` default: GEMM_FUSED's, else GEMM_CUTE's shape), for
    the schedule's carrier and fold or every legal one (``variants="all"``, each as the path
    resolves it given that carrier and fold as options), or the schedule's variant with every
    carrier tile and MMA shape the carrier sweep tries (``variants="tiles"``,
    ``composer.epilogues.carrier_tiles``; those kernels' names end in the tile's tag, so that one
    build holds them all). A tree job's spec records the tree."""
    from composer.epilogues.settings import fused_settings, legal_variants

    if variants not in FUSED_VARIANTS:
        raise PlanError(f"GEMM_FUSED variants {variants!r}: expected one of {FUSED_VARIANTS}")
    from composer.paths.gemm_fused import GemmFusedPath

    paths = load_schedule(order).paths
    given = {"mma": mma} if mma is not None else {}
    # the schedule's overlap_formed: its first GEMM forms its flux (on CuTe whatever the library says)
    scheduled, formed = GemmFusedPath.resolved_settings(order, given)
    check_supported(scheduled.mma, arch)
    chosen = [(scheduled, "")]
    if variants == "all":
        for carrier, fold, flux in legal_variants():
            if (carrier, fold, flux, False) != (scheduled.carrier, scheduled.fold, scheduled.flux, scheduled.parity):
                chosen.append((fused_settings(order, paths, {**given, "carrier": carrier, "fold": fold,
                                                             "flux": flux, "parity": False}), ""))
        if (order + 1) % 2 == 0:  # parity (odd orders): each carrier, fold off, flux from arrays
            for carrier in ROLES:
                if (carrier, True) != (scheduled.carrier, scheduled.parity):
                    chosen.append((fused_settings(order, paths, {**given, "carrier": carrier, "fold": False,
                                                                 "flux": "array", "parity": True}), ""))
    elif variants == "tiles":
        from composer.epilogues.carrier_sweep import candidates
        from composer.epilogues.carrier_tiles import tile_tag

        for c in candidates(order, paths, arch, mma, tiles_only=True, async_epilogue=True):
            if not c.shipped and c.settings is not None:
                chosen.append((c.settings, "_" + tile_tag(c.tile)))
    jobs: dict[str, BuildJob] = {}
    for settings, tagged in chosen:
        shape = settings.mma.replace("x", "_")
        try:
            gemms = settings.gemms((formed,) if formed and settings is scheduled else ())
        except ValueError:
            if settings is scheduled:
                raise
            continue  # not a legal variant here (e.g. the factor tile overflows shared memory)
        for role, gemm in gemms.items():
            spec = {"role": role, "swap": gemm.swap, "config": gemm.config.to_dict()}
            # the flux q * vel formed in the mainloop: at the fragment loads (_qv) or in the stage (_qs)
            formed = ("_qs" if gemm.config.product_staged else "_qv") if gemm.forms_flux else ""
            if gemm.plain and not formed:
                if settings.library[role] == "cute":
                    jobs.setdefault(f"dgemm_p{order:04d}_{role}_m{shape}",
                                    BuildJob(f"dgemm_p{order:04d}_{role}_m{shape}", "cute", arch, order, spec))
                continue
            variant = "" if gemm.plain else "_" + (
                ("carry_fold" if settings.fold else "carry_split" if settings.parity else "carry")
                if role == settings.carrier else "fold")
            tag = tagged if role == settings.carrier else ""  # only the carrier's tile varies
            name = f"dgemm_p{order:04d}_{role}_m{shape}{variant}{formed}{tag}"
            if not gemm.plain:
                spec = {**spec, "epilogue": gemm.describe()}
            jobs.setdefault(name, BuildJob(name, "cute", arch, order, {
                **spec, "fused": {"carrier": settings.carrier, "fold": settings.fold, "flux": settings.flux,
                                  **({"parity": True} if settings.parity else {})}}))
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


def compiler_targets(kind: str) -> list[str]:
    """The SASS targets the compiler of a job ``kind`` accepts, as the compiler itself reports them:
    the CuTe DSL's for "cute", NVRTC's supported architectures for "support" and "fused"."""
    if kind in ("cute", "cute_tree"):
        from cutlass.base_dsl.enums import Arch

        return [a.name for a in Arch]
    from composer.runtime.nvrtc import supported_archs

    return [f"sm_{n}" for n in supported_archs()]


def check_target(arch: str, kinds: set[str]) -> None:
    """Raise PlanError unless every compiler the job ``kinds`` need can target ``arch``
    (``sm_91`` is spelled like a target but none exists; the compilers would fail mid-build)."""
    number = arch_number(arch)
    for kind in sorted(kinds):
        targets = compiler_targets(kind)
        # NVRTC lists bare numbers and accepts the a/f feature suffixes on them; the DSL lists all
        if arch not in targets and (kind in ("cute", "cute_tree") or f"sm_{number}" not in targets):
            compiler = "the CuTe DSL" if kind in ("cute", "cute_tree") else "NVRTC"
            raise PlanError(f"{compiler} cannot compile for {arch}; its targets: {', '.join(targets)}")


def plan(arch: str, mma: str | None = None, orders: list[int] | None = None,
         paths: list[str] | None = None, fused_variants: str = "schedule") -> list[BuildJob]:
    """All jobs for the configuration; orders default to every scheduled order. ``mma`` is the
    shape of the paths that read one (``reads_mma``: GEMM_CUTE, GEMM_FUSED; default: each order's,
    ``gemm_cute_mma``, and GEMM_FUSED's own); it is checked against the arch only when a requested
    path reads it. ``fused_variants``: GEMM_FUSED's carrier and fold as scheduled, or every legal
    one (``"all"``)."""
    orders = orders or available_orders()
    paths = [p.upper() for p in (paths or DEFAULT_PATHS)]
    unknown = [p for p in paths if p not in BUILDABLE_PATHS]
    if unknown:
        raise PlanError(f"composer build has no kernels for {unknown}; paths with kernels: {list(BUILDABLE_PATHS)}")
    classes = [path_class(p) for p in paths]
    kinds = {kind for cls in classes for kind in cls.build_kinds}
    check_target(arch, kinds)
    if mma is not None and any(cls.reads_mma for cls in classes):
        check_supported(mma_shape(mma), arch)
    for cls in classes:
        cls.check_arch(arch)
    fused = [cls for cls in classes if "fused" in cls.build_kinds]
    jobs: list[BuildJob] = []
    for order in orders:
        if "cute" in kinds:
            jobs += cute_jobs(order, arch, mma)
        if "cute_tree" in kinds:
            jobs += gemm_fused_jobs(order, arch, mma, fused_variants)
        if "support" in kinds:
            jobs += support_jobs(order, arch)
        for cls in fused:
            jobs += fused_jobs(order, arch, cls.name)
    for cls in fused:
        if not any(j.kind == "fused" and j.spec.get("variant") == cls.name for j in jobs):
            raise PlanError(f"path {cls.name} implements none of the orders {orders}; "
                            f"it supports {sorted(cls.orders or ())}")
    # the face kernel of an order is the same kernel for every fused variant, and GEMM_FUSED's
    # plain GEMMs are GEMM_CUTE's: an identical job (same name and key) is built once
    seen: set[tuple[str, str]] = set()
    kept = []
    for job in jobs:
        if (job.name, job.key) in seen:
            continue
        seen.add((job.name, job.key))
        kept.append(job)
    jobs = kept
    names = [j.name for j in jobs]
    dups = {n for n in names if names.count(n) > 1}
    if dups:
        raise PlanError(f"build plan has duplicate kernels {sorted(dups)}")
    return jobs
