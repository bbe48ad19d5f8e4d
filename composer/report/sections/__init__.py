"""The report's sections, in the order the page shows them; each module's ``build(data)`` returns
its sections (none when its data are absent: the model and balance sections appear only with
predictions or restricted-SM runs, the scheduler's only with graph files)."""

from __future__ import annotations

from composer.report.document import ReportData, Section
from composer.report.sections import (absolute, balance, carrier, landscape, overlap, prediction, provenance, ratios,
                                      roofline)

BUILDERS = (landscape.build, ratios.build, roofline.build, absolute.build, overlap.build, carrier.build,
            prediction.build, balance.build, provenance.build)


def build_sections(data: ReportData) -> list[Section]:
    return [section for build in BUILDERS for section in build(data)]


__all__ = ["BUILDERS", "build_sections"]
