"""The overlap exponent k: chosen from pairs of calibrated shapes on the calibration machine.

Why: the paper's T = eta max_r D_r keeps eta across a shape transfer, but when the transfer halves
the binding demand (DMMA.8x8x4 -> 16x8x4 on sm_90) the kernel's time does not halve: the other
resources, hidden under the tensor pipe before, show through (§9.3's "eta drift"; H200 session 8:
FUSED_TC16 from FUSED_TC −8.0 / −18.3 %, GEMM_CUTE 16x8x4 from 8x8x4 −9.1 / −12.0 %). Combining the
demands by a k-norm instead of the max (composer.model.demand.combined) carries that: eta is then
the distance to the k-norm, and a smaller binding term lets the others count.

k is a property of the machine's overlap, not of a kernel: it is chosen here from pairs of paths
that run the same decomposition at two shapes, both calibrated on the same machine (ncu times on
both sides: the calibration's own timing basis), as the candidate with the smallest median
|path error| of the transfer, ties to the larger k (closer to the paper's max). The chosen k then
goes into `composer model fit --overlap K` and predicts other orders, SM counts and machines.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from composer.model.build import Build
from composer.model.calibrate import Model, with_overlap
from composer.model.capacity import Capacities
from composer.model.errors import ModelError
from composer.model.predict import predict

#: Exponents tried (None: the paper's max, k = infinity).
CANDIDATES: tuple[float | None, ...] = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, None)


@dataclass(frozen=True)
class ShapePair:
    """A path predicted from another path's counters, both calibrated on the same machine."""

    source: Model
    source_path: str
    target: Model
    target_path: str
    label: str  # how the user named it, for the report


@dataclass(frozen=True)
class PairError:
    pair: str
    order: int
    predicted_s: float
    measured_s: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0


def measured_seconds(model: Model, path: str, machine: Capacities) -> dict[int, float]:
    """Per order, the sum of a calibrated path's kernel times (ncu elapsed cycles at the clock)."""
    out: dict[int, float] = {}
    for k in model.kernels:
        if k.path == path and k.machine == machine.label:
            out[k.order] = out.get(k.order, 0.0) + k.counters.elapsed_cycles / machine.clock_hz
    return out


def transfer_errors(pairs: Sequence[ShapePair], machine: Capacities, build: Build, mma: str | None,
                    overlap: float | None, skipped: list[str] | None = None) -> list[PairError]:
    """Every order both sides of every pair calibrated, predicted with exponent ``overlap``; the
    orders without a transfer are appended to ``skipped`` (with the kernels the build lacks)."""
    out: list[PairError] = []
    for pair in pairs:
        measured = measured_seconds(pair.target, pair.target_path, machine)
        source_orders = set(measured_seconds(pair.source, pair.source_path, machine))
        orders = sorted(source_orders & set(measured))
        if not orders:
            raise ModelError(f"pair {pair.label}: no order has both {pair.source_path} and {pair.target_path} "
                             f"calibrated on {machine.label}")
        aliases = {} if pair.target_path == pair.source_path else {pair.target_path: pair.source_path}
        model = with_overlap(pair.source, overlap)
        # an order where the two paths run different decompositions (FUSED_TC16 at p = 127) has no
        # transfer: left out, as `predict --skip-missing` leaves it out
        missing: list[str] = []
        try:
            found = predict(model, machine, build, paths=[pair.target_path], orders=orders, aliases=aliases,
                            mma=mma, skipped=missing) if orders else []
        except ModelError:
            if not missing:  # not "every order skipped": a real error
                raise
            found = []
        if skipped is not None:
            skipped += [f"{pair.label}: {m}" for m in missing]
        if not found:
            raise ModelError(f"pair {pair.label}: no order it calibrated has a transfer in {build.directory} "
                             f"({'; '.join(missing) or 'none'})")
        out += [PairError(pair.label, p.order, p.seconds, measured[p.order]) for p in found]
    return out


@dataclass(frozen=True)
class OverlapChoice:
    chosen: float | None
    by_candidate: list[tuple[float | None, list[PairError]]]
    skipped: list[str]  # calibrated orders without a transfer (other kernels on the two sides)

    def median(self, overlap: float | None) -> float:
        errors = dict(self.by_candidate)[overlap]
        return statistics.median(abs(e.error) for e in errors)

    def to_dict(self) -> dict[str, Any]:
        return {"chosen": self.chosen, "criterion": "median |path error| of the transfers; ties to the larger k",
                "candidates": [{"overlap": k, "median_abs_error": statistics.median(abs(e.error) for e in errs),
                                "errors": [{"pair": e.pair, "order": e.order, "predicted_s": e.predicted_s,
                                            "measured_s": e.measured_s, "error": e.error} for e in errs]}
                               for k, errs in self.by_candidate],
                "skipped": list(self.skipped)}


def choose_overlap(pairs: Sequence[ShapePair], machine: Capacities, build: Build, mma: str | None = None,
                   candidates: Sequence[float | None] = CANDIDATES) -> OverlapChoice:
    """The candidate exponent whose transfers of ``pairs`` miss least (see the module docstring)."""
    if not pairs:
        raise ModelError("choosing an overlap exponent needs at least one shape pair")
    if len({p.source.floor for p in pairs}) > 1:
        raise ModelError("the pairs' source models disagree on the DMMA floor (one fitted with --no-floor)")
    skipped: list[str] = []
    table = [(k, transfer_errors(pairs, machine, build, mma, k, skipped if k is candidates[0] else None))
             for k in candidates]

    def key(item: tuple[float | None, list[PairError]]) -> tuple[float, float]:
        k, errors = item
        return (round(statistics.median(abs(e.error) for e in errors), 6), -(math.inf if k is None else k))

    return OverlapChoice(chosen=min(table, key=key)[0], by_candidate=table, skipped=skipped)
