"""Prediction for a machine that is not run: capacities plus the SASS shapes of a cross-compiled
build, nothing measured on it (paper §6.4, A3).

Per kernel of the calibration kernel list: the non-DMMA numerators and eta are carried over, the
DMMA count is carried to the shape the target binary issues (our kernels: the build's SASS;
cuBLAS roles: the cheapest of the target's shapes, Equation 8), and the time is
eta max_r D_r / f_m (the k-norm of the demands for the max when the model has an overlap exponent
k, eta then against the calibration's k-norm). Path totals sum the kernels; per order the fastest path is named with its
separation-to-error ratio when family errors are given.

Which calibration a kernel comes from: the target machine's own when the model holds it (the
balance axis: the counters of a restricted machine come from the same machine at 100 %), else
per kernel the calibration machine whose eta is closest to 1 (§6.4), when the machines' kernel
lists agree; otherwise the kernel list of the machine that sits closest to its roofs. A library
(cuBLAS) role keeps the shape it dispatched when the target is the machine it was profiled on
(its name says the shape; Appendix A3's "when the target can be run"), else Equation 8 applies.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from composer.fileio import atomic_write_json_compact
from composer.model.build import Build
from composer.model.calibrate import CalibratedKernel, Model, content_hash, read_json
from composer.model.capacity import Capacities
from composer.model.demand import demands, predicted_seconds
from composer.model.errors import KernelListMismatch, ModelError
from composer.model.kernels import fused_variant
from composer.model.ratios import fastest_with_separation, ratio_cells
from composer.model.shapes import cheapest_shape, transfer_dmma

SCHEMA = "composer.model-predictions"
VERSION = 1
_MAX_NAMED = 8


@dataclass(frozen=True)
class KernelPrediction:
    """One kernel on the target: where it came from, its carried DMMA, demands, binding, time."""

    role: str
    name: str  # calibration kernel name
    target_name: str  # the build kernel it maps to ("" for library roles)
    calibration: str  # calibration machine label
    eta: float
    dmma: dict[str, float]
    demands: dict[str, float]
    binding: str
    calibration_binding: str
    seconds: float
    enumerated: dict[str, float] = field(default_factory=dict)  # Equation 8: shape -> seconds
    #: [calibration binary, target binary] resident warps per SM where the target holds fewer (the
    #: transfer carries eta, which does not see the latency the lost warps expose; session 20:
    #: FUSED_TC16's p = 255 twin, 130 registers against FUSED_TC's 128, one 8-warp block per SM
    #: against two, ran 1.35x its prediction). Always named in the notes; priced by
    #: ``occupancy_factor`` only where the source has an occupancy axis and the same block
    fewer_warps: list[int] = field(default_factory=list)
    #: the source binary's own slowdown at the target's warps (its occupancy axis), applied to
    #: ``seconds``; 1.0 where not applied (no fewer warps, no axis, or another block shape)
    occupancy_factor: float = 1.0


@dataclass(frozen=True)
class PathPrediction:
    path: str
    source_path: str  # calibration path it is predicted from (the same unless --as)
    order: int
    seconds: float
    kernels: list[KernelPrediction]
    notes: list[str] = field(default_factory=list)


def _closest_to_roof(kernels: list[CalibratedKernel], overlap: float | None = None) -> float:
    return statistics.median(abs(k.eta_at(overlap) - 1.0) for k in kernels)


def choose_calibration(by_machine: Mapping[str, list[CalibratedKernel]], target: Capacities,
                       overlap: float | None = None) -> tuple[list[CalibratedKernel], list[str]]:
    """The calibration kernels one cell is predicted from, and a note on how they were chosen.

    A restricted calibration (``h200@66``) of a machine with a full one is not a source: it gave
    the full one's kernels their latency terms (``calibrate.attach_latency``)."""
    by_machine = {label: ks for label, ks in by_machine.items()
                  if "@" not in label or label.split("@")[0] not in by_machine}
    own = [label for label in by_machine if label.split("@")[0] == target.machine]
    if own:
        label = target.machine if target.machine in own else sorted(own)[0]
        return by_machine[label], []
    if len(by_machine) == 1:
        return next(iter(by_machine.values())), []
    roles = {label: [k.role for k in ks] for label, ks in by_machine.items()}
    if len({tuple(r) for r in roles.values()}) == 1:
        chosen = []
        for i in range(len(next(iter(roles.values())))):
            candidates = [ks[i] for ks in by_machine.values()]
            chosen.append(min(candidates, key=lambda k: (abs(k.eta_at(overlap) - 1.0), k.machine)))
        return chosen, []
    label = min(by_machine, key=lambda m: (_closest_to_roof(by_machine[m], overlap), m))
    return by_machine[label], [f"kernel lists differ across calibration machines; {label}'s used"]


def occupancy_factor(points: list[list[float]], source_warps: float, target_warps: float) -> float:
    """T(target_warps) / T(source_warps) on a binary's occupancy axis ([warps, cycles] points, the
    same binary held to fewer blocks per SM), log-log interpolated between neighbouring points and
    held at the end points outside them (no extrapolation: a target below the lowest cap takes the
    lowest cap's slowdown).

    Why: a transfer keeps the source's eta, which holds where both binaries keep their warps; a
    16-row twin that needs a few more registers can hold half the blocks (session 20: FUSED_TC16's
    p = 255 twin, 130 against 128 registers, one block per SM against two, 1.35x its prediction).
    The source run at the target's warps measures what that costs the same work on the same block."""
    import math

    ordered = sorted((float(w), float(c)) for w, c in points)

    def cycles(w: float) -> float:
        if w <= ordered[0][0]:
            return ordered[0][1]
        if w >= ordered[-1][0]:
            return ordered[-1][1]
        for (w0, c0), (w1, c1) in zip(ordered, ordered[1:]):
            if w0 <= w <= w1:
                t = (math.log(w) - math.log(w0)) / (math.log(w1) - math.log(w0))
                return math.exp(math.log(c0) + t * (math.log(c1) - math.log(c0)))
        raise AssertionError("unreachable")

    return cycles(target_warps) / cycles(source_warps)


def spill_transfer(k: CalibratedKernel, target_spill: int) -> dict[str, float]:
    """``k``'s counts carried to a binary with ``target_spill`` bytes of local memory per thread:
    the difference, times the launch's threads, added to its DRAM and L2 bytes (never below zero).

    Why (session 20): FUSED_TC16 at p = 31 runs FUSED_TC's table, the same occupancy and the same
    memory instructions, but ptxas spills 32 and 24 B/thread at the 64-register cap where FUSED_TC
    spills nothing; its xy kernel moved 65 MB more DRAM (1040 against 975 MB; 8192 x 256 threads x
    32 B = 67 MB) and ran 7 % longer. The spill stores sit outside the loops, once per thread, and
    their lines leave the L2 before the kernel ends, so each spilled byte is written back once. A
    calibration without the source binary's local memory (fitted without its build) keeps the
    counts as they are."""
    counts = dict(k.counters.counts)
    if k.spill_bytes is None or target_spill == k.spill_bytes:
        return counts
    extra = (target_spill - k.spill_bytes) * k.counters.grid * k.counters.block
    for quantity in ("dram_bytes", "l2_bytes"):
        counts[quantity] = max(0.0, counts[quantity] + extra)
    return counts


def _kernel(k: CalibratedKernel, target: Capacities, build: Build | None, path: str, mma: str | None,
            problems: list[str], overlap: float | None = None) -> KernelPrediction | None:
    identity = k.identity
    eta_value = k.eta_at(overlap)
    target_name = ""
    enumerated: dict[str, float] = {}
    fewer_warps: list[int] = []
    if identity.own:
        if build is None:
            raise ModelError(f"{k.path} p={k.order}: kernel {k.name} is compiled by this project; "
                             "pass --build with a build cross-compiled for the target")
        variant = fused_variant(path) if identity.kind == "fused" else None
        built = build.find(identity.build_key(variant), mma)
        if built is None:
            problems.append(f"{path} p={k.order} {k.role} ({k.name})")
            return None
        target_name = built.entry.symbol
        shares = {s: n for s, n in build.dmma(built).items() if n}
        if (k.shape is None) != (not shares):
            problems.append(f"{path} p={k.order} {k.role}: {k.name} {'issues no' if k.shape is None else 'issues'} "
                            f"DMMA but {target_name} {'does' if shares else 'does not'} (instruction family changed)")
            return None
        dmma = {} if k.shape is None else transfer_dmma(k.counters.counts["dmma"], k.shape, shares)
        counts = spill_transfer(k, build.spill_bytes(built))
        if k.blocks_per_sm is not None:
            # warps per SM of both binaries; the source's from ncu (its occupancy axis' own, largest point)
            # where it has one, the build's occupancy estimate otherwise
            source_warps = max(w for w, _ in k.occupancy) if k.occupancy else k.blocks_per_sm * -(-k.counters.block // 32)
            warps = [int(source_warps), build.blocks_per_sm(built) * -(-built.threads // 32)]
            fewer_warps = warps if warps[1] < warps[0] else []
    elif k.shape is not None and k.machine.split("@")[0] == target.machine:
        dmma = k.dmma  # the machine that was run: the library's dispatched shape is known (§A3)
    elif k.shape is not None:
        if not target.dmma_shapes:
            raise ModelError(f"machine {target.machine} lists no DMMA shape to price library role {k.name}")

        def seconds(counts: dict[str, float]) -> float:
            return predicted_seconds(eta_value, demands(k.counters.counts, counts, target), target, overlap)

        best, enumerated = cheapest_shape(k.counters.counts["dmma"], k.shape, target.dmma_shapes, seconds)
        dmma = transfer_dmma(k.counters.counts["dmma"], k.shape, {best: 1.0})
    else:
        dmma = {}
    if not identity.own:
        counts = k.counters.counts
    d = demands(counts, dmma, target)
    seconds, binding = predicted_seconds(eta_value, d, target, overlap), d.binding
    own_machine = k.machine.split("@")[0] == target.machine
    # the fitted SM-count form (composer.model.sm_scaling) describes the binary that ran: another one
    # (FUSED_TC16 predicted from FUSED_TC's counters, a CuTe GEMM at another shape) has latency and
    # occupancy of its own, so it is priced by the calibration's eta alone (fused symbols name neither
    # the shape nor the table: the shape is compared too)
    same_binary = not identity.own or (target_name == k.name and set(dmma) == ({k.shape} if k.shape else set()))
    if k.sm_scaling is not None and own_machine and same_binary:
        seconds = k.sm_scaling.cycles(d.cycles, target.sm_count, overlap) / target.clock_hz
        eta_value = seconds * target.clock_hz / d.combined(overlap)  # what it amounts to there
        if k.sm_scaling.latency_binds(d.cycles, target.sm_count):
            binding = "latency"
    elif k.latency_sm_cycles is not None and own_machine:
        latency = k.latency_sm_cycles / target.sm_count / target.clock_hz  # the machine it was measured on
        if latency > seconds:
            seconds, binding = latency, "latency"
    # another binary of the same block that holds fewer warps per SM: the source's own slowdown there
    # (after the SM-count forms, which describe the binary that ran and leave this factor at 1)
    factor = 1.0
    if fewer_warps and k.occupancy and built.threads == k.counters.block and not same_binary:
        factor = occupancy_factor(k.occupancy, *fewer_warps)
        seconds *= factor
    return KernelPrediction(role=k.role, name=k.name, target_name=target_name, calibration=k.machine,
                            eta=eta_value, dmma=dmma, demands=d.cycles, binding=binding,
                            calibration_binding=k.binding, seconds=seconds, enumerated=enumerated,
                            fewer_warps=fewer_warps, occupancy_factor=factor)


def predict(model: Model, target: Capacities, build: Build | None, paths: list[str] | None = None,
            orders: list[int] | None = None, aliases: Mapping[str, str] | None = None,
            mma: str | None = None, skipped: list[str] | None = None) -> list[PathPrediction]:
    """Every (path, order) of the model (or the selection) on ``target``.

    ``aliases`` maps a path to predict onto the calibrated path it is predicted from
    (``{"FUSED_TC16": "FUSED_TC"}``: FUSED_TC's counters at FUSED_TC16's shapes). A cell whose
    kernels the build lacks (a kernel the target cannot hold: FUSED_TC at p = 15 needs more shared
    memory than sm_80 has) stops the prediction, naming them, unless ``skipped`` is given: then the
    cell is left out and its reason appended there.
    """
    if build is not None:
        build.check_arch(target.arch)
    aliases = dict(aliases or {})
    cells = model.cells()
    calibrated_paths = {p for p, _ in cells}
    for alias, source in aliases.items():
        if source not in calibrated_paths:
            raise ModelError(f"--as {alias}={source}: the model has no calibration of {source}")
    wanted: list[tuple[str, str]] = [(p, p) for p in sorted(calibrated_paths) if p not in aliases]
    wanted += sorted(aliases.items())
    if paths is not None:
        unknown = sorted(set(paths) - {p for p, _ in wanted})
        if unknown:
            raise ModelError(f"paths {unknown} are not in the model (calibrated: {sorted(calibrated_paths)})")
        wanted = [w for w in wanted if w[0] in paths]
    out: list[PathPrediction] = []
    problems: list[str] = []
    for path, source in wanted:
        for (cell_path, order), by_machine in sorted(cells.items()):
            if cell_path != source or (orders is not None and order not in orders):
                continue
            chosen, notes = choose_calibration(by_machine, target, model.overlap)
            missing: list[str] = []
            kernels = [_kernel(k, target, build, path, mma, missing, model.overlap) for k in chosen]
            if missing and skipped is not None:
                skipped.append(f"{path} p={order}: " + "; ".join(m.split(" ", 2)[-1] for m in missing))
            else:
                problems += missing
            if any(k is None for k in kernels):
                continue
            done = [k for k in kernels if k is not None]
            notes = notes + [f"{k.role}: {k.target_name} holds {k.fewer_warps[1]} warps per SM against the "
                             f"calibration binary's {k.fewer_warps[0]} "
                             + (f"(x{k.occupancy_factor:.3f}, the calibration binary's own slowdown there)"
                                if k.occupancy_factor != 1.0 else "(latency the transfer does not price)")
                             for k in done if k.fewer_warps]
            out.append(PathPrediction(path, source, order, sum(k.seconds for k in done), done, notes))
    if problems:
        shown = "; ".join(problems[:_MAX_NAMED])
        more = f" and {len(problems) - _MAX_NAMED} more" if len(problems) > _MAX_NAMED else ""
        where = build.directory if build is not None else "the build"
        raise KernelListMismatch(f"{where} does not match the calibration's kernel list: {shown}{more}")
    if not out:
        raise ModelError("nothing to predict: no calibrated (path, order) matches --paths/--orders")
    return out


# --- the predictions file ---------------------------------------------------------------------


def predictions_document(model: Model, model_file: str, target: Capacities, build: Build | None,
                         predictions: list[PathPrediction], family_errors: Mapping[str, float] | None,
                         skipped: list[str] | None = None) -> dict[str, Any]:
    """The JSON document ``composer model predict`` writes (hashed, citing the model's hash)."""
    totals = {(p.path, p.order): p.seconds for p in predictions}
    body = {
        "schema": SCHEMA, "version": VERSION, "model_hash": model.hash, "model_file": model_file,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "target": {**target.to_dict(), "label": target.label,
                   "build": None if build is None else str(build.directory),
                   "build_arch": None if build is None else build.arch},
        "paths": [asdict(p) for p in predictions],
        "fastest": fastest_with_separation(totals, family_errors),
        "ratios": ratio_cells(totals, family_errors),
        "family_errors": dict(family_errors or {}),
    }
    if skipped:  # only with --skip-missing: files without it hash as before
        body["skipped"] = list(skipped)
    return {**body, "hash": content_hash(body)}


def write_predictions(path: Path | str, document: Mapping[str, Any]) -> None:
    atomic_write_json_compact(Path(path), document)


def read_predictions(path: Path | str) -> dict[str, Any]:
    """A predictions file, checked against its own hash."""
    from composer.model.errors import ModelFileError

    path = Path(path)
    raw = read_json(path, SCHEMA, VERSION)
    digest = raw.pop("hash", None)
    if digest != content_hash(raw):
        raise ModelFileError(f"{path}: content does not match its hash (edited after `composer model predict`?)")
    return raw
