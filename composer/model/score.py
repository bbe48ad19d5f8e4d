"""Scoring predictions against measurements: path-total errors, ratio signs, the S/E screen with
leave-target-out family errors, and the loss of the predicted-fastest choice (paper §7, §9, S10).

A target is one predictions file (one machine at one active SM count). A measured cell belongs to
the target with its SM count. Errors are 100 ln(pred / meas). The family error of a ratio for
target T is the median |100 ln(r_pred / r_meas)| of that family over the other targets' cells
(on the balance axis: the other SM counts), falling back to given family errors; the pooled
family errors over all targets are returned for later predictions (``--family-errors``).

Given family errors may be banded by the active SM count (``FamilyBand``: one score's family errors
for targets of LO..HI SMs, as `composer model score --family-errors LO-HI:SCORE.json`); a target takes
the band that holds its SM count, else the unbanded ones. With ``given_only`` (``--family-rule
given``) every ratio takes the given family error for its target's SM count and never the other
targets' medians: a screen fixed before the measurement (session 13, balance test 8).

With a measured resolution (``measured_resolution_pct``, `composer model score --measured-resolution
PCT`) a ratio whose measured value lies within PCT % of one, |r_meas - 1| <= PCT / 100 with r_meas as
the score orients it, has no measured sign: its ``sign`` is ``"tie"`` ("unresolved by the
measurement"), its ``sign_right`` None, and it counts neither right nor wrong, screened or not (the
summary counts it as ``unresolved``). At 1 % this is `composer bench`'s own rule for fewer than four
rounds (composer/bench/stats.py ``claim_test``: resolved when |ratio - 1| > 1 %). Without it (the
default) every ratio has a sign, as before. Family errors, S/E and the choices are the same either way.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Iterable, Mapping, Sequence

from composer.model.errors import ModelError
from composer.model.measured import MeasuredCell
from composer.model.ratios import (RESOLUTION_PCT, SCREEN_THRESHOLD, SEVEN_RATIOS, log_pct, orientation,
                                   separation_to_error)

SCHEMA = "composer.model-score"
VERSION = 1
HIGH_ORDER = 255  # the band the balance-axis target names (p >= 255)


@dataclass(frozen=True)
class FamilyBand:
    """Family errors (percent, by family) for targets of ``lo``..``hi`` active SMs (inclusive)."""

    lo: int
    hi: int
    errors: Mapping[str, float]
    source: str = ""

    def holds(self, sms: int) -> bool:
        return self.lo <= sms <= self.hi

    @property
    def label(self) -> str:
        return f"{self.lo}-{self.hi} SMs"


def check_bands(bands: Sequence[FamilyBand]) -> None:
    """One ModelError for an empty or reversed range, or two bands that share an SM count."""
    for b in bands:
        if not (0 < b.lo <= b.hi):
            raise ModelError(f"family-error band {b.lo}-{b.hi} ({b.source or 'given'}): expected 0 < LO <= HI")
    ordered = sorted(bands, key=lambda b: (b.lo, b.hi))
    for a, b in zip(ordered, ordered[1:]):
        if b.lo <= a.hi:
            raise ModelError(f"family-error bands {a.label} ({a.source or 'given'}) and {b.label} "
                             f"({b.source or 'given'}) overlap; give each SM count one band")


def given_family_errors(sms: int, bands: Sequence[FamilyBand], family_errors: Mapping[str, float] | None
                        ) -> tuple[Mapping[str, float] | None, str | None]:
    """The given family errors for a target of ``sms`` active SMs and where they come from: the band
    that holds ``sms``, else the unbanded ones (None, None when neither)."""
    band = next((b for b in bands if b.holds(sms)), None)
    if band is not None:
        return band.errors, f"band {band.label}" + (f" ({band.source})" if band.source else "")
    if family_errors is not None:
        return family_errors, "given"
    return None, None


def nearest_rank(values: list[float], q: float) -> float:
    """The nearest-rank q-quantile (the paper's p90)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _summary(errors: list[float]) -> dict[str, Any]:
    magnitudes = [abs(e) for e in errors]
    if not magnitudes:
        return {"n": 0, "median_abs_pct": None, "p90_abs_pct": None, "max_abs_pct": None}
    return {"n": len(magnitudes), "median_abs_pct": statistics.median(magnitudes),
            "p90_abs_pct": nearest_rank(magnitudes, 0.9), "max_abs_pct": max(magnitudes)}


def _assign(predictions: list[dict[str, Any]], measured: Iterable[MeasuredCell], unmatched: list[str]
            ) -> dict[str, dict[tuple[str, int], MeasuredCell]]:
    """Measured cells by target label, matched on the active SM count; the others are listed in
    ``unmatched``."""
    by_sms: dict[int, str] = {}
    for doc in predictions:
        target = doc["target"]
        if target["sm_count"] in by_sms:
            raise ModelError(f"predictions for {by_sms[target['sm_count']]} and {target['label']} both "
                             f"predict {target['sm_count']} SMs; score them separately")
        by_sms[target["sm_count"]] = target["label"]
    full = {doc["target"]["label"]: doc["target"]["full_sm_count"] for doc in predictions}
    out: dict[str, dict[tuple[str, int], MeasuredCell]] = {doc["target"]["label"]: {} for doc in predictions}
    for cell in measured:
        label = by_sms.get(cell.sms) if cell.sms is not None else None
        if label is None and cell.sms is None:
            label = next((lab for lab, n in full.items() if by_sms.get(n) == lab), None)
        if label is None:
            unmatched.append(f"{cell.path} p={cell.order} at {cell.sms or 'all'} SMs ({cell.source})")
            continue
        key = (cell.path, cell.order)
        if key in out[label]:
            raise ModelError(f"{cell.path} p={cell.order} at {label} is measured twice: "
                             f"{out[label][key].source} and {cell.source}")
        out[label][key] = cell
    return out


def score(predictions: list[dict[str, Any]], measured: Iterable[MeasuredCell],
          family_errors: Mapping[str, float] | None = None,
          resolution_floor_pct: float = RESOLUTION_PCT, bands: Sequence[FamilyBand] = (),
          given_only: bool = False, measured_resolution_pct: float | None = None) -> dict[str, Any]:
    """The score document (JSON-ready). ``bands``: family errors by the target's active SM count
    (before the unbanded ``family_errors``); ``given_only``: the given family errors for every ratio,
    never the other targets' (each target's SM count must then have a band or unbanded errors);
    ``measured_resolution_pct``: a ratio measured within that many per cent of one is a tie
    (:func:`measured_sign`), counted neither right nor wrong (None: every ratio has a sign)."""
    check_resolution(measured_resolution_pct)
    check_bands(bands)
    given = {doc["target"]["label"]: given_family_errors(doc["target"]["sm_count"], bands, family_errors)
             for doc in predictions}
    if given_only:
        if not bands and family_errors is None:
            raise ModelError("the given-family-error rule needs family errors (--family-errors)")
        bare = [f"{label}" for label, (errs, _) in given.items() if errs is None]
        if bare:
            raise ModelError(f"no family-error band holds the SM count of {', '.join(bare)}; give a "
                             f"--family-errors LO-HI:SCORE.json that does (or one without a range)")
    annotate = given_only or bool(bands)
    unmatched: list[str] = []
    assigned = _assign(predictions, measured, unmatched)
    cells, kernels, ratios = [], [], []
    unmeasured: list[str] = []
    pairs_by_target: dict[str, dict[int, dict[str, tuple[float, float]]]] = {}
    for doc in predictions:
        label = doc["target"]["label"]
        meas = assigned[label]
        totals: dict[int, dict[str, tuple[float, float]]] = {}
        for p in doc["paths"]:
            m = meas.get((p["path"], p["order"]))
            if m is None:
                unmeasured.append(f"{p['path']} p={p['order']} at {label}")
                continue
            totals.setdefault(p["order"], {})[p["path"]] = (p["seconds"], m.seconds)
            cells.append({"target": label, "path": p["path"], "order": p["order"], "predicted_s": p["seconds"],
                          "measured_s": m.seconds, "error_pct": log_pct(p["seconds"] / m.seconds)})
            for k in p["kernels"]:
                if k["role"] in m.kernels:
                    kernels.append({"target": label, "path": p["path"], "order": p["order"], "role": k["role"],
                                    "name": k["name"], "binding": k["binding"],
                                    "calibration_binding": k["calibration_binding"], "eta": k["eta"],
                                    "predicted_s": k["seconds"], "measured_s": m.kernels[k["role"]],
                                    "error_pct": log_pct(k["seconds"] / m.kernels[k["role"]])})
        pairs_by_target[label] = totals
        for order, paths in sorted(totals.items()):
            for a, b in combinations(sorted(paths), 2):
                first, second = orientation(a, b)
                r_pred = paths[first][0] / paths[second][0]
                r_meas = paths[first][1] / paths[second][1]
                ratios.append({"target": label, "order": order, "ratio": f"{first}/{second}",
                               "seven": (first, second) in SEVEN_RATIOS, "r_pred": r_pred, "r_meas": r_meas,
                               "error_pct": abs(log_pct(r_pred / r_meas)),
                               **_sign(r_pred, r_meas, measured_resolution_pct)})
    pooled = {fam: statistics.median(r["error_pct"] for r in ratios if r["ratio"] == fam)
              for fam in sorted({r["ratio"] for r in ratios})}
    for r in ratios:
        errs, source = given[r["target"]]
        others = [] if given_only else \
            [o["error_pct"] for o in ratios if o["ratio"] == r["ratio"] and o["target"] != r["target"]]
        eps = statistics.median(others) if others else (errs or {}).get(r["ratio"])
        r["family_error_pct"] = eps
        if annotate:
            r["family_error_from"] = "other targets" if others else (None if eps is None else source)
        r["se"] = separation_to_error(r["r_pred"], eps, resolution_floor_pct)
        r["screened"] = None if r["se"] is None else r["se"] >= SCREEN_THRESHOLD
    choices = _choices(pairs_by_target, ratios)
    screened = [r for r in ratios if r["screened"]]
    seven = [r for r in ratios if r["seven"]]
    rule = {} if not annotate else {
        "family_error_rule": "given" if given_only else "other targets, else given",
        "family_error_bands": [{"sms": [b.lo, b.hi], "source": b.source} for b in bands]}
    resolution = {} if measured_resolution_pct is None else {"measured_resolution_pct": measured_resolution_pct}
    return {
        "schema": SCHEMA, "version": VERSION,
        "targets": [doc["target"]["label"] for doc in predictions],
        "model_hashes": sorted({doc["model_hash"] for doc in predictions}),
        "cells": cells, "kernels": kernels, "ratios": ratios, "choices": choices,
        "measured_without_prediction": unmatched, "predicted_without_measurement": unmeasured,
        "family_errors": pooled, "resolution_floor_pct": resolution_floor_pct, **rule, **resolution,
        "summary": {
            "paths": _summary([c["error_pct"] for c in cells]),
            f"paths_p>={HIGH_ORDER}": _summary([c["error_pct"] for c in cells if c["order"] >= HIGH_ORDER]),
            "kernels": _summary([k["error_pct"] for k in kernels]),
            "ratios": _sign_summary(ratios, measured_resolution_pct is not None),
            "seven_ratios": _sign_summary(seven, measured_resolution_pct is not None),
            "choices": {"n": len(choices), "right": sum(c["right"] for c in choices),
                        "median_loss_pct": statistics.median(c["loss_pct"] for c in choices) if choices else None,
                        "max_loss_pct": max((c["loss_pct"] for c in choices), default=None)},
        },
    }


def check_resolution(pct: float | None) -> None:
    """One ModelError for a measured resolution that is not a finite percentage >= 0."""
    if pct is not None and not (isinstance(pct, (int, float)) and math.isfinite(pct) and pct >= 0):
        raise ModelError(f"--measured-resolution {pct}: expected a finite percentage >= 0 (1: the bench's "
                         f"resolution with fewer than four rounds)")


def measured_sign(r_pred: float, r_meas: float, resolution_pct: float | None = None) -> str:
    """``"right"`` when r_pred and r_meas lie on the same side of one, ``"wrong"`` when not, ``"tie"``
    when a resolution is given and |r_meas - 1| <= resolution_pct / 100 (the bench's claim test:
    resolved when |ratio - 1| > 1 %, so a ratio exactly 1 % from one is unresolved)."""
    if resolution_pct is not None and abs(r_meas - 1.0) <= resolution_pct / 100.0:
        return "tie"
    same = math.copysign(1, math.log(r_pred)) == math.copysign(1, math.log(r_meas))
    return "right" if same else "wrong"


def _sign(r_pred: float, r_meas: float, resolution_pct: float | None) -> dict[str, Any]:
    """A ratio's sign fields: ``sign_right`` (bool; None for a tie) and, with a resolution, ``sign``."""
    sign = measured_sign(r_pred, r_meas, resolution_pct)
    if resolution_pct is None:
        return {"sign_right": sign == "right"}
    return {"sign_right": None if sign == "tie" else sign == "right", "sign": sign}


def _sign_summary(ratios: list[dict[str, Any]], with_ties: bool) -> dict[str, Any]:
    """Counts of signs right and screened right; ties (with a measured resolution) in neither."""
    screened = [r for r in ratios if r["screened"]]
    out = {"n": len(ratios), "sign_right": sum(1 for r in ratios if r["sign_right"]),
           "screened": len(screened), "screened_right": sum(1 for r in screened if r["sign_right"])}
    if with_ties:
        out.update({"sign_wrong": sum(1 for r in ratios if r["sign_right"] is False),
                    "unresolved": sum(1 for r in ratios if r["sign_right"] is None),
                    "screened_wrong": sum(1 for r in screened if r["sign_right"] is False),
                    "screened_unresolved": sum(1 for r in screened if r["sign_right"] is None)})
    return out


def _choices(pairs_by_target: Mapping[str, Mapping[int, Mapping[str, tuple[float, float]]]],
             ratios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per target and order: the predicted fastest path, the measured fastest, the loss."""
    se = {(r["target"], r["order"], r["ratio"]): r["se"] for r in ratios}
    out = []
    for label, by_order in pairs_by_target.items():
        for order, paths in sorted(by_order.items()):
            if len(paths) < 2:
                continue
            chosen = min(paths, key=lambda p: (paths[p][0], p))
            best = min(paths, key=lambda p: (paths[p][1], p))
            values = [se[(label, order, "/".join(orientation(chosen, o)))] for o in paths if o != chosen]
            known = [v for v in values if v is not None]
            choice_se = min(known) if len(known) == len(values) else None
            out.append({"target": label, "order": order, "paths": len(paths), "predicted": chosen,
                        "measured": best, "right": chosen == best,
                        "loss_pct": 100.0 * (paths[chosen][1] / paths[best][1] - 1.0), "se": choice_se,
                        "screened": None if choice_se is None else choice_se >= SCREEN_THRESHOLD})
    return out
