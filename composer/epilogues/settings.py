"""GEMM_FUSED's per-order settings: which GEMM carries, whether the fold is on, the carrier's tile,
the MMA shape and who runs each GEMM, from the schedule's ``[paths.GEMM_FUSED]`` table, GEMM_CUTE's
table and the path's options.

One resolver serves the schedule check at load (``composer.config.path_tables``), the build plan
and the path, so a setting means the same everywhere. Precedence, per setting: the option, then
``[paths.GEMM_FUSED]``, then (mma, library, tiles) ``[paths.GEMM_CUTE]`` (GEMM_FUSED shares its
mainloops, tiles and library assignment), then the defaults: carrier z, the fold from Nq = 64
(paper S14.3) when z carries. ``carrier_tile`` is the tile of the table's carrier: a carrier
chosen by option runs GEMM_CUTE's tile for its role.

Library: every GEMM with a fused epilogue (the carrier; x and y when they fold) runs the CuTe
kernel, since cuBLAS has no epilogue, and so does every GEMM when the flux is formed in the
mainloop (``flux = "mainloop"``); the others follow GEMM_CUTE's assignment. Naming cuBLAS for such
a GEMM in GEMM_FUSED's own ``library`` (table or option) is an error, as is a fold with a carrier
other than z.

Parity (``parity = true``, beyond the paper; odd orders): the volume flux kernel writes every flux
split, the non-carriers run as two half-size products each and write their derivatives split, and
the carrier contracts its split flux against the split basis and merges the others in its tree
(``composer.epilogues.paper``). It needs the fold off (its default then) and the flux from arrays.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from composer.epilogues.kernels import DEFAULT_STORE_GROUP, FusedGemm, fused_gemms
from composer.epilogues.paper import FOLD_BOTH_IN_Y_NQ, FusedPlan, fused_plan
from composer.errors import ComposerError
from composer.gemm.cute.sweep import DEFAULT_LIBRARY
from composer.gemm.cute.tiles import DEFAULT_MMA, role_overrides
from composer.gemm.roles import ROLES

DEFAULT_CARRIER = "z"
#: Where the GEMMs' flux operands come from: the volume_flux kernel's three arrays (the paper), or
#: each GEMM forming ``q * u`` (``q * v``, ``q * w``) from its staged ``q`` and velocity tiles (beyond
#: the paper): "mainloop" at every fragment load, "staged" once per element in shared memory after the
#: tile lands (``GemmConfig.product_staged``).
FLUX_SOURCES = ("array", "mainloop", "staged")
DEFAULT_FLUX = "array"
#: Settings a ``[paths.GEMM_FUSED]`` table may hold (``library`` overrides GEMM_CUTE's per role).
TABLE_KEYS = ("carrier", "fold", "carrier_tile", "mma", "library", "store_group", "flux", "parity")


class FusedSettingsError(ComposerError, ValueError):
    """A GEMM_FUSED setting that cannot run. ``source`` is "schedule" or "option", ``key`` the
    dotted key inside ``[paths.GEMM_FUSED]`` (or the option's name)."""

    def __init__(self, source: str, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.source, self.key, self.message = source, key, message


def legal_variants() -> list[tuple[str, bool, str]]:
    """Every (carrier, fold, flux) the resolver accepts: each carrier without the fold and z with
    it, each with the flux from arrays or formed in the mainloop (what ``composer build``
    compiles with ``fused_variants="all"`` and the carrier sweep times)."""
    return [(carrier, fold, flux) for flux in FLUX_SOURCES
            for carrier, fold in [*((r, False) for r in ROLES), ("z", True)]]


def default_fold(nq: int, carrier: str) -> bool:
    """The paper's fold: from Nq = 64 on, with the z GEMM carrying."""
    return carrier == "z" and nq >= FOLD_BOTH_IN_Y_NQ


@dataclass(frozen=True)
class FusedSettings:
    order: int
    mma: str
    carrier: str
    fold: bool
    library: Mapping[str, str]
    tiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # GEMM_CUTE's, for mma
    carrier_tile: Mapping[str, Any] = field(default_factory=dict)
    store_group: int = DEFAULT_STORE_GROUP  # sites a tree kernel computes before their stores
    flux: str = DEFAULT_FLUX  # "array": the volume_flux kernel's arrays; "mainloop"/"staged": formed by the GEMMs
    parity: bool = False  # the non-carriers split (composer.parity), the carrier merging them

    @property
    def forms_flux(self) -> bool:
        """Whether the GEMMs form their flux operands (no volume_flux kernel, no flux arrays)."""
        return self.flux != "array"

    @property
    def plan(self) -> FusedPlan:
        return fused_plan(self.carrier, self.fold, self.order + 1, self.parity)

    def gemms(self, formed_roles: Collection[str] = ()) -> dict[str, FusedGemm]:
        """Each role's kernel (GEMM_CUTE's tile, the carrier's overridden by ``carrier_tile``);
        ``formed_roles`` (with flux = "array"): roles that form their flux once per staged element all
        the same (the overlap's first GEMM under ``overlap_formed``)."""
        if formed_roles and self.forms_flux:
            raise ValueError(f"formed_roles {sorted(formed_roles)}: every GEMM already forms its flux "
                             f"(flux = {self.flux})")
        return fused_gemms(self.plan, self.mma, self.tiles, self.carrier_tile, self.store_group,
                           flux_in_mainloop=self.forms_flux,
                           product_staged=self.flux == "staged" or bool(formed_roles), formed_roles=formed_roles)


def _pick(key: str, options: Mapping[str, Any], fused: Mapping[str, Any]) -> tuple[Any, str]:
    """(value, source) of ``key`` from the options, else GEMM_FUSED's table (None if neither)."""
    if options.get(key) is not None:
        return options[key], "option"
    return fused.get(key), "schedule"


def fused_settings(order: int, paths: Mapping[str, Mapping[str, Any]],
                   options: Mapping[str, Any] | None = None) -> FusedSettings:
    """The settings of order ``order`` from a schedule's ``[paths]`` tables and parsed options
    (``carrier``, ``fold``, ``mma``, ``library`` as role -> library, ``flux``, ``carrier_tile`` as
    tile key -> value over GEMM_CUTE's tile of the carrier)."""
    options = options or {}
    fused = paths.get("GEMM_FUSED", {})
    cute = paths.get("GEMM_CUTE", {})
    carrier, carrier_from = _pick("carrier", options, fused)
    carrier = carrier or DEFAULT_CARRIER
    if carrier not in ROLES:
        raise FusedSettingsError(carrier_from, "carrier", f"expected one of {', '.join(ROLES)}, got {carrier!r}")
    parity, parity_from = _pick("parity", options, fused)
    parity = bool(parity)
    if parity and (order + 1) % 2:
        raise FusedSettingsError(parity_from, "parity", f"the parity decomposition needs an odd order, got p = {order}")
    # parity asked for by option overrides the table's fold and flux (the defaults it cannot run with)
    overrides = parity and parity_from == "option"
    fold, fold_from = _pick("fold", options, fused)
    if overrides and fold_from == "schedule":
        fold = False
    fold = (default_fold(order + 1, carrier) and not parity) if fold is None else bool(fold)
    if fold and carrier != "z":  # only when asked for: the default fold needs carrier z
        raise FusedSettingsError(fold_from, "fold", f"the fold needs the z GEMM to carry (x and y feed it), "
                                                 f"carrier is {carrier}")
    if fold and parity:
        raise FusedSettingsError(fold_from if fold_from == "option" else parity_from, "parity",
                                 "parity needs the fold off (the fold's x and y epilogues would weight split "
                                 "derivatives, which hold no node's value)")
    mma = str(options.get("mma") or fused.get("mma") or cute.get("mma") or DEFAULT_MMA)
    plan = fused_plan(carrier, fold, order + 1, parity)
    flux, flux_from = _pick("flux", options, fused)
    flux = DEFAULT_FLUX if overrides and flux_from == "schedule" else flux or DEFAULT_FLUX
    if flux not in FLUX_SOURCES:
        raise FusedSettingsError(flux_from, "flux", f"expected one of {', '.join(FLUX_SOURCES)}, got {flux!r}")
    if parity and flux != "array":
        raise FusedSettingsError(flux_from if flux_from == "option" else parity_from, "parity",
                                 f"parity needs flux = \"array\" (the volume flux kernel splits the fluxes; "
                                 f"a GEMM forming its own product, flux = \"{flux}\", would not)")

    def needs_cute(role: str) -> str | None:
        """Why ``role`` must run the CuTe kernel (None: either library can)."""
        if plan.fused(role):
            what = "the carrier" if role == carrier else "a folding GEMM"
            return f"{role} is {what} of GEMM_FUSED and must be a CuTe GEMM ({{lib}} has no epilogue)"
        if flux != "array":
            return f"{role} forms its flux operand in the mainloop (flux = \"{flux}\"), which {{lib}} cannot"
        return None

    library = {**DEFAULT_LIBRARY, **cute.get("library", {})}
    for assignment, source in ((fused.get("library") or {}, "schedule"), (options.get("library") or {}, "option")):
        for role, lib in assignment.items():
            reason = needs_cute(role)
            if reason and lib != "cute":
                raise FusedSettingsError(source, f"library.{role}", reason.format(lib=lib))
            library[role] = lib
    for role in ROLES:
        if needs_cute(role):
            library[role] = "cute"
    tiles_table = cute.get("tiles", {})
    tiles = {role: role_overrides(tiles_table, role, mma) for role in ROLES}
    # the table's carrier tile is its carrier's: another carrier (an option) keeps GEMM_CUTE's tile,
    # unless the options name the tile too
    own = carrier == (fused.get("carrier") or DEFAULT_CARRIER)
    if options.get("carrier_tile") is not None:
        carrier_tile = dict(options["carrier_tile"])
    else:
        carrier_tile = dict(fused.get("carrier_tile") or {}) if own else {}
    store_group = int(fused.get("store_group") or DEFAULT_STORE_GROUP)
    return FusedSettings(order, mma, carrier, fold, library, tiles, carrier_tile, store_group, flux, parity)
