"""Measured path totals to score predictions against: a ``composer bench`` results directory
(per-call device time or step-loop time per stage, median over rounds) or a ``composer profile``
directory (the sum of kernel durations in the ncu window, the paper's model-campaign timer, with
the per-kernel durations).

Each cell carries the active SM count it ran on (``sms``; None for the whole device), read from
the bench options (``composer bench --sms``) or the profile summary (``composer profile --sms``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from composer.model.calibrate import PROFILE_SUMMARY, kernel_roles
from composer.model.counters import profile_files, read_profile_text
from composer.model.errors import MissingMetricError, ModelError
from composer.profile.ncu import parse_raw_csv

BENCH_SUMMARY = "summary.json"
BENCH_METRICS = ("device_per_call_s", "stage_wall_s")
DURATION_METRIC = "gpu__time_duration.sum"


@dataclass(frozen=True)
class MeasuredCell:
    """One measured (path, order) at one SM count."""

    path: str
    order: int
    sms: int | None
    seconds: float
    source: str
    kernels: dict[str, float] = field(default_factory=dict)  # role -> seconds (profiles only)
    #: median NVML SM clock of the timed loop (benches that sampled it; None otherwise)
    sm_clock_hz: float | None = None


def _bench_cells(directory: Path, metric: str) -> list[MeasuredCell]:
    file = directory / BENCH_SUMMARY
    try:
        raw = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"{file}: not readable JSON ({exc})") from None
    by_key: dict[tuple[str, int, int | None], list[tuple[dict, float]]] = {}
    for summary in raw.get("summaries", []):
        options = json.loads(summary.get("options_key") or "{}")
        stats = summary.get("stats", {}).get(metric)
        if not stats or stats.get("median") is None:
            continue
        key = (str(summary["path"]), int(summary["order"]), options.get("sms"))
        clock = (summary.get("clocks") or {}).get("sm_clock_mhz_median")
        by_key.setdefault(key, []).append((options, float(stats["median"]), None if clock is None else float(clock) * 1e6))
    cells = []
    for (path, order, sms), found in sorted(by_key.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
        plain = [f for f in found if not f[0].get("graph")] or found
        if len(plain) > 1:
            raise ModelError(f"{file}: {path} p={order} was run with several options "
                             f"({'; '.join(json.dumps(o, sort_keys=True) for o, *_ in plain)}); "
                             "score one configuration per results directory")
        cells.append(MeasuredCell(path, order, sms, plain[0][1], str(file), sm_clock_hz=plain[0][2]))
    return cells


def _profile_sms(directory: Path) -> dict[tuple[str, int], int]:
    file = directory / PROFILE_SUMMARY
    if not file.is_file():
        return {}
    raw = json.loads(file.read_text())
    return {(e["path"], int(e["order"])): int(e["sms"]["active"]) for e in raw.values()
            if isinstance(e, dict) and e.get("sms")}


def _profile_cells(directory: Path) -> list[MeasuredCell]:
    sms = _profile_sms(directory)
    cells = []
    for (path, order), file in profile_files(directory).items():
        rows = parse_raw_csv(read_profile_text(file))
        kernels: dict[str, float] = {}
        for row, (_, role) in zip(rows, kernel_roles(r.get("Kernel Name", "?") for r in rows)):
            value = row.get(DURATION_METRIC, "").replace(",", "").strip()
            if not value:
                raise MissingMetricError(f"{file}: kernel {row.get('Kernel Name')}: metric {DURATION_METRIC} is missing")
            kernels[role] = float(value) * 1e-9
        cells.append(MeasuredCell(path, order, sms.get((path, order)), sum(kernels.values()), str(file), kernels))
    return cells


def per_cycle(cells: list[MeasuredCell], clock_hz: float) -> list[MeasuredCell]:
    """Bench cells rescaled to ``clock_hz`` (the boost clock a prediction prices at): seconds x the
    run's median SM clock / ``clock_hz``, i.e. its SM cycles at that clock. Why (session 20): under
    the H200's power cap the bench ran FUSED_TC16's p = 767 twins at 1740-1815 MHz, 12-13 % slower
    than their cycles, a miss of the clock and not of the transfer. Profile cells (ncu) and bench
    cells without clock samples are refused: nothing says their clock."""
    import dataclasses

    out = []
    for c in cells:
        if c.sm_clock_hz is None:
            raise ModelError(f"{c.source}: {c.path} p={c.order} has no SM clock samples to normalize by "
                             "(a profile, or a bench without NVML)")
        out.append(dataclasses.replace(c, seconds=c.seconds * c.sm_clock_hz / clock_hz))
    return out


def read_measured(directory: Path | str, metric: str = "device_per_call_s") -> list[MeasuredCell]:
    """Measured cells of a bench results or profile directory (``metric`` applies to bench)."""
    directory = Path(directory)
    if metric not in BENCH_METRICS:
        raise ModelError(f"unknown bench metric {metric!r}; one of {', '.join(BENCH_METRICS)}")
    if (directory / BENCH_SUMMARY).is_file():
        return _bench_cells(directory, metric)
    if directory.is_dir() and profile_files(directory):
        return _profile_cells(directory)
    raise ModelError(f"{directory}: neither a `composer bench` results directory ({BENCH_SUMMARY}) "
                     "nor a `composer profile` directory (PATH-pORDER.csv)")
