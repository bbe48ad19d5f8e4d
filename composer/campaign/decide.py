"""The crossover map's choices from a campaign's measurements and from model predictions.

Measured: per order, the fastest of the paths as scheduled among the campaign directory's bench
runs on this GPU, by the rules of ``composer.report.cells`` (the newest run of each cell; margin
and claim test within one run where the fastest and the runner-up share one). Predicted: per order
the ``fastest`` entry of a ``composer model predict`` file for the whole machine (its S/E when the
file has family errors), for the orders nothing was measured at.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from composer.config.crossover import MEASURED, PREDICTED, Choice, MachineEntry
from composer.errors import ComposerError
from composer.campaign.journal import now_utc
from composer.report.cells import CellIndex
from composer.report.sources import discover


def measured_gpu(root: Path, exclude: tuple[str, ...] = ()) -> str | None:
    """The GPU the bench runs under ``root`` ran on, when they name one and only one; None when they
    name none. Runs of several GPUs are refused: one machine's map entry decided from another GPU's
    times (an H100 run newer than the H200's of the same cell) would be wrong without a sign of it."""
    names = {s.identity.gpu for s in discover([root], exclude).bench if s.identity.gpu}
    if len(names) > 1:
        raise ComposerError(f"{root} holds bench runs of several GPUs ({', '.join(sorted(names))}): write the "
                            "crossover map from one GPU's directory at a time (--out DIR --machine NAME), or leave "
                            "the others out (--exclude GLOB, report-exclude.txt)")
    return names.pop() if names else None


def measured_choices(root: Path, machine: str, gpu: str | None, metric: str = "device_per_call_s",
                     exclude: tuple[str, ...] = ()) -> dict[int, Choice]:
    """The measured choice of every order measured under ``root`` on ``gpu`` (any GPU when None),
    skipping the results that match ``exclude`` (``composer report --exclude``'s globs)."""
    inputs = discover([root], exclude)
    sources = [s for s in inputs.bench if gpu is None or s.identity.gpu in (gpu, None)]
    if not any(s.records for s in sources):
        return {}
    index = CellIndex(sources, metric)
    out = {}
    for order in index.orders():
        w = index.fastest(order)
        if w is None:
            continue
        out[order] = Choice(
            machine=machine, order=order, path=w.cell.path, decided=MEASURED, source=str(w.cell.source.directory),
            seconds=w.cell.median(metric), runner_up=w.runner_up.path if w.runner_up else None,
            margin_pct=100 * w.margin if math.isfinite(w.margin) else None, metric=metric,
            ranges_overlap=w.overlap, resolved=w.resolved if w.runner_up else None,
            criterion=w.criterion if w.runner_up else None, rounds=w.cell.summary.n_rounds)
    return out


def predicted_choices(document: dict[str, Any], source: str) -> tuple[str, dict[int, Choice]]:
    """(machine, choices) of a predictions file; no choices for a restricted-SM target."""
    target = document.get("target") or {}
    machine = str(target.get("machine"))
    if target.get("sm_count") != target.get("full_sm_count"):
        return machine, {}
    totals: dict[int, dict[str, float]] = {}
    for p in document.get("paths", []):
        totals.setdefault(int(p["order"]), {})[str(p["path"])] = float(p["seconds"])
    out = {}
    for row in document.get("fastest", []):
        order = int(row["order"])
        ranked = sorted(totals.get(order, {}).items(), key=lambda kv: (kv[1], kv[0]))
        runner = ranked[1] if len(ranked) > 1 else None
        out[order] = Choice(machine=machine, order=order, path=str(row["path"]), decided=PREDICTED, source=source,
                            seconds=float(row["seconds"]) if row.get("seconds") is not None else None,
                            runner_up=runner[0] if runner else None,
                            margin_pct=100 * (runner[1] / ranked[0][1] - 1) if runner else None,
                            se=row.get("se"), screened=row.get("screened"))
    return machine, out


def crossover_entries(root: Path, machine: str, gpu: str | None, predictions: list[Path],
                      metric: str = "device_per_call_s", exclude: tuple[str, ...] = ()) -> list[MachineEntry]:
    """The entries to merge into the map: this machine's measured choices, completed by its
    predicted ones where nothing was measured, and the predictions of other machines."""
    import json

    from composer.report.sources import PREDICTIONS_SCHEMA

    if gpu is None and Path(root).is_dir():
        gpu = measured_gpu(root, exclude)  # written without a GPU: the one the measurements name
    measured = measured_choices(root, machine, gpu, metric, exclude) if Path(root).is_dir() else {}
    by_machine: dict[str, dict[int, Choice]] = {machine: dict(measured)} if measured else {}
    for file in predictions:
        document = json.loads(Path(file).read_text())
        if document.get("schema") != PREDICTIONS_SCHEMA:
            raise ValueError(f"{file}: not a `composer model predict` file (schema {PREDICTIONS_SCHEMA})")
        name, choices = predicted_choices(document, str(file))
        mine = by_machine.setdefault(name, {})
        for order, choice in choices.items():
            if order not in mine or mine[order].decided == PREDICTED:
                mine[order] = choice
    stamp = now_utc()
    return [MachineEntry(name, gpu if name == machine and measured else None, stamp, choices)
            for name, choices in sorted(by_machine.items()) if choices]


__all__ = ["crossover_entries", "measured_choices", "measured_gpu", "predicted_choices"]
