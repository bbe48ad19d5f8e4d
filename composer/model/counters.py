"""The Nsight Compute counters the model reads, and one kernel launch reduced to them.

Why a fixed list: the model (paper §6.4) is a function of a handful of counter sums per kernel
(instruction counts per pipe, L1 wavefronts, L2 and DRAM bytes, the duration and the SM clock);
naming them once lets ``composer profile`` request exactly these and lets a profile that lacks
one fail with the metric's name instead of a wrong number. Each quantity accepts a few spellings
that are the same count by definition (``smsp__inst_executed.sum`` sums what
``sm__inst_executed.sum`` sums; read + write DRAM bytes are ``dram__bytes``; the GPC clock is what
ncu's SpeedOfLight section reports as the SM frequency).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from composer.model.errors import MissingMetricError
from composer.profile.ncu import parse_raw_csv

#: ``sm__pipe_shared_cycles_active.sum`` counts sub-partition cycles: four per SM cycle at peak.
SUBPARTITIONS_PER_SM = 4


@dataclass(frozen=True)
class Quantity:
    """One number the model reads per kernel: alternatives of ncu metrics, each summed."""

    name: str
    meaning: str
    alternatives: tuple[tuple[str, ...], ...]

    @property
    def metric(self) -> str:
        """The spelling ``composer profile`` requests (the first alternative's first metric)."""
        return self.alternatives[0][0]


QUANTITIES: tuple[Quantity, ...] = (
    Quantity("dmma", "DMMA instructions (the FP64 tensor-core count N_DMMA)",
             (("sm__inst_executed_pipe_tensor_op_dmma.sum",), ("sm__inst_executed_pipe_tensor.sum",))),
    Quantity("fp64", "FP64-pipe warp instructions (N_fp64)", (("sm__inst_executed_pipe_fp64.sum",),)),
    Quantity("issue", "warp instructions issued", (("sm__inst_executed.sum",), ("smsp__inst_executed.sum",))),
    Quantity("alu", "ALU-pipe warp instructions", (("sm__inst_executed_pipe_alu.sum",),)),
    Quantity("fma", "FMA-pipe warp instructions", (("sm__inst_executed_pipe_fma.sum",),)),
    Quantity("lsu_wavefronts", "L1 data-pipe LSU wavefronts", (("l1tex__data_pipe_lsu_wavefronts.sum",),)),
    Quantity("l2_bytes", "L2 bytes", (("lts__t_bytes.sum",),)),
    Quantity("dram_bytes", "DRAM bytes",
             (("dram__bytes.sum",), ("dram__bytes_read.sum", "dram__bytes_write.sum"))),
    Quantity("duration_ns", "kernel duration", (("gpu__time_duration.sum",),)),
    Quantity("clock_hz", "SM clock during the kernel",
             (("sm__cycles_elapsed.avg.per_second",), ("gpc__cycles_elapsed.avg.per_second",))),
)
#: Read when present: the FP64-budget counter of the closure check (Table S12).
BUDGET_METRIC = "sm__pipe_shared_cycles_active.sum"
LAUNCH_METRICS = ("launch__grid_size", "launch__block_size", "launch__registers_per_thread",
                  "launch__sm_count")
#: What ``composer profile`` asks ncu for on top of its sections.
REQUESTED_METRICS: tuple[str, ...] = (*(q.metric for q in QUANTITIES), "dram__bytes_read.sum",
                                      "dram__bytes_write.sum", BUDGET_METRIC, *LAUNCH_METRICS)
_COUNT_NAMES = tuple(q.name for q in QUANTITIES if q.name not in ("duration_ns", "clock_hz"))
_PROFILE_FILE = re.compile(r"^([A-Z][A-Z0-9_]*)-p(\d+)\.csv(\.gz)?$")


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class KernelCounters:
    """One profiled kernel launch: the model's counter sums, its time and clock, its launch shape.

    ``counts`` holds the instruction, wavefront and byte sums by quantity name (``dmma``, ``fp64``,
    ``issue``, ``alu``, ``fma``, ``lsu_wavefronts``, ``l2_bytes``, ``dram_bytes``);
    ``budget_cycles`` is the measured FP64 budget in SM cycles summed over SMs, when profiled.
    """

    name: str
    index: int  # launch position within the profiled call
    counts: dict[str, float]
    duration_s: float
    clock_hz: float
    grid: int
    block: int
    registers: int
    sm_count: int | None = None
    budget_cycles: float | None = None
    metrics: dict[str, str] = field(default_factory=dict)  # quantity -> the metric(s) it was read from

    @property
    def elapsed_cycles(self) -> float:
        """Elapsed SM cycles: profiled duration x the SM clock ncu recorded (paper §6.4)."""
        return self.duration_s * self.clock_hz

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "index": self.index, "counts": self.counts,
                "duration_s": self.duration_s, "clock_hz": self.clock_hz, "grid": self.grid,
                "block": self.block, "registers": self.registers, "sm_count": self.sm_count,
                "budget_cycles": self.budget_cycles}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> KernelCounters:
        return cls(name=str(raw["name"]), index=int(raw["index"]),
                   counts={k: float(v) for k, v in raw["counts"].items()},
                   duration_s=float(raw["duration_s"]), clock_hz=float(raw["clock_hz"]),
                   grid=int(raw["grid"]), block=int(raw["block"]), registers=int(raw["registers"]),
                   sm_count=None if raw.get("sm_count") is None else int(raw["sm_count"]),
                   budget_cycles=None if raw.get("budget_cycles") is None else float(raw["budget_cycles"]))


def _read_quantity(row: Mapping[str, str], quantity: Quantity, where: str) -> tuple[float, str]:
    for alternative in quantity.alternatives:
        values = [_number(row.get(metric)) for metric in alternative]
        if all(v is not None for v in values):
            return sum(values), "+".join(alternative)  # type: ignore[arg-type]
    raise MissingMetricError(
        f"{where}: metric {quantity.metric} is missing ({quantity.meaning}, read by the model); "
        f"profile with `composer profile` (not `--sections-only`), which requests it")


def kernel_counters(row: Mapping[str, str], index: int, where: str) -> KernelCounters:
    """Reduce one raw ncu row; MissingMetricError names the first metric the model needs and lacks."""
    name = row.get("Kernel Name", "").strip() or "?"
    where = f"{where}: kernel {name}"
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for quantity in QUANTITIES:
        values[quantity.name], sources[quantity.name] = _read_quantity(row, quantity, where)
    launch = {}
    for metric in LAUNCH_METRICS[:3]:
        value = _number(row.get(metric))
        if value is None:
            raise MissingMetricError(f"{where}: metric {metric} is missing (the launch shape)")
        launch[metric] = int(value)
    sms = _number(row.get("launch__sm_count"))
    budget = _number(row.get(BUDGET_METRIC))
    return KernelCounters(
        name=name, index=index, counts={k: values[k] for k in _COUNT_NAMES},
        duration_s=values["duration_ns"] * 1e-9, clock_hz=values["clock_hz"],
        grid=launch["launch__grid_size"], block=launch["launch__block_size"],
        registers=launch["launch__registers_per_thread"], sm_count=None if sms is None else int(sms),
        budget_cycles=None if budget is None else budget / SUBPARTITIONS_PER_SM, metrics=sources)


def read_profile_text(path: Path) -> str:
    """The text of one ``composer profile`` raw CSV; a ``.csv.gz`` is read the same way (the
    profiles shipped in docs/data are gzipped where they are large)."""
    if path.suffix == ".gz":
        import gzip

        return gzip.decompress(path.read_bytes()).decode()
    return path.read_text()


def read_profile_csv(path: Path) -> list[KernelCounters]:
    """Every kernel launch of one ``composer profile`` raw CSV, in launch order."""
    rows = parse_raw_csv(read_profile_text(path))
    return [kernel_counters(row, index, str(path)) for index, row in enumerate(rows)]


def profile_files(directory: Path) -> dict[tuple[str, int], Path]:
    """The raw CSVs of a ``composer profile --out`` directory by (path, order): ``PATH-pORDER.csv``
    (or ``.csv.gz``),
    only those its ``profile.json`` lists when it has one. ``composer profile`` adds an entry only
    after ncu finished, so a CSV without one is the partial log of a failed run (sessions 6 and 7:
    the p = 63 crashes left such CSVs beside the good ones)."""
    import json

    listed: set[tuple[str, int]] | None = None
    summary = directory / "profile.json"
    if summary.is_file():
        try:
            entries = json.loads(summary.read_text())
            listed = {(str(e["path"]), int(e["order"])) for e in entries.values() if isinstance(e, dict)}
        except (ValueError, KeyError, TypeError, AttributeError):
            listed = None
    found = {}
    for file in sorted(directory.iterdir()):
        match = _PROFILE_FILE.match(file.name)
        if match:
            key = (match.group(1), int(match.group(2)))
            if listed is None or key in listed:
                found[key] = file
    return found
