"""Calibration: saved ncu profiles -> one calibrated kernel instance per (machine, path, order,
kernel role), written as a model file with its hash.

Per kernel instance (paper §6.4) the model keeps the counter numerators, the DMMA shape the
calibration binary issued, the demands on the calibration machine, the binding resource and
eta = elapsed SM cycles / max_r D_r. eta is the only number read from a timing. The tensor
counter is used only for kernels that issue mma (the §6.3 pitfall: kernels without mma may
report tensor instructions); it is recorded, not priced, for the others.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from composer.arch.machines import Machine
from composer.fileio import atomic_write_json_compact
from composer.model.build import Build
from composer.model.capacity import Capacities, capacities
from composer.model.counters import KernelCounters, profile_files, read_profile_csv, read_profile_text
from composer.model.demand import closure, combined, demands, eta
from composer.model.errors import ModelError, ModelFileError
from composer.model.kernels import KernelIdentity, identify, sass_shape
from composer.model.sharing import reshare, share_identical_kernels
from composer.model.sm_scaling import RestrictedRun, SmScaling, fit_sm_scaling

SCHEMA = "composer.model"
VERSION = 1
PROFILE_SUMMARY = "profile.json"


@dataclass(frozen=True)
class CalibratedKernel:
    """One kernel of one path's tendency call at one order, calibrated on one machine.

    ``machine`` is the calibration label (``h200``, or ``h200@96`` for a profile taken on 96
    SMs); ``shape`` the SASS DMMA shape it issued there (None: no mma); ``dmma_unpriced`` the
    tensor counter of a kernel without mma, kept for the record.
    """

    machine: str
    path: str
    order: int
    role: str
    kind: str
    variant: str
    shape: str | None
    counters: KernelCounters
    demands: dict[str, float]
    binding: str
    eta: float
    closure: float | None
    dmma_unpriced: float = 0.0
    #: SM-cycles of the kernel's work where bytes in flight per SM, not a capacity, bound it: its
    #: elapsed cycles times the active SMs of a restricted calibration on which it ran slower than
    #: its eta and roof predict (None: no such calibration, or it kept to its roof there).
    latency_sm_cycles: float | None = None
    latency_from: str | None = None  # the restricted calibration's label (``h200@66``)
    #: the fitted SM-count dependence (composer.model.sm_scaling) of a model fitted with
    #: ``latency_form = "norm"``; it replaces the two fields above there
    sm_scaling: SmScaling | None = None
    #: the path whose calibration of this very binary the kernel shares (composer.model.sharing;
    #: None: its own profile)
    shared_from: str | None = None
    #: per-thread local memory (spills) of the binary that ran, from the calibration build's SASS
    #: (None: fitted without a build holding it). A transfer to another binary adds the difference
    #: to its DRAM and L2 bytes (composer.model.predict.spill_transfer)
    spill_bytes: int | None = None
    #: blocks per SM the binary that ran holds (threads, registers, shared memory of the calibration
    #: build's entry; None: fitted without it): a transfer to a binary that holds fewer is flagged
    blocks_per_sm: int | None = None
    #: the occupancy axis: [resident warps per SM, elapsed SM cycles] of this binary at its own
    #: occupancy and at the caps its `--option PATH.resident=N` profiles held it to (None: no such
    #: profile). A transfer to a binary of the same block that holds fewer warps scales by the
    #: source's own slowdown at that many warps (composer.model.predict.occupancy_factor)
    occupancy: list[list[float]] | None = None

    @property
    def name(self) -> str:
        return self.counters.name

    @property
    def dmma(self) -> dict[str, float]:
        """Executed DMMA by SASS shape ({} for a kernel without mma)."""
        return {} if self.shape is None else {self.shape: self.counters.counts["dmma"]}

    @property
    def identity(self) -> KernelIdentity:
        return identify(self.name)

    def eta_at(self, overlap: float | None) -> float:
        """eta against the demands combined with ``overlap`` (None: the stored, paper's eta)."""
        if overlap is None:
            return self.eta
        return self.counters.elapsed_cycles / combined(self.demands, overlap)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["counters"] = self.counters.to_dict()
        if self.sm_scaling is None:
            del out["sm_scaling"]  # files fitted before the field hash as they did
        else:
            out["sm_scaling"] = self.sm_scaling.to_dict()
        if self.shared_from is None:
            del out["shared_from"]  # likewise
        if self.spill_bytes is None:
            del out["spill_bytes"]  # likewise
        if self.blocks_per_sm is None:
            del out["blocks_per_sm"]  # likewise
        if self.occupancy is None:
            del out["occupancy"]  # likewise
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CalibratedKernel:
        fields = dict(raw)
        fields["counters"] = KernelCounters.from_dict(raw["counters"])
        if raw.get("sm_scaling") is not None:
            fields["sm_scaling"] = SmScaling.from_dict(raw["sm_scaling"])
        return cls(**fields)


@dataclass
class Model:
    """Calibrated kernels plus what they were calibrated from and on."""

    kernels: list[CalibratedKernel]
    machines: dict[str, dict[str, Any]]  # calibration label -> Capacities.to_dict()
    sources: list[dict[str, Any]] = field(default_factory=list)
    floor: bool = True
    #: the exponent that combines the demands (composer.model.demand.combined); None: the max
    overlap: float | None = None
    #: how a kernel's time follows the active SM count on its own machine: "max" (session 8's
    #: latency term, ``max(roof, lambda / N)``, taken only past LATENCY_MARGIN) or "norm"
    #: (composer.model.sm_scaling: lambda inside the k-norm and an eta exponent, fitted per kernel)
    #: or "interp" (norm passed through every restricted calibration: its residuals interpolated)
    latency_form: str = "max"
    #: whether every binary several paths launch at one order shares one calibration
    #: (composer.model.sharing); files fitted before it existed did not
    shared_kernels: bool = False
    #: the digest a loaded file carried (verified on load): a file written before a field was added
    #: to CalibratedKernel keeps the hash its predictions cite, although its body now serializes
    #: the new field's default.
    loaded_hash: str | None = field(default=None, compare=False)

    def body(self) -> dict[str, Any]:
        body = {"schema": SCHEMA, "version": VERSION, "floor": self.floor, "sources": self.sources,
                "machines": self.machines, "kernels": [k.to_dict() for k in self.kernels]}
        if self.overlap is not None:  # absent for the paper's max: files fitted before k hash as they did
            body["overlap"] = self.overlap
        # likewise for files fitted before the form existed, and for fits without restricted profiles
        # (both forms predict those alike)
        if self.latency_form != "max" and any(k.sm_scaling is not None for k in self.kernels):
            body["latency_form"] = self.latency_form
        if self.shared_kernels and any(k.shared_from for k in self.kernels):  # likewise for files fitted
            body["shared_kernels"] = True  # before the sharing, and for fits that had nothing to share
        return body

    @property
    def hash(self) -> str:
        """sha256 of the canonical JSON of the model: predictions cite it."""
        return self.loaded_hash or content_hash(self.body())

    def cells(self) -> dict[tuple[str, int], dict[str, list[CalibratedKernel]]]:
        """Kernels by (path, order), then by calibration machine label, in launch order."""
        out: dict[tuple[str, int], dict[str, list[CalibratedKernel]]] = {}
        for k in self.kernels:
            out.setdefault((k.path, k.order), {}).setdefault(k.machine, []).append(k)
        for by_machine in out.values():
            for kernels in by_machine.values():
                kernels.sort(key=lambda k: k.counters.index)
        return out

    def save(self, path: Path | str) -> str:
        """Write the model with its hash; returns the hash."""
        body = self.body()
        digest = content_hash(body)
        atomic_write_json_compact(Path(path), {**body, "hash": digest})
        return digest

    @classmethod
    def load(cls, path: Path | str) -> Model:
        """Read a model file; ModelFileError when unreadable, of another schema or altered."""
        path = Path(path)
        raw = read_json(path, SCHEMA, VERSION)
        digest = raw.pop("hash", None)
        if digest != content_hash(raw):
            raise ModelFileError(f"{path}: content does not match its hash (edited after `composer model fit`?)")
        overlap = raw.get("overlap")
        latency_form = raw.get("latency_form", "max")
        shared = raw.get("shared_kernels", False)
        if not isinstance(shared, bool):
            raise ModelFileError(f"{path}: shared_kernels {shared!r}: expected true or false")
        try:
            check_overlap(overlap)
            check_latency_form(latency_form)
        except ModelError as exc:
            raise ModelFileError(f"{path}: {exc}") from None
        return cls(kernels=[CalibratedKernel.from_dict(k) for k in raw["kernels"]],
                   machines=raw["machines"], sources=raw["sources"], floor=raw["floor"],
                   overlap=overlap, latency_form=latency_form, shared_kernels=shared, loaded_hash=digest)


def check_overlap(overlap: Any) -> None:
    """An overlap exponent is None (the max) or a finite number >= 1 (JSON has no infinity)."""
    if overlap is None:
        return
    if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) or not (1 <= overlap < math.inf):
        raise ModelError(f"overlap exponent {overlap!r}: expected a finite number >= 1 (none: the paper's max)")


#: The SM-count forms a model can be fitted with (Model.latency_form).
LATENCY_FORMS = ("norm", "interp", "max")


def check_latency_form(form: Any) -> None:
    if form not in LATENCY_FORMS:
        raise ModelError(f"latency form {form!r} is not one of {', '.join(LATENCY_FORMS)}")


def content_hash(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_json(path: Path, schema: str, version: int) -> dict[str, Any]:
    """A JSON file of ``schema``/``version``; ModelFileError otherwise."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("schema") != schema or raw.get("version") != version:
        got = raw.get("schema") if isinstance(raw, dict) else type(raw).__name__
        raise ModelFileError(f"{path}: not a {schema} v{version} file (schema {got!r})")
    return raw


# --- calibration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileSource:
    """One ``composer profile --out`` directory and the machine it was taken on."""

    directory: Path
    machine: Machine


def _pair_sms(directory: Path) -> dict[tuple[str, int], int]:
    """Active SM counts ``composer profile --sms`` recorded per (path, order)."""
    summary = directory / PROFILE_SUMMARY
    if not summary.is_file():
        return {}
    try:
        raw = json.loads(summary.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{summary}: not readable JSON ({exc})") from None
    out = {}
    for entry in raw.values():
        sms = entry.get("sms") if isinstance(entry, dict) else None
        if sms:
            out[(str(entry["path"]), int(entry["order"]))] = int(sms["active"])
    return out


def calibration_shape(identity: KernelIdentity, arch: str, build: Build | None) -> str | None:
    """The SASS DMMA shape a kernel issued on the calibration machine (None: no mma).

    From the name where it states the PTX shape (CuTe GEMMs, cuBLAS tensor-op kernels), else a
    fused variant with a single allowed shape, else the calibration build's SASS.
    """
    if identity.issues_mma is False:
        return None
    ptx = identity.named_shape
    if ptx is None and identity.kind == "fused":
        from composer.fused.config import ALLOWED_MMA

        allowed = ALLOWED_MMA.get(identity.variant.upper(), ())
        ptx = allowed[0] if len(allowed) == 1 else None
    if ptx is not None:
        return sass_shape(ptx, arch)[0]
    if build is not None:
        built = build.find(identity.build_key())
        if built is not None:
            shapes = [s for s, n in build.dmma(built).items() if n]
            if len(shapes) == 1:
                return shapes[0]
            if not shapes:
                return None
    raise ModelError(f"kernel {identity.name}: its DMMA shape is in neither its name nor a "
                     "calibration build; pass --build with the build the profile ran")


def kernel_roles(names: Iterable[str]) -> list[tuple[KernelIdentity, str]]:
    """Each launch's identity and role within its call, in launch order; library launches (one
    cuBLAS kernel may serve several GEMMs) are told apart by occurrence: ``NAME#2``."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        identity = identify(name)
        role = identity.role
        if not identity.own:
            seen[role] = seen.get(role, 0) + 1
            role = f"{role}#{seen[role]}"
        out.append((identity, role))
    return out


def calibrate_kernels(path: str, order: int, launches: list[KernelCounters], machine: Capacities,
                      build: Build | None = None) -> list[CalibratedKernel]:
    """Calibrate the kernels of one profiled (path, order) call on ``machine``."""
    out = []
    for counters, (identity, role) in zip(launches, kernel_roles(k.name for k in launches)):
        shape = calibration_shape(identity, machine.arch, build)
        dmma = {} if shape is None else {shape: counters.counts["dmma"]}
        d = demands(counters.counts, dmma, machine)
        try:
            e = eta(counters.elapsed_cycles, d)
        except ValueError:
            raise ModelError(f"{path} p={order}: kernel {counters.name} has no demand on any resource "
                             "(all its counters are zero)") from None
        out.append(CalibratedKernel(
            machine=machine.label, path=path, order=order, role=role, kind=identity.kind,
            variant=identity.variant, shape=shape, counters=counters, demands=d.cycles,
            binding=d.binding, eta=e, closure=closure(counters.budget_cycles, dmma, counters.counts["fp64"], machine),
            dmma_unpriced=0.0 if shape is not None else counters.counts["dmma"],
            **_calibration_binary(identity, counters, build)))
    return out


def _resident_caps(directory: Path) -> dict[tuple[str, int], int]:
    """(path, order) -> N of the profiles a ``composer profile --option PATH.resident=N`` took."""
    summary = directory / "profile.json"
    if not summary.is_file():
        return {}
    try:
        entries = json.loads(summary.read_text())
    except ValueError:
        return {}
    return {(str(e["path"]), int(e["order"])): int(e["options"]["resident"]) for e in entries.values()
            if isinstance(e, dict) and isinstance(e.get("options"), dict) and e["options"].get("resident")}


def _resident_warps(file: Path, max_warps: int, required: bool) -> list[tuple[str, float, float]]:
    """(kernel name, resident warps per SM, elapsed SM cycles) of each launch of one profile: the
    warps from ncu's theoretical occupancy (sm__maximum_warps_per_active_cycle_pct of the SM's
    ``max_warps``). A profile without it (ncu without the Occupancy section) gives no points; for a
    capped profile, taken for the axis (``required``), that is an error."""
    from composer.profile.ncu import parse_raw_csv, summarize

    out = []
    rows = parse_raw_csv(read_profile_text(file))
    for row, counters in zip(rows, read_profile_csv(file)):
        pct = summarize(row).occupancy_theoretical_pct
        if pct is None:
            if required:
                raise ModelError(f"{file}: kernel {counters.name}: no theoretical occupancy "
                                 "(sm__maximum_warps_per_active_cycle_pct) for the occupancy axis")
            return []
        out.append((counters.name, round(pct / 100.0 * max_warps), counters.elapsed_cycles))
    return out


def attach_occupancy(kernels: list[CalibratedKernel], capped: Mapping[tuple[str, str, int], list[Path]],
                     full: Mapping[tuple[str, str, int], Path], machines: Mapping[str, Capacities]
                     ) -> list[CalibratedKernel]:
    """Each calibrated kernel with its occupancy axis: its own point (from ``full``, the profile it was
    calibrated from) and those of the capped profiles of the same (machine, path, order) that
    launched the same binary (its name; a kernel that ran at its own occupancy there adds nothing).
    A capped profile without the full calibration of its (machine, path, order) is an error."""
    if not capped:
        return kernels
    from composer.arch.limits import arch_limits

    orphans = sorted(f"{path} p={order} on {label}" for label, path, order in capped if (label, path, order) not in full)
    if orphans:
        raise ModelError(f"capped profiles (--option PATH.resident=N) without a full calibration to attach to: "
                         f"{', '.join(orphans)}; add the profile of the same path and order at its own occupancy")
    out = []
    for k in kernels:
        key = (k.machine, k.path, k.order)
        files = capped.get(key, [])
        if not files or key not in full:
            out.append(k)
            continue
        max_warps = arch_limits(machines[k.machine].arch).max_warps_per_sm
        own = next(((w, c) for name, w, c in _resident_warps(full[key], max_warps, False) if name == k.name), None)
        if own is None:
            out.append(k)
            continue
        points = {own[0]: own[1]}
        for file in files:
            for name, warps, cycles in _resident_warps(file, max_warps, True):
                if name == k.name and warps not in points:
                    points[warps] = cycles
        out.append(replace(k, occupancy=sorted([float(w), float(c)] for w, c in points.items()))
                   if len(points) > 1 else k)
    return out


def _calibration_binary(identity: KernelIdentity, counters: KernelCounters, build: Build | None) -> dict[str, int]:
    """Per-thread local memory and blocks per SM of the binary that ran, when the calibration build
    holds it: the build kernel of its role whose registers are the profile's (a build of another
    compiler's kernels, 13.5 against the device's 13.0, allocates registers differently: not that
    binary). Empty when unknown."""
    if build is None or not identity.own:
        return {}
    built = next((b for b in build.kernels if b.entry.symbol == counters.name), None)
    if built is None:
        return {}
    sass = build.sass(built)
    if sass.registers != counters.registers:
        return {}
    return {"spill_bytes": sass.spill_bytes, "blocks_per_sm": build.blocks_per_sm(built)}


#: A restricted calibration run slower than this factor times the full calibration's eta x roof
#: makes a kernel latency-limited there: the H200 p = 63 kernels at 66 SMs split into 0.92-1.04x
#: (high occupancy, at their roof) and 1.6-1.95x (low occupancy); ncu repeats differ by a few per cent.
LATENCY_MARGIN = 1.15


def attach_latency(kernels: list[CalibratedKernel], machines: Mapping[str, Capacities],
                   overlap: float | None = None) -> list[CalibratedKernel]:
    """Each full-SM kernel with the latency term of its restricted calibrations (the largest).

    Why: on the balance axis a kernel at low occupancy loses DRAM throughput with its SMs (H200,
    p = 63, 66 SMs: the CuTe and cuBLAS GEMMs and the fused kernels at 12-35 % occupancy ran
    1.6-1.95x slower, a copy kernel and the 47-97 %-occupancy support kernels kept their time);
    the capacities alone, calibrated at the full SM count, predict no change. Latency-bound work
    takes SM-cycles, so its time scales as 1 / active SMs: ``latency_sm_cycles / N``.
    """
    full = {(k.machine, k.path, k.order, k.role): i for i, k in enumerate(kernels) if "@" not in k.machine}
    out = list(kernels)
    for k in kernels:
        if "@" not in k.machine:
            continue
        base = k.machine.split("@")[0]
        index = full.get((base, k.path, k.order, k.role))
        if index is None:
            continue
        whole = out[index]
        restricted = machines[k.machine]
        roof = whole.eta_at(overlap) * demands(whole.counters.counts, whole.dmma, restricted).combined(overlap)
        if k.counters.elapsed_cycles <= LATENCY_MARGIN * roof:
            continue
        # at most the full-SM run's own SM-cycles: the term never predicts the calibration slower
        # than it ran (a kernel bound by an SM-side resource at N also runs > 1.15x its roof there)
        lam = min(k.counters.elapsed_cycles * restricted.sm_count,
                  whole.counters.elapsed_cycles * restricted.full_sm_count)
        if whole.latency_sm_cycles is None or lam > whole.latency_sm_cycles:
            out[index] = replace(whole, latency_sm_cycles=lam, latency_from=k.machine)
    return out


def attach_sm_scaling(kernels: list[CalibratedKernel], machines: Mapping[str, Capacities],
                      overlap: float | None = None, residuals: bool = False) -> list[CalibratedKernel]:
    """Each full-SM kernel with restricted calibrations of its own gets its SM scaling
    (composer.model.sm_scaling), fitted over all of them; the others keep none (their time on N
    SMs follows the capacities alone)."""
    by_role: dict[tuple[str, str, int, str], list[CalibratedKernel]] = {}
    for k in kernels:
        if "@" in k.machine:
            by_role.setdefault((k.machine.split("@")[0], k.path, k.order, k.role), []).append(k)
    out = []
    for k in kernels:
        twins = by_role.get((k.machine, k.path, k.order, k.role)) if "@" not in k.machine else None
        if not twins:
            out.append(k)
            continue
        runs = [RestrictedRun(label=t.machine, sm_count=machines[t.machine].sm_count,
                              elapsed_cycles=t.counters.elapsed_cycles,
                              demands=demands(k.counters.counts, k.dmma, machines[t.machine]).cycles)
                for t in sorted(twins, key=lambda t: machines[t.machine].sm_count)]
        scaling = fit_sm_scaling(k.counters.elapsed_cycles, k.demands, machines[k.machine].sm_count, runs, overlap,
                                 residuals)
        out.append(replace(k, sm_scaling=scaling))
    return out


def attach_sm_dependence(kernels: list[CalibratedKernel], machines: Mapping[str, Capacities],
                         overlap: float | None, latency_form: str) -> list[CalibratedKernel]:
    """The restricted calibrations' contribution in the model's form (Model.latency_form)."""
    check_latency_form(latency_form)
    if latency_form in ("norm", "interp"):
        return attach_sm_scaling(kernels, machines, overlap, residuals=latency_form == "interp")
    return attach_latency(kernels, machines, overlap)


def with_overlap(model: Model, overlap: float | None) -> Model:
    """The same calibration combined with another exponent: the latency terms re-derived (which
    kernels qualify depends on K: a restricted run is compared with eta x the K-norm there), the
    loaded file's hash dropped (this is not that file). The restricted machines are rebuilt from the
    capacities the model stored."""
    from composer.arch.machines import get_machine

    check_overlap(overlap)
    by_label = {}
    for label, raw in model.machines.items():
        full = capacities(get_machine(raw["machine"]), None, model.floor)
        base = capacities(get_machine(raw["machine"]), raw["sm_count"], model.floor) \
            if raw["sm_count"] != full.sm_count else full
        by_label[label] = replace(base, per_sm_cycle=dict(raw["per_sm_cycle"]), dmma_prices=dict(raw["dmma_prices"]),
                                  dfma_price=raw["dfma_price"], clock_hz=raw["clock_hz"])
    # a shared kernel is a copy of another path's calibration: its own profile is not in the model,
    # so the copy is re-derived from the refitted source
    bare = [replace(k, latency_sm_cycles=None, latency_from=None, sm_scaling=None, shared_from=None)
            for k in model.kernels]
    kernels = attach_sm_dependence(bare, by_label, overlap, model.latency_form)
    if model.shared_kernels:
        kernels = reshare(kernels, model.kernels)
    return replace(model, kernels=kernels, overlap=overlap, loaded_hash=None)


def fit(sources: Iterable[ProfileSource], build: Path | str | None = None, floor: bool = True,
        overlap: float | None = None, latency_form: str = "interp", share: bool = True) -> Model:
    """Calibrate every (path, order) profile of every source directory; ``overlap`` is the
    demand-combining exponent the model predicts with (None: the paper's max), ``latency_form``
    how the restricted calibrations enter (Model.latency_form), ``share`` whether a binary several
    paths launch is priced from one calibration (composer.model.sharing; False: as before session 12)."""
    check_overlap(overlap)
    check_latency_form(latency_form)
    calibration_build = Build(build) if build is not None else None
    kernels: list[CalibratedKernel] = []
    machines: dict[str, dict[str, Any]] = {}
    by_label: dict[str, Capacities] = {}
    described: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, int], Path] = {}
    capped: dict[tuple[str, str, int], list[Path]] = {}
    for source in sources:
        if not source.directory.is_dir():
            raise ModelError(f"{source.directory}: no such profile directory")
        files = profile_files(source.directory)
        if not files:
            raise ModelError(f"{source.directory}: no PATH-pORDER.csv profiles (from `composer profile --out`)")
        restricted = _pair_sms(source.directory)
        caps = _resident_caps(source.directory)
        digests = {}
        for (path, order), file in files.items():
            machine = capacities(source.machine, restricted.get((path, order)), floor)
            if (path, order) in caps:  # the occupancy axis: the same binaries held to fewer blocks per SM
                capped.setdefault((machine.label, path, order), []).append(file)
                digests[file.name] = hashlib.sha256(file.read_bytes()).hexdigest()
                continue
            key = (machine.label, path, order)
            if key in seen:
                raise ModelError(f"{path} p={order} on {machine.label} is profiled twice: {seen[key]} and {file}")
            seen[key] = file
            kernels += calibrate_kernels(path, order, read_profile_csv(file), machine, calibration_build)
            machines[machine.label] = machine.to_dict()
            by_label[machine.label] = machine
            digests[file.name] = hashlib.sha256(file.read_bytes()).hexdigest()
        described.append({"directory": str(source.directory), "machine": source.machine.name,
                          "files": digests})
    if calibration_build is not None:
        described.append({"build": str(calibration_build.directory), "arch": calibration_build.arch})
    kernels = attach_occupancy(kernels, capped, seen, by_label)
    kernels = attach_sm_dependence(kernels, by_label, overlap, latency_form)
    if share:
        kernels = share_identical_kernels(kernels)
    return Model(kernels=kernels, machines=machines, sources=described, floor=floor, overlap=overlap,
                 latency_form=latency_form, shared_kernels=share)
