"""Machine capacity table (``schedules/machines.toml``): the paper's Tables 3, 5, 6 and S13 plus
the lab's H200, as data, so the roofline and the performance model read capacities from one place.

The instruction-aware model (``composer.model``) reads a machine as capacities per SM cycle
(Table 5, S13) and prices one DMMA instruction of each shape in the counter-defined FP64 budget:
``c_tc = max(4, F_DMMA / C_tc)`` cycles, with the four-cycle floor, and one warp-wide DFMA at
``c_cc = 64 / C_cc`` (Equation 6). The prices are derived here from the capacities; a price printed
by the source (``pipe_cycles``) is checked against the derived one, so Table 6 is reproduced from
Table 5 rather than copied.

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
    one_of,
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
PRICE_TOLERANCE = 0.0005  # absolute, cycles: Table 6 prints its prices to three decimals
#: The measured minimum contribution of one DMMA instruction to the FP64 budget (paper §6.3:
#: 3.96-4.02 cycles in the 33 DMMA kernels at p = 511 on three machines).
DMMA_FLOOR_CYCLES = 4.0
#: FLOP of one warp-wide DFMA instruction (32 lanes x 2).
DFMA_WARP_FLOP = 64
#: Capacities per SM cycle besides the FP64 budget and DRAM (Table S13), and the model's name for
#: the resource each one bounds.
CAPACITY_KEYS = ("lsu_wavefronts", "issue", "alu", "fma", "l2_bytes")
#: Every capacity needs its source: the two FP64 rates, DRAM and the CAPACITY_KEYS.
CAPACITY_SOURCE_KEYS = ("fp64", "dram", *CAPACITY_KEYS)
DRAM_BASES = ("nominal", "measured", "scaled")
#: What the L2 capacity per SM cycle is: the constant ``l2_bytes`` (the paper's normalization) or the
#: measured L2-resident copy curve ``l2_copy_tbs`` over SMs x clock.
L2_BASES = ("normalization", "copy")
SYSTEM_KEYS = ("site", "host", "driver", "toolchain", "build_flags")
_SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class DmmaShape:
    """One FP64 MMA shape the machine issues as a single SASS instruction; ``pipe_cycles`` is the
    price per instruction its source printed (Table 6), checked against the derived price."""

    shape: str
    pipe_cycles: float | None = None

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


def dmma_price(flop: float, tc_flop_per_sm_cycle: float, floor: bool = True) -> float:
    """Cycles one DMMA instruction of ``flop`` FLOP costs in the FP64 budget (Equation 6).

    ``floor=False`` gives the pure FLOP price of the paper's floor ablation (Table 7).
    """
    price = flop / tc_flop_per_sm_cycle
    return max(DMMA_FLOOR_CYCLES, price) if floor else price


@dataclass(frozen=True)
class Capacity:
    """Capacities per SM cycle of the demands of Equation 3 other than the FP64 budget (priced per
    instruction from the machine's FP64 rates) and DRAM (derived from its HBM bandwidth).

    ``dram_from`` names which HBM bandwidth of the machine the DRAM capacity divides:
    ``"nominal"`` (the datasheet peak, as the paper's Table 5), ``"measured"`` (the copy
    bandwidth, for a machine whose datasheet figure we do not trust or do not have) or
    ``"scaled"`` (the datasheet peak times ``dram_scale``: an assumed copy bandwidth for a machine
    not measured yet, e.g. another machine's measured/datasheet ratio, so that its capacity sits on
    the same basis as a calibration machine's ``"measured"`` one). ``source`` holds one citation
    per entry of CAPACITY_SOURCE_KEYS (and ``dram_scale`` where given).
    """

    dram_from: str
    lsu_wavefronts: float  # L1 data-pipe LSU wavefronts
    issue: float  # warp instructions issued
    alu: float  # ALU-pipe warp instructions
    fma: float  # FMA-pipe warp instructions
    l2_bytes: float  # L2 bytes
    source: dict[str, str] = field(default_factory=dict)
    #: HBM bytes per cycle one SM can draw on its own (a copy kernel inside a green context of a
    #: few SMs), None where unmeasured: the ceiling of the DRAM capacity per active SM once the
    #: balance axis restricts SMs so far that the partition, not the chip, limits bandwidth.
    dram_sm_ceiling: float | None = None
    #: The L2-resident copy bandwidth (TB/s, read + written) measured inside green contexts of
    #: these SM counts, ``((sms, tbs), ...)`` by SM count, or empty where unmeasured: the L2 capacity
    #: per active SM cycle is then this curve over SMs x clock (the chip's L2 limits a full chip to
    #: about half of what one SM can draw on its own) instead of the constant ``l2_bytes``.
    l2_copy_tbs: tuple[tuple[int, float], ...] = ()
    #: Which of the two the model prices L2 bytes with (L2_BASES); "copy" needs ``l2_copy_tbs``.
    l2_from: str = "normalization"
    #: The fraction of the datasheet HBM bandwidth taken as the DRAM capacity (dram_from = "scaled"
    #: only; 0 < dram_scale <= 1), None otherwise.
    dram_scale: float | None = None

    def l2_at(self, sms: int, clock_hz: float) -> float:
        """L2 bytes per active SM cycle at ``sms`` SMs: ``l2_bytes`` unless ``l2_from = "copy"``, then
        the curve linearly interpolated in SM count (per SM at the smallest count below it, the
        largest count's bandwidth above it) over sms x clock."""
        if self.l2_from != "copy" or not self.l2_copy_tbs:
            return self.l2_bytes
        points = self.l2_copy_tbs
        if sms <= points[0][0]:
            tbs = points[0][1] * sms / points[0][0]
        elif sms >= points[-1][0]:
            tbs = points[-1][1]
        else:
            (n0, b0), (n1, b1) = next((a, b) for a, b in zip(points, points[1:]) if a[0] <= sms <= b[0])
            tbs = b0 + (b1 - b0) * (sms - n0) / (n1 - n0)
        return tbs * 1e12 / (sms * clock_hz)

    def per_sm_cycle(self) -> dict[str, float]:
        """The CAPACITY_KEYS entries by name."""
        return {key: getattr(self, key) for key in CAPACITY_KEYS}


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
    capacity: Capacity | None = None

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

    @property
    def dram_bytes_per_sm_cycle(self) -> float | None:
        """The model's DRAM capacity: HBM bytes per SM cycle on the basis ``capacity.dram_from``
        names (None without a capacity table)."""
        if self.capacity is None:
            return None
        if self.capacity.dram_from == "measured":
            assert self.hbm_bandwidth_measured_tbs is not None  # checked on load
            return self.hbm_bandwidth_measured_tbs * 1e12 / self.sm_cycles_per_second
        if self.capacity.dram_from == "scaled":
            assert self.capacity.dram_scale is not None  # checked on load
            return self.hbm_bytes_per_sm_cycle * self.capacity.dram_scale
        return self.hbm_bytes_per_sm_cycle

    @property
    def dmma_shapes(self) -> tuple[str, ...]:
        """The DMMA shapes the machine issues as one SASS instruction (``m8n8k4`` spelling)."""
        return tuple(d.shape for d in self.dmma)

    def dmma_price(self, flop: float, floor: bool = True) -> float:
        """c_tc of a DMMA instruction of ``flop`` FLOP on this machine (Equation 6)."""
        return dmma_price(flop, self.fp64_tc_flop_per_sm_cycle, floor)

    @property
    def dfma_price(self) -> float:
        """c_cc: cycles one warp-wide DFMA costs in the FP64 budget (Equation 6)."""
        return DFMA_WARP_FLOP / self.fp64_core_flop_per_sm_cycle

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
        capacity=_parse_capacity(table.optional_table("capacity")),
    )
    table.reject_unknown()
    if (machine.capacity is not None and machine.capacity.dram_from == "measured"
            and machine.hbm_bandwidth_measured_tbs is None):
        raise table.error("capacity", "dram_from = 'measured' needs hbm_bandwidth_measured_tbs")
    if (machine.capacity is not None and machine.capacity.dram_sm_ceiling is not None
            and machine.dram_bytes_per_sm_cycle is not None
            and machine.capacity.dram_sm_ceiling < machine.dram_bytes_per_sm_cycle):
        raise table.error("capacity", f"dram_sm_ceiling = {machine.capacity.dram_sm_ceiling} is below the whole "
                          f"chip's {machine.dram_bytes_per_sm_cycle:.2f} B per SM cycle: one SM cannot draw less "
                          "than its share")
    if machine.capacity is not None and machine.capacity.l2_copy_tbs \
            and machine.capacity.l2_copy_tbs[-1][0] > machine.sm_count:
        raise table.error("capacity", f"l2_copy_tbs names {machine.capacity.l2_copy_tbs[-1][0]} SMs; the machine has "
                          f"{machine.sm_count}")
    for dmma in machine.dmma:
        price = machine.dmma_price(dmma.flop)
        if dmma.pipe_cycles is not None and abs(dmma.pipe_cycles - price) > PRICE_TOLERANCE:
            raise ConfigError(
                f"{table.file_of('dmma')}: machines.{name}.dmma {dmma.shape}: pipe_cycles "
                f"{dmma.pipe_cycles} but max({DMMA_FLOOR_CYCLES:g}, {dmma.flop} / "
                f"{machine.fp64_tc_flop_per_sm_cycle}) = {price:.4f}")
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
                pipe_cycles=sub.optional("pipe_cycles", positive_float),
            )
        )
        sub.reject_unknown()
    return tuple(shapes)


def _parse_capacity(table: Table | None) -> Capacity | None:
    if table is None:
        return None
    sources = table.table("source")
    capacity = Capacity(
        dram_from=table.required("dram_from", one_of(DRAM_BASES)),
        **{key: table.required(key, positive_float) for key in CAPACITY_KEYS},
        source={key: sources.required(key, string) for key in CAPACITY_SOURCE_KEYS},
        dram_sm_ceiling=table.optional("dram_sm_ceiling", positive_float),
        l2_copy_tbs=_l2_curve(table),
        l2_from=table.optional("l2_from", one_of(L2_BASES), "normalization"),
        dram_scale=table.optional("dram_scale", positive_float),
    )
    if capacity.dram_from == "scaled" and capacity.dram_scale is None:
        raise table.error("dram_scale", "dram_from = 'scaled' needs dram_scale (the fraction of the datasheet HBM "
                          "bandwidth taken as the DRAM capacity)")
    if capacity.dram_scale is not None and capacity.dram_from != "scaled":
        raise table.error("dram_scale", f"dram_scale is used only with dram_from = 'scaled' (here "
                          f"{capacity.dram_from!r})")
    if capacity.dram_scale is not None and capacity.dram_scale > 1.0:
        raise table.error("dram_scale", f"expected a fraction of the datasheet bandwidth in (0, 1], got "
                          f"{capacity.dram_scale}")
    if capacity.dram_scale is not None:
        capacity.source["dram_scale"] = sources.required("dram_scale", string)
    if capacity.l2_from == "copy" and not capacity.l2_copy_tbs:
        raise table.error("l2_from", "l2_from = 'copy' needs the measured curve l2_copy_tbs")
    if capacity.dram_sm_ceiling is not None:
        capacity.source["dram_sm_ceiling"] = sources.required("dram_sm_ceiling", string)
    if capacity.l2_copy_tbs:
        capacity.source["l2_copy_tbs"] = sources.required("l2_copy_tbs", string)
    sources.reject_unknown()
    table.reject_unknown()
    return capacity


def _l2_curve(table: Table) -> tuple[tuple[int, float], ...]:
    """``l2_copy_tbs = { sms = [...], tbs = [...] }``: as many positive bandwidths as distinct
    positive SM counts, returned sorted by SM count."""
    curve = table.optional_table("l2_copy_tbs")
    if curve is None:
        return ()
    sms = curve.required("sms", _a_list)
    tbs = curve.required("tbs", _a_list)
    curve.reject_unknown()
    if not sms or len(sms) != len(tbs):
        raise curve.error("", f"sms and tbs need the same number of entries (got {len(sms)} and {len(tbs)})")
    if any(not isinstance(n, int) or isinstance(n, bool) or n <= 0 for n in sms) or len(set(sms)) != len(sms):
        raise curve.error("sms", f"expected distinct positive SM counts, got {sms}")
    try:
        bandwidths = [positive_float(b) for b in tbs]
    except Expected:
        raise curve.error("tbs", f"expected positive finite bandwidths in TB/s, got {tbs}") from None
    return tuple(sorted((int(n), b) for n, b in zip(sms, bandwidths)))


def _a_list(value: Any) -> list:
    if not isinstance(value, list):
        raise Expected("a list")
    return value


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
