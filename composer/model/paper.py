"""Our predictions for the paper's machines next to the paper's measured ratios there.

The paper measured its own kernels on GB200, H100 and A100 (Tables S23-S25); we predict ours from
the H200 calibration. The two cannot score each other (different kernels), so this is a
plausibility comparison: do the predicted ratios fall on the same side of 1, and is the predicted
fastest path the one the paper measured fastest? The paper's device times live in
``schedules/authors_device_times.toml``, checked on load.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from composer.errors import ComposerError
from composer.packaged import packaged_dir

PAPER_FILE = "authors_device_times.toml"
#: The paper's six paths (Table 2): the fastest-path comparison is among these.
PAPER_PATHS: tuple[str, ...] = ("FUSED", "FUSED_DFMA", "FUSED_TC", "GEMM", "GEMM_CUTE", "GEMM_FUSED")
#: Ratios compared (numerator, denominator): the paper's instruction ablation, library against fused
#: tensor-core, the fusion axis, tensor cores in the fused kernel, and the crossover pair.
RATIOS: tuple[tuple[str, str], ...] = (("FUSED_DFMA", "FUSED_TC"), ("GEMM", "FUSED_TC"), ("GEMM_FUSED", "GEMM_CUTE"),
                                       ("FUSED_TC", "FUSED"), ("GEMM_FUSED", "FUSED_TC"))


def load_paper_times(file: Path | str | None = None) -> dict[str, dict[str, dict[int, float]]]:
    """machine -> path -> order -> seconds, checked: known paths, integer orders, positive times."""
    from composer.config.fields import tomllib
    from composer.config.schedules import available_orders

    orders = available_orders()
    source = packaged_dir() / PAPER_FILE if file is None else Path(file)
    try:
        raw = tomllib.loads(source.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ComposerError(f"{source}: not a readable paper-times file ({exc})") from None
    out: dict[str, dict[str, dict[int, float]]] = {}
    for machine, table in raw.items():
        if not isinstance(table, dict) or "source" not in table:
            raise ComposerError(f"{source}: [{machine}] needs a source and one table per path")
        out[machine] = {}
        for path, cells in table.items():
            if path == "source":
                continue
            if path not in PAPER_PATHS or not isinstance(cells, dict):
                raise ComposerError(f"{source}: [{machine}] {path}: not one of the paper's paths {PAPER_PATHS}")
            times = {}
            for order, us in cells.items():
                if not order.isdigit() or int(order) not in orders:
                    raise ComposerError(f"{source}: [{machine}] {path}: order {order!r} is not one of {orders}")
                if isinstance(us, bool) or not isinstance(us, (int, float)) or not math.isfinite(us) or us <= 0:
                    raise ComposerError(f"{source}: [{machine}] {path} p={order}: {us!r} is not a positive time in µs")
                times[int(order)] = float(us) * 1e-6
            out[machine][path] = times
    return out


@dataclass(frozen=True)
class Comparison:
    machine: str
    order: int
    ratios: dict[str, tuple[float | None, float | None]]  # "A/B" -> (ours predicted, paper measured)
    ours_fastest: str | None  # among the paper's paths we predict at this order
    paper_fastest: str | None
    compared_paths: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "order": self.order,
                "ratios": {k: {"ours_predicted": a, "paper_measured": b} for k, (a, b) in self.ratios.items()},
                "ours_fastest": self.ours_fastest, "paper_fastest": self.paper_fastest,
                "compared_paths": list(self.compared_paths)}


def _ratio(times: Mapping[str, float], a: str, b: str) -> float | None:
    return times[a] / times[b] if a in times and b in times else None


def compare(documents: Iterable[Mapping[str, Any]], paper: Mapping[str, Mapping[str, Mapping[int, float]]]
            ) -> list[Comparison]:
    """One row per (machine, order) the predictions and the paper share.

    The fastest path is compared among the paths both sides have at that order, so that a path
    one side lacks (the paper's FUSED above 255, our A100 build without FUSED_TC at p = 15) does
    not decide it."""
    ours: dict[tuple[str, int], dict[str, float]] = {}
    for doc in documents:
        machine = doc["target"]["machine"]
        if doc["target"].get("sm_count") != doc["target"].get("full_sm_count"):
            raise ComposerError(f"predictions for {doc['target'].get('label')}: the paper ran whole machines")
        for p in doc["paths"]:
            cell = ours.setdefault((machine, int(p["order"])), {})
            if p["path"] in cell:  # two models, or two runs of predict, for one cell: which one is meant?
                raise ComposerError(f"{p['path']} p={p['order']} on {machine} is predicted twice; pass one "
                                    "predictions file per machine and order")
            cell[p["path"]] = float(p["seconds"])
    rows = []
    for (machine, order), predicted in sorted(ours.items()):
        if machine not in paper:
            continue
        measured = {path: t[order] for path, t in paper[machine].items() if order in t}
        if not measured:
            continue
        ratios = {f"{a}/{b}": (_ratio(predicted, a, b), _ratio(measured, a, b)) for a, b in RATIOS}
        common = tuple(p for p in PAPER_PATHS if p in predicted and p in measured)
        rows.append(Comparison(machine, order, ratios,
                               min(common, key=predicted.__getitem__) if common else None,
                               min(common, key=measured.__getitem__) if common else None, common))
    if not rows:
        raise ComposerError("no prediction is for a machine and order the paper measured "
                            f"(paper machines: {sorted(paper)})")
    return rows


def summary(rows: list[Comparison]) -> dict[str, Any]:
    """Ratios on the same side of 1 and fastest paths that agree, over the rows."""
    both = [(a, b) for r in rows for a, b in r.ratios.values() if a is not None and b is not None]
    fastest = [r for r in rows if r.ours_fastest is not None]
    return {"ratios": len(both), "same_side_of_1": sum((a > 1) == (b > 1) for a, b in both),
            "median_abs_log_ratio_pct": (100 * statistics.median(abs(math.log(a / b)) for a, b in both)
                                         if both else None),
            "orders": len(fastest), "fastest_agrees": sum(r.ours_fastest == r.paper_fastest for r in fastest)}
