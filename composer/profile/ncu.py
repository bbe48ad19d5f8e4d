"""Run Nsight Compute on one tendency call and reduce its raw metrics to the binding resource.

Why the raw page with base units: it holds every metric the requested sections collected, one row
per kernel launch, in bytes/nanoseconds/percent without unit scaling, so parsing does not depend
on ncu's human-readable formatting. Metric families (pipes, stall reasons) are matched by pattern,
so a newer ncu that adds or renames a pipe still parses.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from composer.errors import ComposerError

# Sections requested from ncu (those a given ncu lacks are dropped after `ncu --list-sections`).
SECTIONS: tuple[str, ...] = (
    "SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats", "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Tables", "ComputeWorkloadAnalysis", "InstructionStats",
)
# A unit below this fraction of its peak does not bind: the kernel is latency bound.
BINDING_THRESHOLD_PCT = 60.0

_UNITS = {  # the throughput metrics that name a hardware unit (first metric present wins)
    "DRAM": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",
             "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    # lts__throughput is the busiest of the L2's sub-units; tags and sectors say which work it is
    "L2": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
    "L2 tags": ("lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed",),
    "L2 sectors": ("lts__t_sectors.avg.pct_of_peak_sustained_elapsed",),
    "L1/shared": ("l1tex__throughput.avg.pct_of_peak_sustained_active",),
    # the link between the two L2 partitions (sm_80/sm_90): a sector whose home is the far partition
    # crosses it. Session 27 (H100, ncu's breakdown of lts__throughput): the "L2 91-96 %" of the p = 7
    # and 15 box kernels is this link (94-96 % of its cycles active), not the tags (56-69 %) or the
    # sectors (38-65 %). Cycles active, not a bandwidth: with DRAM at 77-89 % beside it neither sets the
    # time alone (10 % fewer sectors across it bought 2 %), so as the busiest unit it names, not proves.
    "L2 fabric": ("lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed",),
}
#: Asked of ncu on top of the sections: lts__throughput's sub-units, which ncu expands per architecture
#: (those absent on a GPU are simply not requested), so that "L2 fabric" can be read where it exists.
UNIT_BREAKDOWNS: tuple[str, ...] = ("breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed",)
_PIPE = re.compile(r"^sm__(?:inst_executed_)?pipe_(\w+?)(?:_cycles_active)?\.avg\.pct_of_peak_sustained_active$")
_STALL = re.compile(r"^smsp__average_warps?_issue_stalled_(\w+)_per_issue_active\.ratio$")


def find_ncu() -> str:
    """Path of the ncu executable (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin), or a clear error."""
    candidates = [shutil.which("ncu")]
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            candidates.append(str(Path(root) / "bin" / "ncu"))
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise ComposerError("Nsight Compute (ncu) was not found on PATH, in $CUDA_HOME/bin or "
                        "/usr/local/cuda/bin; install it or put it on PATH to profile")


def available_sections(listing: str) -> set[str]:
    """Section identifiers in the output of `ncu --list-sections` (first column of its table)."""
    names = set()
    for line in listing.splitlines():
        token = line.strip().split(" ")[0] if line.strip() else ""
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", token):
            names.add(token)
    return names


#: ncu's replay modes: each kernel replayed with its memory saved and restored (ncu's default), or
#: the whole profiled range rerun once per pass (no memory save/restore; the H200's p = 63 profiles
#: crashed the target under kernel replay in sessions 6 and 7, not yet understood).
REPLAY_MODES = ("kernel", "application")


def ncu_command(ncu: str, sections: list[str], log_file: Path, target: list[str],
                metrics: tuple[str, ...] = (), replay: str | None = None) -> list[str]:
    """ncu command line: one call bracketed by cuProfilerStart/Stop, fixed clocks not forced;
    ``metrics`` are collected on top of the sections (the performance model's counters);
    ``replay`` one of REPLAY_MODES (None: ncu's default, kernel)."""
    cmd = [ncu, "--target-processes", "all", "--profile-from-start", "off",
           "--clock-control", "none", "--csv", "--page", "raw", "--print-units", "base",
           "--log-file", str(log_file)]
    if replay is not None:
        if replay not in REPLAY_MODES:
            raise ValueError(f"replay mode {replay!r}: expected one of {', '.join(REPLAY_MODES)}")
        cmd += ["--replay-mode", replay]
    for s in sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + target


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not text or text in {"n/a", "N/A"}:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict[str, str]]:
    """Rows of ncu's `--csv --page raw` output (header, units row, one row per kernel launch).

    Lines before the header (ncu's ==PROF== messages in a log file) are skipped.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ComposerError("no ncu CSV table found (did the profiled call launch any kernel?)")
    reader = csv.reader(io.StringIO("\n".join(lines[start:])))
    header = next(reader)
    rows = []
    for n, values in enumerate(reader):
        if n == 0 and values and not values[0].strip():  # the units row
            continue
        if len(values) == len(header):
            rows.append(dict(zip(header, values)))
    return rows


@dataclass
class KernelProfile:
    """One kernel launch reduced to what decides its speed."""

    kernel: str
    block: str
    grid: str
    duration_us: float | None
    dram_bytes: float | None
    dram_tbps: float | None
    registers: float | None
    shared_bytes: float | None
    occupancy_achieved_pct: float | None
    occupancy_theoretical_pct: float | None
    units_pct: dict[str, float] = field(default_factory=dict)
    pipes_pct: dict[str, float] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)
    smem_bank_conflicts: float | None = None
    instructions: float | None = None  # warp-level SASS instructions executed
    shared_wavefronts: float | None = None  # L1 data-pipe wavefronts of shared-memory accesses
    #: bytes of the L2 sectors the SMs read, and of those that crossed the link between the L2 partitions
    #: (session 27: at p <= 255 the fused kernels read 1.25-1.63x their DRAM reads in sectors, 40-46 % across)
    l2_read_bytes: float | None = None
    fabric_bytes: float | None = None
    binding: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _binding(units: dict[str, float], pipes: dict[str, float], stalls: dict[str, float]) -> str:
    # the "L2" aggregate is the busiest of many L2 sub-units (some not reported separately): the
    # binding is named from its tag and sector throughput instead, which say what work it is
    candidates = {**{k: v for k, v in units.items() if k != "L2" or not
                     ({"L2 tags", "L2 sectors"} & set(units))},
                  **{f"pipe {k}": v for k, v in pipes.items()}}
    if not candidates:
        return "unknown (no throughput metrics)"
    name, pct = max(candidates.items(), key=lambda kv: kv[1])
    if pct >= BINDING_THRESHOLD_PCT:
        return f"{name} ({pct:.0f} % of peak)"
    top = max(stalls.items(), key=lambda kv: kv[1])[0] if stalls else "unknown"
    return f"latency (busiest: {name} {pct:.0f} %; top stall: {top})"


#: Bytes of one L2 sector.
SECTOR_BYTES = 32


def _sector_bytes(sectors: float | None) -> float | None:
    return None if sectors is None else sectors * SECTOR_BYTES


def summarize(row: dict[str, str]) -> KernelProfile:
    """Reduce one raw row: time, DRAM traffic, unit and pipe utilization, occupancy, stalls."""
    num = {k: _number(v) for k, v in row.items()}
    duration_ns = num.get("gpu__time_duration.sum")
    read, write = num.get("dram__bytes_read.sum"), num.get("dram__bytes_write.sum")
    dram = read + write if read is not None and write is not None else num.get("dram__bytes.sum")
    units = {}
    for name, metrics in _UNITS.items():
        found = next((num[m] for m in metrics if num.get(m) is not None), None)
        if found is not None:
            units[name] = found
    pipes = {m.group(1): v for key, v in num.items() if v is not None and (m := _PIPE.match(key))}
    pipes = dict(sorted(pipes.items(), key=lambda kv: -kv[1])[:4])
    stalls = {m.group(1): v for key, v in num.items() if v is not None and (m := _STALL.match(key))}
    stalls = dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:4])
    return KernelProfile(
        kernel=row.get("Kernel Name", "?"), block=row.get("Block Size", ""), grid=row.get("Grid Size", ""),
        duration_us=duration_ns / 1e3 if duration_ns is not None else None,
        dram_bytes=dram,
        dram_tbps=dram / duration_ns / 1e3 if dram is not None and duration_ns else None,
        registers=num.get("launch__registers_per_thread"),
        shared_bytes=num.get("launch__shared_mem_per_block_dynamic"),
        occupancy_achieved_pct=num.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        occupancy_theoretical_pct=num.get("sm__maximum_warps_per_active_cycle_pct"),
        units_pct=units, pipes_pct=pipes, stalls=stalls,
        smem_bank_conflicts=num.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"),
        instructions=num.get("smsp__inst_executed.sum"),
        shared_wavefronts=num.get("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"),
        l2_read_bytes=_sector_bytes(num.get("lts__t_sectors_srcunit_tex_op_read.sum")),
        fabric_bytes=_sector_bytes(num.get("lts__t_sectors_srcunit_ltcfabric.sum")),
        binding=_binding(units, pipes, stalls),
    )
