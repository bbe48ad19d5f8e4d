"""Machine capacity table (``schedules/machines.toml``): the paper's Tables 3, 5 and 6 plus the
lab's H200, as data, so the roofline and the performance model read capacities from one place.

A user TOML file with the same layout (``load_machines`` argument or ``$COMPOSER_MACHINES``) adds
machines or overrides keys of shipped ones. See ``docs/schedules.md`` for the schema.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.config.fields import (
    Expected,
    Table,
    positive_float,
    positive_int,
    read_toml,
    string,
)
from composer.arch.limits import ArchLimits, arch_limits
from composer.errors import ConfigError
from composer.packaged import packaged_dir

#: The lab machine: the roof fractions and the sweeps' schedule notes refer to it by default.
DEFAULT_MACHINE = "h200"
MACHINES_ENV = "COMPOSER_MACHINES"
MACHINES_FILE = "machines.toml"
STATED_TOLERANCE = 0.01  # relative; a stated value further off its derived value is a typo
SYSTEM_KEYS = ("site", "host", "driver", "toolchain", "build_flags")
_SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class DmmaShape:
    """One FP64 MMA instruction shape and its price in the counter-defined FP64 budget."""

    shape: str
    pipe_cycles: float

    @property
    def mnk(self) -> tuple[int, int, int]:
        match = _SHAPE.match(self.shape)
        assert match is not None  # validated on load
        m, n, k = (int(g) for g in match.groups())
        return m, n, k

    @property
    def flop(self) -> int:
        """FLOP one instruction carries: ``2*m*n*k`` (512 for m8n8k4)."""
        m, n, k = self.mnk
        return 2 * m * n * k


@dataclass(frozen=True)
class Machine:
    """Capacities of one GPU; whole-machine peaks are derived (SMs x clock x per-cycle rate)."""

    name: str
    description: str
    arch: str
    compute_capability: str
    sm_count: int
    boost_clock_ghz: float
    memory_gib: float
    hbm_bandwidth_nominal_tbs: float
    fp64_core_flop_per_sm_cycle: float
    fp64_tc_flop_per_sm_cycle: float
    source: str
    hbm_bandwidth_measured_tbs: float | None = None
    l2_mib: float | None = None
    dmma: tuple[DmmaShape, ...] = ()
    stated: dict[str, float] = field(default_factory=dict)
    system: dict[str, str] = field(default_factory=dict)

    @property
    def limits(self) -> ArchLimits:
        """SM and block limits of the machine's architecture (``composer/arch/archs.toml``)."""
        return arch_limits(self.arch)

    @property
    def clock_hz(self) -> float:
        return self.boost_clock_ghz * 1e9

    @property
    def sm_cycles_per_second(self) -> float:
        """SM x clock: converts per-SM-cycle capacities into per-second ones."""
        return self.sm_count * self.clock_hz

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * 2**30)

    @property
    def l2_bytes(self) -> int | None:
        return None if self.l2_mib is None else int(self.l2_mib * 2**20)

    @property
    def fp64_tc_peak_flops(self) -> float:
        return self.sm_cycles_per_second * self.fp64_tc_flop_per_sm_cycle

    @property
    def fp64_core_peak_flops(self) -> float:
        return self.sm_cycles_per_second * self.fp64_core_flop_per_sm_cycle

    @property
    def hbm_bandwidth_nominal(self) -> float:
        return self.hbm_bandwidth_nominal_tbs * 1e12

    @property
    def hbm_bandwidth(self) -> float:
        """Bytes/s for rooflines: the measured copy bandwidth when known, else the nominal peak."""
        tbs = self.hbm_bandwidth_measured_tbs or self.hbm_bandwidth_nominal_tbs
        return tbs * 1e12

    @property
    def hbm_bytes_per_sm_cycle(self) -> float:
        """Nominal HBM bytes per SM cycle (the paper's Table 5 normalization)."""
        return self.hbm_bandwidth_nominal / self.sm_cycles_per_second

    def derived(self) -> dict[str, float]:
        """The derived counterparts of the keys allowed in ``[machines.NAME.stated]``."""
        return {
            "fp64_core_peak_tflops": self.fp64_core_peak_flops / 1e12,
            "fp64_tc_peak_tflops": self.fp64_tc_peak_flops / 1e12,
            "hbm_bytes_per_sm_cycle": self.hbm_bytes_per_sm_cycle,
        }


# --- public API -------------------------------------------------------------------------------


def load_machines(user_file: Path | str | None = None) -> dict[str, Machine]:
    """Shipped machines, updated by ``user_file`` (or ``$COMPOSER_MACHINES`` when not given).

    A user entry for a new name must be complete; for a shipped name its keys replace the
    shipped ones, and the shipped ``stated`` table is dropped unless the user restates it
    (those values belong to the source that printed them).
    """
    shipped = packaged_dir() / MACHINES_FILE
    raw, origins = _entries(read_toml(shipped, MACHINES_FILE), MACHINES_FILE)
    if user_file is None and os.environ.get(MACHINES_ENV):
        user_file = os.environ[MACHINES_ENV]
    if user_file is not None:
        display = str(user_file)
        user, _ = _entries(read_toml(Path(user_file), display), display)
        for name, entry in user.items():
            if name in raw:
                merged = {k: v for k, v in raw[name].items() if k != "stated"}
                merged.update(entry)
                if "source" not in entry:
                    merged["source"] = f"{raw[name].get('source', '')}; overridden by {display}"
                raw[name] = merged
                origins[name] = {**origins[name], **{k: display for k in entry}}
            else:
                raw[name] = entry
                origins[name] = {k: display for k in entry}
            origins[name].setdefault("", display)
    return {name: _parse_machine(name, entry, origins[name]) for name, entry in sorted(raw.items())}


def get_machine(name: str, user_file: Path | str | None = None) -> Machine:
    """One machine by name (case-insensitive); ConfigError listing the known names otherwise."""
    machines = load_machines(user_file)
    key = name.strip().lower()
    if key not in machines:
        raise ConfigError(f"unknown machine {name!r}; known machines: {', '.join(machines)}")
    return machines[key]


# --- parsing ----------------------------------------------------------------------------------


def _entries(
    data: dict[str, Any], file: str
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str]]]:
    """The ``[machines.NAME]`` tables of one file and, per machine, the file of each key."""
    top = Table(data, file)
    machines = top.optional_table("machines") or Table({}, file, "machines")
    top.reject_unknown()
    entries: dict[str, dict[str, Any]] = {}
    for name in machines.data:
        if not _NAME.match(name):
            raise machines.error(
                name, "machine names are lower-case letters, digits, '_', '-', '.'"
            )
        entries[name] = dict(machines.table(name).data)
    origins = {name: {"": file, **{k: file for k in entry}} for name, entry in entries.items()}
    return entries, origins


def _parse_machine(name: str, entry: dict[str, Any], origins: dict[str, str]) -> Machine:
    table = Table(entry, origins.get("", MACHINES_FILE), f"machines.{name}", origins)
    machine = Machine(
        name=name,
        description=table.required("description", string),
        arch=table.required("arch", _arch),
        compute_capability=table.required("compute_capability", _capability),
        sm_count=table.required("sm_count", positive_int),
        boost_clock_ghz=table.required("boost_clock_ghz", positive_float),
        memory_gib=table.required("memory_gib", positive_float),
        hbm_bandwidth_nominal_tbs=table.required("hbm_bandwidth_nominal_tbs", positive_float),
        fp64_core_flop_per_sm_cycle=table.required("fp64_core_flop_per_sm_cycle", positive_float),
        fp64_tc_flop_per_sm_cycle=table.required("fp64_tc_flop_per_sm_cycle", positive_float),
        source=table.required("source", string),
        hbm_bandwidth_measured_tbs=table.optional("hbm_bandwidth_measured_tbs", positive_float),
        l2_mib=table.optional("l2_mib", positive_float),
        dmma=_parse_dmma(table),
        stated=_parse_floats(
            table.optional_table("stated"),
            ("fp64_core_peak_tflops", "fp64_tc_peak_tflops", "hbm_bytes_per_sm_cycle"),
        ),
        system=_parse_strings(table.optional_table("system"), SYSTEM_KEYS),
    )
    table.reject_unknown()
    derived = machine.derived()
    for key, value in machine.stated.items():
        if abs(value - derived[key]) > STATED_TOLERANCE * abs(derived[key]):
            raise ConfigError(
                f"{table.file_of('stated')}: machines.{name}.stated.{key}: stated {value} but the "
                f"other entries give {derived[key]:.4g} (more than {STATED_TOLERANCE:.0%} apart)"
            )
    return machine


def _parse_dmma(table: Table) -> tuple[DmmaShape, ...]:
    value = table.optional("dmma", _list_of_tables, [])
    shapes = []
    for index, item in enumerate(value):
        sub = Table(item, table.file_of("dmma"), table.dotted(f"dmma[{index}]"))
        shapes.append(
            DmmaShape(
                shape=sub.required("shape", _shape),
                pipe_cycles=sub.required("pipe_cycles", positive_float),
            )
        )
        sub.reject_unknown()
    return tuple(shapes)


def _parse_floats(table: Table | None, keys: tuple[str, ...]) -> dict[str, float]:
    if table is None:
        return {}
    out = {key: table.optional(key, positive_float) for key in keys}
    table.reject_unknown()
    return {k: v for k, v in out.items() if v is not None}


def _parse_strings(table: Table | None, keys: tuple[str, ...]) -> dict[str, str]:
    if table is None:
        return {}
    out = {key: table.optional(key, string) for key in keys}
    table.reject_unknown()
    return {k: v for k, v in out.items() if v is not None}


# --- checkers ---------------------------------------------------------------------------------


def _arch(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(r"sm_\d+[a-z]?", value):
        return value
    raise Expected("an architecture name like 'sm_90'")


def _capability(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(r"\d+\.\d+", value):
        return value
    raise Expected("a compute capability string like '9.0'")


def _shape(value: Any) -> str:
    if isinstance(value, str) and _SHAPE.match(value):
        return value
    raise Expected("an MMA shape like 'm8n8k4'")


def _list_of_tables(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return value
    raise Expected("an array of tables ([[...dmma]] entries)")
