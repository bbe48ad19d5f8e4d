"""Per-order run schedules (``schedules/pNNNN.toml``): the paper's Table S29 benchmark setup,
the validation setup and the per-path tables, loaded into frozen dataclasses with strict schema
checks (every ``[paths.NAME]`` table included: :mod:`composer.config.path_tables`).

Schedules ship inside the package ``composer.schedules`` (the top-level ``schedules/`` directory);
a user schedules directory (``$COMPOSER_SCHEDULES``, else ``~/.config/composer/schedules``) is read
first, so a user can override or add an order without editing the installed package
(:mod:`composer.config.schedule_files`). See ``docs/schedules.md`` for the schema.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.config.fields import (
    Table,
    boolean,
    grid3,
    non_negative_int,
    parse_toml,
    positive_float,
    positive_int,
    read_text,
    string,
)
from composer.config import schedule_files as schedule_files_module
from composer.config.machine_schedules import OVERLAY_DIR, active_machine, overlay_entry, read_overlay
from composer.config.path_tables import check_path_tables
from composer.config.schedule_files import (
    PACKAGED,
    SCHEDULES_ENV,
    USER,
    packaged_dir,
    schedule_file_name,
    schedule_files,
    user_dir,
    writable_schedule_file,
)
from composer.errors import ConfigError

__all__ = [
    "FILE", "PACKAGED", "SCHEDULES_ENV", "STAGES_PER_STEP", "USER", "BenchmarkConfig", "Schedule",
    "ValidationConfig", "available_orders", "load_schedule", "load_schedule_file", "packaged_dir",
    "schedule_file_name", "user_dir", "writable_schedule_file",
]

STAGES_PER_STEP = 3  # SSP-RK3: three tendency calls per step
FILE = "file"  # Schedule.origin of a file loaded by its path (load_schedule_file)
_FILE_NAME = re.compile(r"^p(\d{4})\.toml$")


@dataclass(frozen=True)
class BenchmarkConfig:
    """Timed run of Table S29: ``warmup_steps`` untimed steps, then 3 timed stages per step."""

    grid: tuple[int, int, int]
    dt: float
    nstep: int
    warmup_steps: int
    timed_stages: int
    graph: bool = False

    @property
    def num_elements(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass(frozen=True)
class ValidationConfig:
    """The field-to-field check on ``grid`` (the time-integration check of ``composer validate``
    needs no schedule: composer.validation derives its grid, dt and steps from the order)."""

    grid: tuple[int, int, int]
    nstep: int
    tolerance: float

    @property
    def num_elements(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass(frozen=True)
class Schedule:
    """Everything that is decided per order. ``paths`` holds the ``[paths.*]`` tables verbatim
    (per-path tiles, MMA shape, library assignment, kernels), checked at load, for the path
    builders to interpret.

    ``origin`` (``"packaged"``, ``"user"`` or ``"file"``), ``file`` (the packaged file's name, else
    its full path; ``p0015.toml+machines/h100/p0015.toml`` with a machine overlay), ``sha256`` (of the
    file's text; of both texts with an overlay) and ``machine`` (the machine whose overlay replaced
    path tables, ``""`` for none: :mod:`composer.config.machine_schedules`) say which schedule a run
    used."""

    order: int
    benchmark: BenchmarkConfig
    validation: ValidationConfig
    paths: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""
    file: str = ""
    origin: str = ""
    sha256: str = ""
    machine: str = ""

    @property
    def nq(self) -> int:
        return self.order + 1

    @property
    def benchmark_points(self) -> int:
        """Volume points ``Nq^3 * Ne`` of the benchmark grid."""
        return self.nq**3 * self.benchmark.num_elements

    def provenance(self) -> dict[str, Any]:
        """Which schedule this is, for a run's record: order, origin, file, content hash and the
        machine whose overlay it carries (absent for none)."""
        record = {"order": self.order, "origin": self.origin, "file": self.file, "sha256": self.sha256}
        if self.machine:
            record["machine"] = self.machine
        return record


# --- public API -------------------------------------------------------------------------------


def available_orders(packaged: Any = None) -> list[int]:
    """Orders that have a schedule, packaged or in the user directory, ascending (``packaged``
    replaces the packaged directory, as in :func:`schedule_files`)."""
    return sorted(schedule_files(packaged))


def load_schedule(order: int, packaged: Any = None) -> Schedule:
    """The schedule of ``order`` (the user directory's file, else the packaged one with the active
    machine's overlay when it has one: :mod:`composer.config.machine_schedules`); ConfigError
    (listing the available orders) if there is none."""
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ConfigError(f"order: expected a positive integer, got {order!r}")
    files = schedule_files(packaged)
    if order not in files:
        available = ", ".join(str(p) for p in sorted(files)) or "none"
        name = schedule_file_name(order)
        raise ConfigError(f"{name}: no schedule for order {order}; available orders: {available}")
    found = files[order]
    machine = active_machine() if found.origin == PACKAGED else None
    overlay = overlay_entry(packaged if packaged is not None else schedule_files_module.packaged_dir(), machine,
                            found.entry.name) if machine else None
    if overlay is not None:
        return _load_overlaid(found.entry, found.display, overlay, machine, order)
    return _load(found.entry, found.display, found.origin, expected_order=order)


def load_schedule_file(path: str | os.PathLike[str]) -> Schedule:
    """Load one schedule file; if it is named ``pNNNN.toml`` its ``order`` must match the name."""
    path = Path(path)
    match = _FILE_NAME.match(path.name)
    expected = int(match.group(1)) if match else None
    return _load(path, str(path), FILE, expected_order=expected)


# --- parsing ----------------------------------------------------------------------------------


def _load(entry: Any, file: str, origin: str, expected_order: int | None) -> Schedule:
    text = read_text(entry, file)
    schedule = _parse(parse_toml(text, file), file, expected_order)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return dataclasses.replace(schedule, origin=origin, sha256=digest)


def _load_overlaid(entry: Any, file: str, overlay: Any, machine: str, order: int) -> Schedule:
    """The packaged schedule ``entry`` with the path tables of ``machine``'s overlay in place of its own."""
    text = read_text(entry, file)
    data = parse_toml(text, file)
    overlay_file = f"{OVERLAY_DIR}/{machine}/{schedule_file_name(order)}"
    overlay_text, _source, overlay_paths = read_overlay(overlay, overlay_file, order)
    data["paths"] = {**data.get("paths", {}), **overlay_paths}
    schedule = _parse(data, file, order, path_origins=dict.fromkeys(overlay_paths, overlay_file))
    digest = hashlib.sha256(f"{text}\0{overlay_text}".encode("utf-8")).hexdigest()
    return dataclasses.replace(schedule, file=f"{file}+{overlay_file}", origin=PACKAGED, sha256=digest,
                               machine=machine)


def _parse(data: dict[str, Any], file: str, expected_order: int | None,
           path_origins: dict[str, str] | None = None) -> Schedule:
    """A schedule from parsed TOML; ``path_origins`` names the file of each path table that came from
    elsewhere (a machine overlay), so that its errors name that file."""
    top = Table(data, file)
    order = top.required("order", positive_int)
    if expected_order is not None and order != expected_order:
        raise top.error("order", f"file declares order {order} but its name says {expected_order}")
    source = top.optional("source", string, "")
    benchmark = _parse_benchmark(top.table("benchmark"))
    validation = _parse_validation(top.table("validation"))
    paths_table = top.optional_table("paths")
    if paths_table is not None and path_origins:
        paths_table = Table(paths_table.data, file, "paths", path_origins)
    top.reject_unknown()
    paths = check_path_tables(paths_table, order) if paths_table is not None else {}
    return Schedule(order, benchmark, validation, paths, source, file)


def _parse_benchmark(table: Table) -> BenchmarkConfig:
    grid = table.required("grid", grid3)
    dt = table.required("dt", positive_float)
    nstep = table.required("nstep", positive_int)
    warmup = table.required("warmup_steps", non_negative_int)
    timed = table.required("timed_stages", positive_int)
    graph = table.optional("graph", boolean, False)
    table.reject_unknown()
    if warmup >= nstep:
        raise table.error("warmup_steps", f"must be smaller than nstep = {nstep}, got {warmup}")
    expected = STAGES_PER_STEP * (nstep - warmup)
    if timed != expected:
        raise table.error(
            "timed_stages",
            f"expected 3*(nstep - warmup_steps) = 3*({nstep} - {warmup}) = {expected}, got {timed}",
        )
    return BenchmarkConfig(grid, dt, nstep, warmup, timed, graph)


def _parse_validation(table: Table) -> ValidationConfig:
    config = ValidationConfig(
        grid=table.required("grid", grid3),
        nstep=table.required("nstep", positive_int),
        tolerance=table.required("tolerance", positive_float),
    )
    table.reject_unknown()
    return config
