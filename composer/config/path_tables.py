"""The ``[paths.NAME]`` tables of a schedule: which path names a schedule may configure and how
each one's table is checked when the schedule is loaded.

Why at load time: a table is read by its path only when that path runs (or is built), so a typo
(``[paths.FUSED_TC61]``, ``swap = "yes"``, ``library = {x = "cuet"}``) used to pass until a GPU run
much later, or forever where the key is optional. Every check raises a ConfigError naming the
schedule file and the dotted key.

:data:`PATH_TABLES` is the one list of configurable path names and, per name, its table's check;
a new path (GEMM_FUSED) is one more entry. The fused tables are checked by the fused paths' own
parser (:func:`composer.fused.config.fused_config`), so their schema is stated once, there; the
GEMM_CUTE table's keys are stated here, with the roles, libraries and tile fields taken from the
GEMM code and each tile override checked by the kernel configuration's own ``validate``.

Those parsers are imported inside the checks: ``composer.fused.config`` and the GEMM modules
import this package, and ``composer.config`` must not import ``composer.paths``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from composer.arch.mma import SHAPES
from composer.config.fields import Table, boolean, non_negative_int, one_of, positive_int


@dataclass(frozen=True)
class PathContext:
    """What a table's check needs besides the table: its path's name, the schedule's order and file,
    and every ``[paths.*]`` table of the schedule (FUSED_DFMA's table refers to FUSED_TC's)."""

    name: str
    order: int
    file: str
    paths: Mapping[str, Mapping[str, Any]]


TableCheck = Callable[[Table, PathContext], None]


def _check_library(table: Table) -> None:
    """``library``: role -> library (GEMM_CUTE's assignment, and GEMM_FUSED's override of it)."""
    from composer.gemm.cute.sweep import LIBRARIES
    from composer.gemm.roles import ROLES

    library = table.optional_table("library")
    if library is not None:
        for role in ROLES:
            library.optional(role, one_of(LIBRARIES))
        library.reject_unknown()


def _no_settings(table: Table, context: PathContext) -> None:
    """A path without per-order settings (yet): only an empty table is accepted."""
    table.reject_unknown()


def _fused(table: Table, context: PathContext) -> None:
    """The fused paths' parser, exactly as the path and the build call it (FUSED_DFMA included:
    it must read ``schedule_of = "FUSED_TC"`` and FUSED_TC's table must parse)."""
    from composer.fused.config import UnsupportedOrderError, fused_config

    try:
        fused_config(context.name, context.order, context.paths, context.file)
    except UnsupportedOrderError as exc:
        raise table.error("", str(exc)) from None


#: The overlapped flux's keys (composer.paths.overlap), shared by GEMM_CUTE's and GEMM_FUSED's tables.
OVERLAP_KEYS = ("overlap_sms", "overlap_first", "overlap_face", "overlap_formed")


def _overlap(table: Table, allowed_first: tuple[str, ...] | None = None, why: str = "",
             forms: bool = False) -> None:
    """``overlap_sms`` (SMs of the partition the two confined products run on beside the first
    GEMM; 0: off) and ``overlap_first`` (the role whose product runs first, alone; only with
    ``overlap_sms``; one of ``allowed_first`` where the data flow restricts it)."""
    from composer.gemm.roles import ROLES

    sms = table.optional("overlap_sms", non_negative_int)
    first = table.optional("overlap_first", one_of(ROLES))
    face = table.optional("overlap_face", boolean)
    formed = table.optional("overlap_formed", boolean)
    if formed and not forms:
        raise table.error("overlap_formed", "needs a GEMM that forms its flux operand (GEMM_FUSED); these GEMMs "
                                            "read the flux arrays")
    if formed and not sms:
        raise table.error("overlap_formed", "needs overlap_sms (the partition's SMs)")
    if first is not None and not sms:
        raise table.error("overlap_first", "needs overlap_sms (the partition's SMs)")
    if face and not sms:
        raise table.error("overlap_face", "needs overlap_sms (the partition's SMs)")
    if first is not None and allowed_first is not None and first not in allowed_first:
        raise table.error("overlap_first", f"{first}'s GEMM cannot run first here ({why})")


def _gemm_cute(table: Table, context: PathContext) -> None:
    """``mma`` (an MMA shape of ``composer.arch.mma``, spelled ``16x8x4``), ``library`` (role ->
    library), ``tiles`` (per-role overrides of the kernel tile, optionally per MMA shape:
    ``tiles.<role>`` or ``tiles.<shape>.<role>``, as ``composer build`` reads them) and the
    overlapped flux's ``overlap_sms`` / ``overlap_first``."""
    from composer.gemm.roles import ROLES

    _overlap(table)
    mma = table.optional("mma", one_of(SHAPES))
    _check_library(table)
    tiles = table.optional_table("tiles")
    if tiles is not None:
        for key in list(tiles.data):
            if key in ROLES:
                _role_tiles(tiles.table(key), key, mma, context)
            elif key in SHAPES:
                per_shape = tiles.table(key)
                for role in ROLES:
                    role_table = per_shape.optional_table(role)
                    if role_table is not None:
                        _role_tiles(role_table, role, key, context)
                per_shape.reject_unknown()
            else:
                raise tiles.error(key, f"expected a role ({', '.join(ROLES)}) or an MMA shape "
                                       f"({', '.join(SHAPES)})")
    table.reject_unknown()


def _tile_field(key: str) -> Callable[[Any], Any]:
    """The type of a tile key: ``swap`` a boolean, ``epilogue_prefetch`` k-tiles (0: off), the
    rest positive integers."""
    return {"swap": boolean, "epilogue_prefetch": non_negative_int, "epilogue_prefetch_split": boolean,
            "fragment_pipeline": boolean, "async_epilogue_tiles": non_negative_int,
            "min_blocks": non_negative_int}.get(
        key, positive_int)


def _role_tiles(table: Table, role: str, mma: str | None, context: PathContext) -> None:
    """One role's tile override: typed fields, then the kernel configuration they make checked by
    ``GemmConfig.validate`` for the shape they apply to (none named: the build's ``--mma`` decides,
    so only the types are checked here)."""
    from composer.gemm.cute.tiles import CARRIER_ONLY_KEYS, TILE_KEYS, role_kernel

    for key in TILE_KEYS:
        if key not in CARRIER_ONLY_KEYS:  # GEMM_CUTE's store kernels read no array to prefetch
            table.optional(key, _tile_field(key))
    table.reject_unknown()
    if mma is None:
        return
    try:
        role_kernel(role, context.order + 1, 1, mma, dict(table.data))
    except ValueError as exc:
        raise table.error("", f"with mma {mma}: {exc}") from None


def _gemm_fused(table: Table, context: PathContext) -> None:
    """``carrier`` (x, y or z), ``fold`` (bool; only with carrier z), ``mma``, ``library`` (role ->
    library, over GEMM_CUTE's; a GEMM with a fused epilogue must stay ``cute``), ``carrier_tile``
    (the carrier's tile fields over GEMM_CUTE's tile for that role), ``store_group`` (sites a
    tree kernel computes before storing them) and ``flux`` ("array", or "mainloop" / "staged": the
    GEMMs form q times the velocity themselves, at the fragment loads or once per staged element,
    every GEMM then a CuTe one) and ``parity`` (bool: the non-carriers split, the carrier merging; odd
    orders, fold off, flux from arrays), checked by the resolver the
    path and the build use (``composer.epilogues.settings``); the carrier's kernel configuration is
    checked by ``GemmConfig.validate`` when an MMA shape is named (else the build's ``--mma``
    decides, and only the types are checked here)."""
    from composer.epilogues.settings import FLUX_SOURCES, FusedSettingsError, fused_settings
    from composer.gemm.cute.tiles import TILE_KEYS
    from composer.gemm.roles import ROLES

    table.optional("carrier", one_of(ROLES))
    table.optional("fold", boolean)
    table.optional("store_group", positive_int)
    for key in OVERLAP_KEYS:  # checked once the settings are resolved, below
        table.optional(key, lambda value: value)
    table.optional("flux", one_of(FLUX_SOURCES))
    table.optional("parity", boolean)
    mma = table.optional("mma", one_of(SHAPES))
    _check_library(table)
    tile = table.optional_table("carrier_tile")
    if tile is not None:
        from composer.epilogues.kernels import CARRIER_STORE_GROUP_KEY

        for key in TILE_KEYS:
            tile.optional(key, _tile_field(key))
        tile.optional(CARRIER_STORE_GROUP_KEY, positive_int)
        tile.reject_unknown()
    table.reject_unknown()
    try:
        settings = fused_settings(context.order, context.paths)
    except FusedSettingsError as exc:
        raise table.error(exc.key, exc.message) from None
    plan = settings.plan
    if settings.forms_flux and table.data.get("overlap_sms"):
        raise table.error("overlap_sms", f"needs flux = array (flux = {settings.flux} forms the products in the GEMMs)")
    if settings.parity and table.data.get("overlap_sms"):
        raise table.error("overlap_sms", "parity and overlap_sms do not combine (the overlap's product kernels write "
                                         "the fluxes unsplit)")
    allowed = ("x",) if plan.fold else tuple(r for r in ROLES if r != plan.carrier)
    _overlap(table, allowed, "the fold runs x first" if plan.fold else f"{plan.carrier} carries: it runs last",
             forms=True)
    if mma is None and context.paths.get("GEMM_CUTE", {}).get("mma") is None:
        return
    try:
        settings.gemms()
    except ValueError as exc:
        key = "carrier_tile" if tile is not None else ""
        raise table.error(key, f"with mma {settings.mma}, carrier {settings.carrier}: {exc}") from None


#: Path name -> the check of its ``[paths.NAME]`` table; the only place path names are listed for
#: schedules (``composer.paths`` names the runnable paths; the two lists should be one).
PATH_TABLES: dict[str, TableCheck] = {
    "GEMM": _no_settings,
    "GEMM_CUTE": _gemm_cute,
    "GEMM_FUSED": _gemm_fused,
    "EINSUM": _no_settings,
    "FUSED": _fused,
    "FUSED_TC": _fused,
    "FUSED_DFMA": _fused,
    "FUSED_TC16": _fused,
}


def check_path_tables(paths: Table, order: int) -> dict[str, dict[str, Any]]:
    """Check every table of a schedule's ``[paths]`` and return them verbatim (name -> dict), in
    file order; an unknown name is an error listing the known ones."""
    raw: dict[str, dict[str, Any]] = {}
    for name in paths.data:
        if name not in PATH_TABLES:
            raise paths.error(name, f"unknown path (known: {', '.join(PATH_TABLES)})")
        raw[name] = dict(paths.table(name).data)
    for name in raw:
        PATH_TABLES[name](paths.table(name), PathContext(name, order, paths.file_of(name), raw))
    return raw
