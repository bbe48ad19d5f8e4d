"""What every section of the report reads (``ReportData``) and what it returns (``Section``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from composer.arch.machines import Machine
from composer.report.cells import CellIndex
from composer.report.figures import Figure
from composer.report.sources import Inputs
from composer.report.tables import Table

#: The timing quantity each metric name stands for, as axis labels and headings say it.
METRIC_LABELS = {
    "device_per_call_s": "device time per tendency call",
    "stage_wall_s": "step-loop time per RK stage",
    "end_to_end_s": "end-to-end time per step",
}
ORDER_LABEL = "polynomial order p"


@dataclass
class ReportData:
    """The inputs, the cells that stand for each (path, variant, order), the metric figures use
    and the machine whose roofs and balance coordinate they are drawn against."""

    inputs: Inputs
    index: CellIndex
    metric: str
    machine: Machine
    machine_note: str = ""

    @property
    def metric_label(self) -> str:
        return METRIC_LABELS.get(self.metric, self.metric)

    @property
    def orders(self) -> list[int]:
        return self.index.orders()


@dataclass
class Section:
    """One part of the report: Markdown paragraphs, then tables and figures in that order."""

    id: str
    title: str
    text: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


def us(seconds: float | None) -> float | None:
    """Seconds to microseconds (None stays None)."""
    return None if seconds is None else seconds * 1e6


__all__ = ["METRIC_LABELS", "ORDER_LABEL", "ReportData", "Section", "us"]
