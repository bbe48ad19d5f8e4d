"""The per-GEMM library assignment sweep: which of CuTe DSL and cuBLAS runs each volume GEMM.

Pure logic, testable with synthetic timings: every assignment of the three roles is measured in
interleaved rounds (each round runs every assignment once, in a rotated order, so drift in
clocks or temperature spreads over all candidates alike), the winner is the smallest median, and
it is written into the schedule's ``[paths.GEMM_CUTE]`` table as ``library = {x = .., y = .., z = ..}``
plus the ``mma`` shape it was measured with.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from composer.bench.interleave import interleaved_samples
from composer.config.schedule_edit import set_table_lines
from composer.gemm.roles import ROLES

LIBRARIES = ("cute", "cublas")
#: Who runs each role when neither an option nor the schedule says: our CuTe GEMM.
DEFAULT_LIBRARY: dict[str, str] = {"x": "cute", "y": "cute", "z": "cute"}
Assignment = tuple[tuple[str, str], ...]  # (("x", "cute"), ("y", "cublas"), ("z", "cute"))


def all_assignments(libraries: tuple[str, ...] = LIBRARIES) -> list[Assignment]:
    """Every mapping role -> library (2^3 = 8 for two libraries)."""
    return [tuple(zip(ROLES, combo)) for combo in itertools.product(libraries, repeat=len(ROLES))]


def label(assignment: Assignment) -> str:
    """``x=cute,y=cublas,z=cute``."""
    return ",".join(f"{r}={lib}" for r, lib in assignment)


def parse_label(text: str) -> Assignment:
    pairs = dict(item.split("=", 1) for item in text.split(","))
    if set(pairs) != set(ROLES) or not set(pairs.values()) <= set(LIBRARIES):
        raise ValueError(f"bad assignment {text!r}: expected x=LIB,y=LIB,z=LIB with LIB in {LIBRARIES}")
    return tuple((r, pairs[r]) for r in ROLES)


@dataclass(frozen=True)
class SweepResult:
    """Samples (seconds) per assignment label, and the winner by median."""

    samples: dict[str, list[float]]
    winner: str

    @property
    def medians(self) -> dict[str, float]:
        return {k: statistics.median(v) for k, v in self.samples.items()}

    def speedup_over(self, baseline: str = "x=cublas,y=cublas,z=cublas") -> float:
        """Median time of ``baseline`` over the winner's (> 1: the winner is faster)."""
        med = self.medians
        return med[baseline] / med[self.winner]


def sweep(measure: Callable[[Assignment], float], rounds: int = 5,
          assignments: list[Assignment] | None = None) -> SweepResult:
    """Run ``measure`` on every assignment once per round, rotating the order each round."""
    cands = assignments or all_assignments()
    by_label = {label(a): a for a in cands}
    samples = interleaved_samples(lambda lab: measure(by_label[lab]), list(by_label), rounds)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    # ties resolve to the assignment using cuBLAS more (the reference path is the safe default)
    winner = min(by_label, key=lambda lab: (medians[lab], lab.count("cute")))
    return SweepResult(samples, winner)


def write_assignment(schedule_file: Path, assignment: Assignment | Mapping[str, str], mma: str) -> None:
    """Set ``library`` and ``mma`` in the file's ``[paths.GEMM_CUTE]`` table (created if absent)."""
    lib = dict(assignment)
    set_table_lines(schedule_file, "paths.GEMM_CUTE", {
        "library": "library = { " + ", ".join(f'{r} = "{lib[r]}"' for r in ROLES) + " }",
        "mma": f'mma = "{mma}"'})
