"""Regenerate schedules/node_times.toml from the ``composer graph --measure`` reports it cites.

    python3 tools/node_times.py > schedules/node_times.toml

Only the library paths are kept (GEMM, GEMM_CUTE): theirs are the plans with a choice of main
stream; the fused paths are one chain. GEMM_FUSED is left out until it is re-measured with the
carrier settings of the session-7 sweep (its call-1 times are of the z carrier).
tests/test_node_times.py checks that the shipped file equals this output."""

from __future__ import annotations

import glob
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from composer.sched.node_times import render_node_times, times_from_measure  # noqa: E402

SOURCES = ("docs/data/h200_s6/call2/graph", "docs/data/h200_s7/call1/graph", "docs/data/h200_s8/call2/graph")
PATHS = ("GEMM", "GEMM_CUTE")
HEADER = f"""Measured kernel times per launch-plan node (device µs): the launch plan's weights in place of the
roofline cost hints (composer/sched/node_times.py says why). An entry applies only while it names
exactly the nodes of the path's program at that order; --option PATH.node_us=hints ignores it.
Generated, not edited: python3 tools/node_times.py > schedules/node_times.toml, from the
composer graph --measure reports in {', '.join(SOURCES)}
(H200, 2026-12-01; a later report replaces an earlier one), paths {', '.join(PATHS)}."""


#: (path, order) whose settings changed after these reports were measured: their times are of other
#: kernels, so they are left out (none at present).
CHANGED_SINCE: set[tuple[str, int]] = set()


def settings_at_measurement(path: str, order: int) -> str | None:
    """The settings of a report that predates recording them: today's, where they did not change."""
    from composer.paths.registry import path_class

    if (path, order) in CHANGED_SINCE:
        return None
    return path_class(path).plan_settings(order)


def generate() -> str:
    times = {}
    for source in SOURCES:
        files = glob.glob(str(ROOT / source / "p*.json"))
        for f in sorted(files, key=lambda s: int(re.findall(r"p(\d+)\.json$", s)[0])):
            times.update(times_from_measure(json.loads(Path(f).read_text()), "h200", settings_at_measurement))
    return render_node_times({k: v for k, v in times.items() if k[1] in PATHS}, HEADER)


if __name__ == "__main__":
    sys.stdout.write(generate())
