"""Per-order run schedules (``schedules/pNNNN.toml``): the paper's Table S29 benchmark setup and
the validation setup, loaded into frozen dataclasses with strict schema checks.

Schedules ship inside the package ``composer.schedules`` (the top-level ``schedules/`` directory);
a directory named by ``$COMPOSER_SCHEDULES`` is searched first, so a user can override or add an
order without editing the installed package. See ``docs/schedules.md`` for the schema.
"""

from __future__ import annotations

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
    positive_float,
    positive_int,
    read_toml,
    string,
)
from composer.errors import ConfigError
from composer.packaged import packaged_dir  # re-exported: callers import it from here

SCHEDULES_ENV = "COMPOSER_SCHEDULES"
STAGES_PER_STEP = 3  # SSP-RK3: three tendency calls per step
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
    """Field-to-field check on ``grid`` and a time-integration check on a small grid."""

    grid: tuple[int, int, int]
    nstep: int
    tolerance: float
    integration_grid: tuple[int, int, int]
    integration_dt: float
    integration_nstep: int

    @property
    def num_elements(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass(frozen=True)
class Schedule:
    """Everything that is decided per order. ``paths`` holds the ``[paths.*]`` tables verbatim
    (per-path tiles, MMA shape, library assignment, carrier), for the path builders to interpret."""

    order: int
    benchmark: BenchmarkConfig
    validation: ValidationConfig
    paths: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""
    file: str = ""

    @property
    def nq(self) -> int:
        return self.order + 1

    @property
    def benchmark_points(self) -> int:
        """Volume points ``Nq^3 * Ne`` of the benchmark grid."""
        return self.nq**3 * self.benchmark.num_elements


# --- locating files ---------------------------------------------------------------------------


def _override_dir() -> Path | None:
    value = os.environ.get(SCHEDULES_ENV)
    if not value:
        return None
    path = Path(value)
    if not path.is_dir():
        raise ConfigError(f"${SCHEDULES_ENV}={value}: not a directory")
    return path


def _schedule_files() -> dict[int, tuple[Any, str]]:
    """Order -> (file, display name); override directory entries replace packaged ones."""
    found: dict[int, tuple[Any, str]] = {}
    for entry in packaged_dir().iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found[int(match.group(1))] = (entry, entry.name)
    override = _override_dir()
    if override is not None:
        for entry in override.iterdir():
            match = _FILE_NAME.match(entry.name)
            if match:
                found[int(match.group(1))] = (entry, str(entry))
    return found


def schedule_file_name(order: int) -> str:
    return f"p{order:04d}.toml"


# --- public API -------------------------------------------------------------------------------


def available_orders() -> list[int]:
    """Orders that have a schedule, packaged or in ``$COMPOSER_SCHEDULES``, ascending."""
    return sorted(_schedule_files())


def load_schedule(order: int) -> Schedule:
    """The schedule of ``order``; ConfigError (listing the available orders) if there is none."""
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ConfigError(f"order: expected a positive integer, got {order!r}")
    files = _schedule_files()
    if order not in files:
        available = ", ".join(str(p) for p in sorted(files)) or "none"
        name = schedule_file_name(order)
        raise ConfigError(f"{name}: no schedule for order {order}; available orders: {available}")
    entry, display = files[order]
    return _parse(read_toml(entry, display), display, expected_order=order)


def load_schedule_file(path: str | os.PathLike[str]) -> Schedule:
    """Load one schedule file; if it is named ``pNNNN.toml`` its ``order`` must match the name."""
    path = Path(path)
    match = _FILE_NAME.match(path.name)
    expected = int(match.group(1)) if match else None
    return _parse(read_toml(path, str(path)), str(path), expected_order=expected)


# --- parsing ----------------------------------------------------------------------------------


def _parse(data: dict[str, Any], file: str, expected_order: int | None) -> Schedule:
    top = Table(data, file)
    order = top.required("order", positive_int)
    if expected_order is not None and order != expected_order:
        raise top.error("order", f"file declares order {order} but its name says {expected_order}")
    source = top.optional("source", string, "")
    benchmark = _parse_benchmark(top.table("benchmark"))
    validation = _parse_validation(top.table("validation"))
    paths = _parse_paths(top.optional_table("paths"))
    top.reject_unknown()
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
        integration_grid=table.required("integration_grid", grid3),
        integration_dt=table.required("integration_dt", positive_float),
        integration_nstep=table.required("integration_nstep", positive_int),
    )
    table.reject_unknown()
    return config


def _parse_paths(table: Table | None) -> dict[str, dict[str, Any]]:
    """``[paths.NAME]`` tables are reserved for per-path settings; kept as plain dicts."""
    if table is None:
        return {}
    paths: dict[str, dict[str, Any]] = {}
    for name in table.data:
        paths[name] = dict(table.table(name).data)
    return paths
