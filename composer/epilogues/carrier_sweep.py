"""The carrier sweep: every legal GEMM_FUSED setting of one order (carrier x|y|z, the fold with z,
the flux from arrays or formed in the mainloop, the carrier's tile: the schedule's and a few
alternatives the arch accepts), which of them the build directory holds, each validated and then
timed in interleaved rounds; the fastest validated one is written into ``[paths.GEMM_FUSED]``.

Pure logic: the GPU steps come in as callables (``validate(candidate) -> (passed, detail)``,
``measure(candidate) -> seconds per call``), so the choice is tested with fakes. A candidate that
fails validation is never timed, and so never written.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from composer.bench.interleave import interleaved_samples
from composer.config.schedule_edit import set_table_lines
from composer.epilogues.carrier_tiles import prefetch_tag, tile_neighbourhood, tile_variants
from composer.epilogues.kernels import CARRIER_STORE_GROUP_KEY
from composer.epilogues.settings import FusedSettings, fused_settings, legal_variants
from composer.epilogues.tree import text
from composer.errors import ComposerError
from composer.gemm.cute.tiles import TILE_KEYS, role_kernel

#: The tile of the schedule (GEMM_CUTE's for the carrier's role, over it the table's carrier_tile).
SHIPPED = "shipped"


@dataclass(frozen=True)
class Candidate:
    """One GEMM_FUSED setting. ``tile`` is the carrier's whole tile; ``shipped`` whether it is the
    schedule's. ``settings`` is None and ``skipped`` says why when the setting cannot be built."""

    carrier: str
    fold: bool
    flux: str
    tile: Mapping[str, Any]
    shipped: bool
    settings: FusedSettings | None = None
    skipped: str = ""
    missing: tuple[str, ...] = field(default=())  # kernels absent from the build directory
    mma: str = ""  # the MMA shape when it is not the schedule's ("": the schedule's)

    @property
    def tile_label(self) -> str:
        t = self.tile
        if self.shipped:
            return SHIPPED
        warps = f".w{t['warps_m']}x{t['warps_n']}" if "warps_m" in t else ""
        prefetch = f".{prefetch_tag(t)}" if prefetch_tag(t) else ""
        group = f".g{t['store_group']}" if t.get("store_group") else ""
        pipelined = ".fp" if t.get("fragment_pipeline") else ""
        asynchronous = (f".ae{t['async_epilogue_tiles']}" if t.get("async_epilogue_tiles") else "") \
            + (f".b{t['async_buffers']}" if t.get("async_buffers", 2) != 2 else "") \
            + (f".mb{t['min_blocks']}" if t.get("min_blocks") else "")
        stagger = f".st{t['stagger_us']}" if t.get("stagger_us") else ""
        return (f"bm{t['bm']}.bn{t['bn']}.bk{t['bk']}{warps}.s{t['stages']}{prefetch}{group}{pipelined}"
                f"{asynchronous}{stagger}")

    @property
    def label(self) -> str:
        return (f"carrier={self.carrier},fold={'on' if self.fold else 'off'},flux={self.flux},"
                f"tile={self.tile_label}" + (f",mma={self.mma}" if self.mma else ""))

    @property
    def runnable(self) -> bool:
        return self.settings is not None and not self.missing

    def options(self) -> dict[str, Any]:
        """The GEMM_FUSED path options that run this setting."""
        options = {"carrier": self.carrier, "fold": self.fold, "flux": self.flux, "carrier_tile": dict(self.tile)}
        return {**options, "mma": self.mma} if self.mma else options


def tile_of(config: Any, swap: bool) -> dict[str, Any]:
    """A GemmConfig's tile as the schedule's tile keys."""
    return {**{key: getattr(config, key) for key in TILE_KEYS if key != "swap"}, "swap": swap}


def tile_alternatives(tile: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A small neighbourhood of ``tile`` (``composer.epilogues.carrier_tiles.tile_neighbourhood``)."""
    return tile_neighbourhood(tile)


def _checked(order: int, paths: Mapping[str, Any], options: Mapping[str, Any], arch: str) -> tuple[FusedSettings | None, str]:
    """The settings of ``options`` when every kernel builds for ``arch``, else (None, why)."""
    try:
        settings = fused_settings(order, paths, options)
        for gemm in settings.gemms().values():
            gemm.config.validate(arch)
    except ValueError as exc:  # GemmConfigError, UnsupportedShapeError, FusedSettingsError
        return None, str(exc)
    return settings, ""


def candidates(order: int, paths: Mapping[str, Any], arch: str, mma: str | None = None,
               tiles_only: bool = False, async_epilogue: bool = False) -> list[Candidate]:
    """Every legal setting of ``order`` (schedule ``[paths]`` tables ``paths``) on ``arch``, the
    schedule's carrier tile first for each variant, then its neighbourhood; for the schedule's own
    carrier, fold and flux also the library tiles with each swept MMA shape
    (``composer.epilogues.carrier_tiles``). ``tiles_only``: the schedule's variant alone (what
    ``composer build --fused-variants tiles`` compiles). A setting whose shipped tile cannot be
    built (the mainloop flux's factor tile overflowing shared memory, say) is kept with its reason;
    an alternative that does not validate is left out (it was never a real candidate), and so is one
    whose kernels are those of a setting already listed (a staged-flux carrier gives up stages to
    keep its blocks per SM: its 3- and 4-stage tiles can be the same 2-stage kernel)."""
    given = {"mma": mma} if mma else {}
    scheduled = fused_settings(order, paths, given)
    out = []
    for carrier, fold, flux in legal_variants():
        own = (carrier, fold, flux) == (scheduled.carrier, scheduled.fold, scheduled.flux)
        if tiles_only and not own:
            continue
        variant = {**given, "carrier": carrier, "fold": fold, "flux": flux}
        base = fused_settings(order, paths, variant)  # GEMM_CUTE's tile, the table's when it carries
        own_tile = {k: v for k, v in base.carrier_tile.items() if k != CARRIER_STORE_GROUP_KEY}
        rk = role_kernel(carrier, order + 1, 1, base.mma, {**base.tiles.get(carrier, {}), **own_tile})
        shipped = tile_of(rk.config, rk.swap)
        if CARRIER_STORE_GROUP_KEY in base.carrier_tile:
            shipped[CARRIER_STORE_GROUP_KEY] = int(base.carrier_tile[CARRIER_STORE_GROUP_KEY])
        settings, why = _checked(order, paths, {**variant, "carrier_tile": shipped}, arch)
        out.append(Candidate(carrier, fold, flux, shipped, True, settings, why))
        seen = {_kernels_of(settings)} if settings is not None else set()
        pairs = (tile_variants(shipped, arch, base.mma, k_extent=order + 1, async_epilogue=async_epilogue) if own
                 else [(base.mma, t) for t in tile_alternatives(shipped)])
        for shape, tile in pairs:
            options = {**variant, "carrier_tile": tile, **({"mma": shape} if shape != base.mma else {})}
            settings, why = _checked(order, paths, options, arch)
            if settings is not None and _kernels_of(settings) not in seen:
                seen.add(_kernels_of(settings))
                out.append(Candidate(carrier, fold, flux, tile, False, settings,
                                     mma=shape if shape != base.mma else ""))
    return out


def _kernels_of(settings: FusedSettings) -> tuple:
    """What a setting runs: each role's kernel configuration, tree and store group."""
    return tuple((role, g.config, g.swap, g.store_group, str(g.tree)) for role, g in sorted(settings.gemms().items()))


def missing_kernels(candidate: Candidate, entries: Sequence[Any], arch: str) -> tuple[str, ...]:
    """The kernels of ``candidate`` the build manifest ``entries`` lack (a CuTe GEMM absent, or
    built with another tile), as ``role: what``."""
    from composer.paths.gemm_cute import entry_gemm_config, find_gemm_entry

    settings = candidate.settings
    assert settings is not None
    missing = []
    for role, gemm in settings.gemms().items():
        if settings.library[role] != "cute":
            continue
        epilogue = "store" if gemm.plain else text(gemm.tree)
        try:
            entry = find_gemm_entry(list(entries), settings.order, role, settings.mma, arch, epilogue,
                                    gemm.config.product, gemm.config, None if gemm.plain else gemm.store_group,
                                    gemm.config.product_staged)
        except ComposerError:
            missing.append(f"{role}: no kernel")
            continue
        if entry_gemm_config(entry) != gemm.config:
            missing.append(f"{role}: built with tile {entry_gemm_config(entry).tag}, needs {gemm.config.tag}")
        elif not gemm.plain and (entry.config.get("epilogue") or {}).get("store_group") != gemm.store_group:
            missing.append(f"{role}: built with store group {(entry.config.get('epilogue') or {}).get('store_group')}, "
                           f"needs {gemm.store_group}")
    return tuple(missing)


def with_build(cands: Sequence[Candidate], entries: Sequence[Any], arch: str) -> list[Candidate]:
    """``cands`` with ``missing`` filled in from the build manifest ``entries``."""
    return [replace(c, missing=missing_kernels(c, entries, arch)) if c.settings is not None else c for c in cands]


def build_command(order: int, arch: str, mma: str, build_dir: str, variants: str = "all") -> str:
    """What builds the candidates' kernels: every variant with the schedule's tiles (``all``), or
    the schedule's variant with every carrier tile and shape (``tiles``)."""
    return (f"composer build --arch {arch} --mma {mma} --orders {order} --paths GEMM_FUSED "
            f"--fused-variants {variants} --out {build_dir}")


def not_built_note(candidate: Candidate, command: str) -> str:
    """Why ``candidate`` cannot run here and what to do about it."""
    if candidate.shipped:
        return f"not built ({'; '.join(candidate.missing)}); run: {command}"
    return (f"not built ({'; '.join(candidate.missing)}): an alternative carrier tile; the schedule's variant's "
            f"are built by {command.replace('--fused-variants all', '--fused-variants tiles')}, another "
            f"variant's once it is the schedule's (paths.GEMM_FUSED of a user schedule)")


@dataclass(frozen=True)
class CarrierSweepResult:
    """Validation verdicts of every runnable candidate, samples of the validated ones, the winner."""

    verdicts: dict[str, tuple[bool, str]]
    samples: dict[str, list[float]]
    winner: Candidate | None

    @property
    def medians(self) -> dict[str, float]:
        return {k: statistics.median(v) for k, v in self.samples.items()}


def _verdict(validate: Callable[[Candidate], tuple[bool, str]], candidate: Candidate) -> tuple[bool, str]:
    """``validate(candidate)``; a candidate too large for the GPU's memory (at p = 1023 only some
    settings fit) fails with the reason instead of ending the sweep. Any other error (a kernel fault
    leaves the context unusable for every later candidate) ends the sweep with its own message."""
    from composer.paths.problem import DoesNotFitError
    from composer.runtime.errors import OutOfDeviceMemory

    try:
        return validate(candidate)
    except (DoesNotFitError, OutOfDeviceMemory) as exc:
        return False, f"did not run: {exc}"


def sweep(cands: Sequence[Candidate], validate: Callable[[Candidate], tuple[bool, str]],
          measure: Callable[[Candidate], float], rounds: int) -> CarrierSweepResult:
    """Validate every runnable candidate, time those that pass in interleaved rounds, pick the one
    of the smallest median (ties: the earlier in ``cands``, i.e. the schedule's tile first)."""
    runnable = [c for c in cands if c.runnable]
    verdicts = {c.label: _verdict(validate, c) for c in runnable}
    passed = {c.label: c for c in runnable if verdicts[c.label][0]}
    if not passed:
        return CarrierSweepResult(verdicts, {}, None)
    samples = interleaved_samples(lambda lab: measure(passed[lab]), list(passed), rounds)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    winner = min(passed.values(), key=lambda c: (medians[c.label], list(passed).index(c.label)))
    return CarrierSweepResult(verdicts, samples, winner)


def _toml(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else (f'"{value}"' if isinstance(value, str) else str(value))


def write_winner(schedule_file: Path, winner: Candidate) -> None:
    """Set carrier, fold, flux, mma and carrier_tile (the whole tile) in ``[paths.GEMM_FUSED]``."""
    assert winner.settings is not None
    tile = ", ".join(f"{k} = {_toml(v)}" for k, v in winner.tile.items())
    set_table_lines(schedule_file, "paths.GEMM_FUSED", {
        "carrier": f'carrier = "{winner.carrier}"', "fold": f"fold = {_toml(winner.fold)}",
        "flux": f'flux = "{winner.flux}"', "mma": f'mma = "{winner.settings.mma}"',
        "carrier_tile": f"carrier_tile = {{ {tile} }}"})
