"""Path GEMM_FUSED: GEMM_CUTE's mainloops, tiles, shapes and library assignment, with the
lift-and-assembly work moved into the epilogue of one CuTe GEMM, the carrier (paper §3.5, S14.3).

The carrier never writes its own derivative: its epilogue tree reads the other derivatives, the
metric weights and the face flux and writes dqdt, so the separate lift kernel and one volume
array disappear. With the fold (carrier z) the x and y epilogues build the weighted partial sum in
one array, which the carrier reads instead of two derivatives and three weights. Which GEMM
carries, the fold, the carrier's tile and the MMA shape are per-order schedule data
(``[paths.GEMM_FUSED]``, resolved by :mod:`composer.epilogues.settings`); the options
``carrier=``/``fold=``/``mma=``/``library=``/``carrier_tile=`` override them.

Beyond the paper, ``flux = "mainloop"`` has each GEMM form its flux operand (q*u, q*v, q*w) while
staging it (``GemmConfig.product``; ``flux = "staged"`` once per element in shared memory,
``GemmConfig.product_staged``): the volume_flux kernel and its three arrays disappear.

The kernels are declared to the scheduler with the arrays the trees read, so the chain follows
from the data flow: x -> y -> z with the fold, the two non-carriers concurrent without it, the
face flux beside them feeding the carrier. Every CuTe kernel comes from a ``composer build``
directory (``composer build --paths GEMM_FUSED``), the fused ones matched by their tree.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Mapping

from composer import counts
from composer.arch.machines import Machine
from composer.arch.mma import check_supported
from composer.config.schedules import load_schedule
from composer.epilogues.kernels import FusedGemm
from composer.epilogues.settings import FLUX_SOURCES, FusedSettings, FusedSettingsError, fused_settings
from composer.epilogues.tree import text
from composer.errors import ComposerError
from composer.gemm.cute.tiles import TILE_KEYS
from composer.gemm.roles import ROLES
from composer.paths.base import Launcher, PathOption
from composer.paths.gemm_cute import GemmCutePath, entry_gemm_config, find_gemm_entry
from composer.paths.library import unfused_workspace
from composer.paths.overlap import (OVERLAP_OPTIONS, VELOCITY, face_after, flag_option as bool_option, overlap_of,
                                    role_option as carrier_option)

#: The overlap's option keys (GEMM_FUSED's own settings ignore them).
OVERLAP_KEYS = frozenset(OVERLAP_OPTIONS)
from composer.paths.program import face_bytes, roof_seconds, volume_bytes
from composer.runtime.manifest import KernelEntry
from composer.sched import KernelNode




def flux_option(value: str) -> str:
    source = str(value).strip().lower()
    if source not in FLUX_SOURCES:
        raise ValueError(f"expected one of {', '.join(FLUX_SOURCES)}, got {value!r}")
    return source


#: Tile keys that are booleans (the rest are integers).
BOOLEAN_TILE_KEYS = ("swap", "epilogue_prefetch_split", "fragment_pipeline")


def tile_option(value: Mapping[str, Any] | str) -> dict[str, Any]:
    """A carrier tile given as an option: a mapping, or ``bm=128,bn=64,stages=3,swap=false``
    (keys: ``composer.gemm.cute.tiles.TILE_KEYS``)."""
    if isinstance(value, Mapping):
        pairs = dict(value)
    else:
        pairs = {}
        for item in filter(None, str(value).split(",")):
            key, sep, raw = item.partition("=")
            if not sep:
                raise ValueError(f"expected KEY=VALUE items, got {item!r}")
            name = key.strip()
            try:
                pairs[name] = bool_option(raw) if name in BOOLEAN_TILE_KEYS else int(raw)
            except ValueError:
                raise ValueError(f"tile key {name}: {raw!r} is not "
                                 + ("a boolean" if name in BOOLEAN_TILE_KEYS else "an integer")) from None
    from composer.epilogues.kernels import CARRIER_STORE_GROUP_KEY

    allowed = (*TILE_KEYS, CARRIER_STORE_GROUP_KEY)
    unknown = sorted(set(pairs) - set(allowed))
    if unknown:
        raise ValueError(f"unknown tile keys {unknown} (allowed: {', '.join(allowed)})")
    if CARRIER_STORE_GROUP_KEY in pairs and int(pairs[CARRIER_STORE_GROUP_KEY]) < 1:
        raise ValueError(f"tile key {CARRIER_STORE_GROUP_KEY}: {pairs[CARRIER_STORE_GROUP_KEY]!r} is not a positive integer")
    return pairs


def schedule_paths(order: int) -> dict[str, Any]:
    """The schedule's ``[paths]`` tables at ``order`` ({} where no schedule exists)."""
    try:
        return dict(load_schedule(order).paths)
    except ComposerError:
        return {}


def settings_for(order: int, options: Mapping[str, Any] | None = None) -> FusedSettings:
    """GEMM_FUSED's settings at ``order`` from the schedule and parsed options; a setting that
    cannot run is a ComposerError naming the schedule key or the option."""
    try:
        return fused_settings(order, schedule_paths(order), options)
    except FusedSettingsError as exc:
        where = (f"option {exc.key.split('.')[0]}" if exc.source == "option"
                 else f"schedule p{order:04d}.toml: paths.GEMM_FUSED.{exc.key}")
        raise ComposerError(f"path GEMM_FUSED at p={order}: {where}: {exc.message}") from None


class GemmFusedPath(GemmCutePath):
    name = "GEMM_FUSED"
    build_kinds = frozenset({"cute_tree", "support"})
    options = MappingProxyType({
        **GemmCutePath.options,
        "parity": PathOption(bool_option, "the non-carriers as two half-size GEMMs on split fluxes (composer.parity), "
                                          "the carrier contracting the split basis and merging them in its tree; "
                                          "odd orders, fold off, flux array (default: the schedule's, else false)"),
        "carrier": PathOption(carrier_option, "which GEMM carries the lift and assembly: x, y or z "
                                              "(default: the schedule's, else z)"),
        "fold": PathOption(bool_option, "fold the metric weights into the x and y epilogues (carrier z only; "
                                        "default: the schedule's, else from Nq = 64)"),
        "carrier_tile": PathOption(tile_option, "the carrier's tile over GEMM_CUTE's for its role, e.g. "
                                                "bm=128,bn=64,stages=3 (default: the schedule's carrier_tile)"),
        "flux": PathOption(flux_option, "where the GEMMs' flux operands come from: array (the volume_flux "
                                        "kernel), mainloop (each GEMM forms q*u, q*v, q*w at its fragment loads) or "
                                        "staged (once per element in shared memory); "
                                        "every GEMM then a CuTe one; default: the schedule's, else array)"),
    })

    @classmethod
    def plan_settings(cls, order: int, **options: Any) -> str:
        """GEMM_CUTE's settings and the carrier, fold and flux source (the same node names carry
        different work: the carrier's GEMM is the slow one)."""
        s, formed = cls.resolved_settings(order, options)
        kernels = ",".join(f"{r}:{g.config.tag}" for r, g in sorted(s.gemms((formed,) if formed else ()).items())
                           if s.library[r] == "cute")
        return (f"mma={s.mma} library=" + ",".join(f"{r}:{s.library[r]}" for r in ROLES)
                + f" carrier={s.carrier} fold={'on' if s.fold else 'off'} flux={s.flux} kernels={kernels}"
                + cls.overlap_tag(order, options) + cls.parity_tag(order, options))

    @classmethod
    def overlap_options(cls, order: int, options: Mapping[str, Any]) -> dict[str, Any]:
        """The flux formed in the mainloop has no volume flux to overlap, and parity's is split (the
        overlap's product kernels write it whole): the schedule's overlap keys then do not apply (an
        option asking for the overlap is an error)."""
        settings = settings_for(order, {k: v for k, v in options.items() if k not in OVERLAP_KEYS})
        if settings.forms_flux or settings.parity:
            given = next((k for k in sorted(OVERLAP_KEYS) if options.get(k)), None)
            if given is not None:
                why = ("parity splits the fluxes, which the overlap's product kernels write whole" if settings.parity
                       else f"flux = {settings.flux} forms the products in the GEMMs")
                need = "parity off" if settings.parity else "flux = array"
                raise ComposerError(f"path GEMM_FUSED at p={order}: option {given} needs {need} ({why})")
            return {}
        return super().overlap_options(order, options)

    @classmethod
    def overlap_roles(cls, order: int, options: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
        """The carrier runs last, so its product never goes first; with the fold x is first in the
        chain (x -> y -> z)."""
        settings = settings_for(order, {k: v for k, v in options.items() if k not in OVERLAP_KEYS})
        plan = settings.plan
        if plan.fold:
            return ("x",), "x"
        return tuple(r for r in ROLES if r != plan.carrier), None

    @classmethod
    def formed_role(cls, order: int, options: Mapping[str, Any]) -> str | None:
        """The overlap's first GEMM when it forms its own flux operand (``overlap_formed``), else None.
        Machine-independent: the first role follows from the options, the schedule and the data flow
        (the partition's fit on a device is checked where the plan is built)."""
        resolved = cls.overlap_options(order, options)
        sms = resolved.get("overlap_sms") or 0
        if not sms or not resolved.get("overlap_formed"):
            return None
        allowed, fixed = cls.overlap_roles(order, options)
        overlap = overlap_of(resolved, sms + 1, cls.name, allowed, fixed)
        return overlap.first if overlap is not None else None

    @classmethod
    def resolved_settings(cls, order: int, options: Mapping[str, Any]) -> tuple[FusedSettings, str | None]:
        """The settings and the role that forms its flux under ``overlap_formed`` (None: none). That
        GEMM runs on CuTe whatever the library assignment says (cuBLAS cannot form a product)."""
        settings = settings_for(order, {k: v for k, v in options.items() if k not in OVERLAP_KEYS})
        formed = None if settings.forms_flux else cls.formed_role(order, options)
        if formed is None:
            return settings, None
        return dataclasses.replace(settings, library={**settings.library, formed: "cute"}), formed

    @classmethod
    def parity(cls, order: int, options: Mapping[str, Any]) -> bool:
        """The settings' parity (option, else the schedule's table); ``overlap_options`` refuses the
        overlap beside it."""
        return cls.resolved_settings(order, options)[0].parity

    @classmethod
    def split_roles(cls, order: int, options: Mapping[str, Any]) -> tuple[str, ...]:
        """The non-carriers: the carrier must produce each node's derivative for its tree."""
        carrier = cls.resolved_settings(order, options)[0].carrier
        return tuple(r for r in ROLES if r != carrier)

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid,
                        options: Mapping[str, Any] | None = None) -> tuple[counts.MemoryItem, ...]:
        """GEMM's workspace less the carrier's derivative (and, with the fold, less the second of
        the two non-carrier arrays: x and y accumulate into one; with the flux formed in the
        mainloop, less the three fluxes), under the settings ``options`` resolve."""
        settings, formed = cls.resolved_settings(order, options or {})
        plan = settings.plan
        fluxes, _, fstar = unfused_workspace(order, grid)
        if formed:  # the first GEMM forms its flux: two flux arrays
            fluxes = dataclasses.replace(fluxes, count=2, note=f"{fluxes.note}; {formed}'s formed by its GEMM")
        outputs = plan.intermediates
        note = ("partial = Ex Gx + Ey Gy, written by x, updated in place by y, read by the z carrier"
                if plan.fold else f"{', '.join(outputs)}: the non-carriers' results, read by the {plan.carrier} carrier")
        gemm_outputs = counts.MemoryItem("GEMM outputs", len(outputs), counts.volume_array_bytes(order, grid), note)
        items = (gemm_outputs, fstar) if settings.forms_flux else (fluxes, gemm_outputs, fstar)
        return items + cls.parity_items(order, options or {})

    @classmethod
    def program(cls, order: int, num_elements: int, machine: Machine, **options: Any) -> list[KernelNode]:
        nq, ne = order + 1, num_elements
        settings, formed = cls.resolved_settings(order, options)
        plan, in_mainloop = settings.plan, settings.forms_flux
        vol, face = volume_bytes(nq, ne), face_bytes(nq, ne)
        _, surface_flux = cls.flux_nodes(nq, ne, machine)
        fluxes = [] if in_mainloop else cls.volume_flux_nodes(nq, ne, machine, options)
        split = cls.split_roles(order, options) if settings.parity else ()

        def gemm(role: str) -> KernelNode:
            gemm_flop = nq * ne * nq**3 * (1 if role in split else 2)  # a split role: two half-size products
            reads = plan.reads(role)
            kind = "carrier" if role == plan.carrier else ("gemm_fold" if plan.fused(role) else "gemm")
            operands = ("q", VELOCITY[role]) if in_mainloop or role == formed else (f"flux_{role}",)
            nbytes = vol * (1 + len(operands) + sum(r != "fstar" for r in reads)) + (face if "fstar" in reads else 0)
            return KernelNode(f"gemm_{role}", kind, ("D", *operands, *reads), (plan.outputs[role],),
                              cost=roof_seconds(machine, gemm_flop, nbytes))

        *others, carrier = plan.roles
        overlap = cls.overlap_settings(order, machine.sm_count, options)  # None with the flux in the mainloop
        return [*fluxes, *(gemm(r) for r in others), face_after(overlap, surface_flux), gemm(carrier)]

    # --- a device instance --------------------------------------------------------------------

    def allocate_gemm_operands(self) -> None:
        """The fluxes when they come from arrays; none when the GEMMs form them in the mainloop
        (they read q and the velocities). ``workspace_items`` counts the same arrays."""
        pb = self.problem
        self.settings, self.formed = self.resolved_settings(pb.order, self.options)
        self.fused_plan = self.settings.plan
        self.fused_gemms: dict[str, FusedGemm] = self.settings.gemms((self.formed,) if self.formed else ())
        self.flux_in_mainloop = self.settings.forms_flux
        if self.flux_in_mainloop:
            self.flux = {}
        else:  # under overlap_formed the first GEMM's flux array does not exist
            self.flux = {r: pb.allocate(f"{self.name}.flux_{r}", pb.volume_bytes) for r in ROLES if r != self.formed}

    def allocate_gemm_outputs(self) -> None:
        """The non-carriers' outputs only (``workspace_items`` counts the same arrays)."""
        pb = self.problem
        self.outputs = {name: pb.allocate(f"{self.name}.{name}", pb.volume_bytes)
                        for name in self.fused_plan.intermediates}

    def gemm_settings(self) -> tuple[str, dict[str, str]]:
        try:
            check_supported(self.settings.mma, self.problem.device.arch)
        except ValueError as exc:
            raise ComposerError(f"path GEMM_FUSED at p={self.problem.order}: {exc}") from None
        return self.settings.mma, dict(self.settings.library)

    def gemm_entry(self, entries: list[KernelEntry], role: str) -> KernelEntry:
        gemm = self.fused_gemms[role]
        if gemm.plain and not gemm.forms_flux:
            return super().gemm_entry(entries, role)
        pb = self.problem
        entry = find_gemm_entry(entries, pb.order, role, self.mma, pb.device.arch,
                                "store" if gemm.plain else text(gemm.tree), gemm.config.product, gemm.config,
                                None if gemm.plain else gemm.store_group, gemm.config.product_staged)
        built = entry_gemm_config(entry)
        if built != gemm.config:
            raise ComposerError(f"{entry.symbol}: built with tile {built.tag}, the settings need {gemm.config.tag}; "
                                f"build it: composer build --paths GEMM_FUSED --orders {pb.order} (with the tile in "
                                f"paths.GEMM_FUSED.carrier_tile) or --fused-variants tiles")
        if gemm.plain:
            return entry
        recorded = entry.config["epilogue"]
        want = gemm.describe()
        stale = [key for key in ("aux_slots", "face", "store_group") if recorded.get(key) != want[key]]
        if stale:
            raise ComposerError(f"{entry.symbol}: built with {', '.join(f'{k}={recorded.get(k)!r}' for k in stale)}, "
                                f"the schedule needs {', '.join(f'{k}={want[k]!r}' for k in stale)}; "
                                f"rebuild: composer build --paths GEMM_FUSED --orders {pb.order}")
        return entry

    def _kernels_not_run(self) -> set[str]:
        """The library structure's kernels this path does not launch."""
        return {"lift", "volume_flux"} if self.flux_in_mainloop else {"lift"}

    def launch_blocks(self) -> dict[str, int]:
        return {n: b for n, b in super().launch_blocks().items() if n not in self._kernels_not_run()}

    def resident_blocks(self) -> dict[str, int]:
        return {n: b for n, b in super().resident_blocks().items() if n not in self._kernels_not_run()}

    def bind(self, q_ptr: int, dqdt_ptr: int) -> Mapping[str, Launcher]:
        pb, plan = self.problem, self.fused_plan
        arrays = {**{name: pb.ptr(name) for name in ("Ex", "Ey", "Ez")}, "fstar": self.fstar.ptr, "dqdt": dqdt_ptr,
                  **{name: buffer.ptr for name, buffer in self.outputs.items()}}
        launches: dict[str, Launcher] = {n: launch for n, launch in self.flux_launches(q_ptr).items()
                                         if n not in self._kernels_not_run()}
        for role in ROLES:
            gemm = self.fused_gemms[role]
            out = arrays[plan.outputs[role]]
            aux = tuple(arrays[name] for name in gemm.aux_slots)
            face = arrays[gemm.face] if gemm.face else 0
            # the flux in the mainloop: the kernel reads q and multiplies by the velocity itself
            forms = self.flux_in_mainloop or role == self.formed
            flux, factor = (q_ptr, pb.ptr(VELOCITY[role])) if forms else (None, 0)
            launches[f"gemm_{role}"] = (lambda s, role=role, out=out, aux=aux, face=face, flux=flux, factor=factor:
                                        self.launch_gemm(role, s, out, aux, face, flux, factor))
        return launches
