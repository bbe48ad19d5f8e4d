"""The raw measurement of one benchmark run, as the GPU driver loop produces it.

Why raw: every derived number (per-call device time, medians, ratios, roof fractions)
is recomputed from these fields, so an accounting error can be fixed after the fact
without re-measuring (the paper had to do exactly that, Section S13.3).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from composer.bench.nvml import ClockSample, ClockSummary, summarize_samples

#: SSP-RK3 (operator.md, "Time integration"): three tendency calls per step.
STAGES_PER_STEP = 3

JobKey = tuple[str, int, int]  # (path, order, round_index)


def options_key(options: dict[str, Any]) -> str:
    """Canonical, order-independent string of a run's options (grouping/resume key)."""
    return json.dumps(options, sort_keys=True, separators=(",", ":"), default=str)


def _num(x: Any) -> float:
    """JSON null (how strict-JSON files store NaN, e.g. a failed run's time) -> NaN."""
    return math.nan if x is None else float(x)


@dataclass
class RunRecord:
    """One run of one path at one order in one interleaved round.

    Timing accounting (paper Section 4.2 and S13.3):

    * ``stage_wall_s`` -- step-loop wall time per RK stage: the host wall time of the
      timed step loop divided by ``timed_stages``. It includes the RK update and the
      launch gaps at stage boundaries; it is the primary metric.
    * ``device_sum_ms`` -- sum of CUDA-event intervals around the tendency call.
      The timer reads each event pair back one call later, so no read-back stalls the
      GPU inside a stage. When the accumulator is reset at the start of the timed
      interval, the last warm-up call's pair is still pending; a correct driver
      *discards* it, and the last timed call's pair is read back after the loop. The sum
      then covers exactly ``timed_stages`` intervals. ``device_intervals`` is the count
      the driver actually summed; it is stored separately and is the divisor of
      ``device_per_call_s`` (the paper divides by the number of calls covered, N or
      N + 1). ``intervals_mismatch`` flags device_intervals != timed_stages, i.e. a
      driver that added the pending warm-up interval (high by (N + 1)/N if divided by N).
    * ``end_to_end_s`` -- wall time per step including host overheads (cross-check).
    * ``timed_stages`` = N = STAGES_PER_STEP * (nstep - warmup_steps): ``nstep`` counts
      all steps executed, the first ``warmup_steps`` untimed (Section S14.1).

    A failed run keeps ``error`` (non-None) and is excluded from medians but kept in
    the record, as the paper lists failed runs in its measurement record.
    """

    path: str
    order: int
    grid: tuple[int, int, int]
    round_index: int
    stage_wall_s: float
    device_sum_ms: float
    device_intervals: int
    end_to_end_s: float
    timed_stages: int
    warmup_steps: int
    nstep: int
    clocks: list[ClockSample] = field(default_factory=list)
    validation_error: float | None = None
    options: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    started_utc: str | None = None
    #: The compiler of the kernels (Path.kernel_origin; None where the path has one source only).
    kernel_origin: str | None = None
    #: What the path reports of its setup (Path.diagnostics: a carveout's split, the side queues' sides).
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.grid = tuple(int(g) for g in self.grid)  # type: ignore[assignment]
        if len(self.grid) != 3:
            raise ValueError(f"grid must be (NeX, NeY, NeZ), got {self.grid!r}")

    # -- derived -------------------------------------------------------------------------
    @property
    def ok(self) -> bool:
        """True for a run that completed (return code zero); only these enter medians."""
        return self.error is None

    @property
    def device_per_call_s(self) -> float:
        """CUDA-event device time per tendency call = sum / calls it covers (S13.3)."""
        if self.device_intervals <= 0 or not math.isfinite(self.device_sum_ms):
            return math.nan
        return self.device_sum_ms / 1000.0 / self.device_intervals

    @property
    def expected_timed_stages(self) -> int:
        return STAGES_PER_STEP * (self.nstep - self.warmup_steps)

    @property
    def intervals_mismatch(self) -> bool:
        """The CUDA-event sum does not cover exactly the N timed stages."""
        return self.device_intervals != self.timed_stages

    def accounting_issues(self) -> list[str]:
        """Human-readable list of timing-accounting inconsistencies (empty when clean)."""
        issues: list[str] = []
        if self.intervals_mismatch:
            n, k = self.timed_stages, self.device_intervals
            extra = f" (N+{k - n}: includes the pending warm-up interval)" if k > n else ""
            issues.append(f"device sum covers {k} intervals but N = {n} timed stages{extra}")
        if self.timed_stages != self.expected_timed_stages:
            issues.append(
                f"timed_stages = {self.timed_stages} but {STAGES_PER_STEP} x (nstep - warmup) "
                f"= {self.expected_timed_stages}")
        return issues

    @property
    def key(self) -> JobKey:
        """Resume key; matches interleave.Job.key."""
        return (self.path, self.order, self.round_index)

    @property
    def options_key(self) -> str:
        return options_key(self.options)

    def clock_summary(self) -> ClockSummary:
        return summarize_samples(self.clocks, available=bool(self.clocks),
                                 reason="" if self.clocks else "no NVML samples recorded")

    # -- serialization -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the raw fields (derived values are recomputed on load)."""
        return {
            "path": self.path, "order": self.order, "grid": list(self.grid),
            "round_index": self.round_index, "stage_wall_s": self.stage_wall_s,
            "device_sum_ms": self.device_sum_ms, "device_intervals": self.device_intervals,
            "end_to_end_s": self.end_to_end_s, "timed_stages": self.timed_stages,
            "warmup_steps": self.warmup_steps, "nstep": self.nstep,
            "clocks": [c.to_dict() for c in self.clocks],
            "validation_error": self.validation_error, "options": dict(self.options),
            "error": self.error, "started_utc": self.started_utc, "kernel_origin": self.kernel_origin,
            **({"diagnostics": dict(self.diagnostics)} if self.diagnostics else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunRecord:
        return cls(
            path=str(d["path"]), order=int(d["order"]), grid=tuple(d["grid"]),
            round_index=int(d["round_index"]), stage_wall_s=_num(d["stage_wall_s"]),
            device_sum_ms=_num(d["device_sum_ms"]), device_intervals=int(d["device_intervals"]),
            end_to_end_s=_num(d["end_to_end_s"]), timed_stages=int(d["timed_stages"]),
            warmup_steps=int(d["warmup_steps"]), nstep=int(d["nstep"]),
            clocks=[ClockSample.from_dict(c) for c in d.get("clocks", [])],
            validation_error=d.get("validation_error"), options=dict(d.get("options", {})),
            error=d.get("error"), started_utc=d.get("started_utc"), kernel_origin=d.get("kernel_origin"),
            diagnostics=dict(d.get("diagnostics", {})),
        )


__all__ = ["STAGES_PER_STEP", "JobKey", "options_key", "RunRecord"]
