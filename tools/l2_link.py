"""Where a kernel's L2 partition-link traffic comes from, from the raw CSVs of `composer profile` (ncu).

    python3 tools/l2_link.py CSV [CSV...] [--json]

Per kernel: the sectors its SMs requested from their own partition (lts__t_sectors_srcunit_tex), the hits
there, the sectors fetched over the link from the other partition (lts__t_sectors_srcunit_ltcfabric), split
into hits and misses at the far slice (the misses are DRAM reads of lines homed there), the DRAM bytes read
and the link's busy fraction. Why: the p = 7 and 15 fused kernels are bound by that link (results.md
section 7); which of its sectors are far misses and which far hits says what a design can remove.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

METRICS = {
    "us": ("gpu__time_duration.sum", 1e-3),
    "requested_M": ("lts__t_sectors_srcunit_tex.sum", 1e-6),
    "near_hits_M": ("lts__t_sectors_srcunit_tex_lookup_hit.sum", 1e-6),
    "link_M": ("lts__t_sectors_srcunit_ltcfabric.sum", 1e-6),
    "far_hits_M": ("lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum", 1e-6),
    "far_misses_M": ("lts__t_sectors_srcunit_ltcfabric_lookup_miss.sum", 1e-6),
    "dram_read_MB": ("dram__bytes_read.sum", 1e-6),
    "link_busy_pct": ("lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed", 1.0),
}


def read_kernels(path: Path) -> dict[str, dict[str, str]]:
    """Kernel name -> metric -> value text, from an ncu CSV in either layout (one row per kernel with a
    column per metric, or one row per metric)."""
    rows = list(csv.reader(line for line in path.read_text().splitlines() if line.startswith('"')))
    if not rows:
        raise ValueError("no CSV rows (not an ncu --csv export)")
    head = rows[0]
    if "Kernel Name" not in head:
        raise ValueError("no 'Kernel Name' column")
    kernel = head.index("Kernel Name")
    out: dict[str, dict[str, str]] = {}
    if "Metric Name" in head:
        name, value = head.index("Metric Name"), head.index("Metric Value")
        for r in rows[1:]:
            out.setdefault(r[kernel], {})[r[name]] = r[value]
        return out
    for r in rows[2:]:  # the second row holds the units
        out[r[kernel]] = dict(zip(head, r))
    return out


def _number(text: str | None) -> float | None:
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def link_rows(path: Path) -> list[dict]:
    rows = []
    for kernel, metrics in read_kernels(path).items():
        row: dict = {"file": str(path), "kernel": kernel}
        for key, (metric, scale) in METRICS.items():
            value = _number(metrics.get(metric))
            row[key] = None if value is None else value * scale
        if row["link_M"] is not None and row["requested_M"]:
            row["link_share"] = row["link_M"] / row["requested_M"]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="+", help="raw CSVs of composer profile")
    parser.add_argument("--json", action="store_true", help="one JSON list instead of the table")
    args = parser.parse_args(argv)
    rows = []
    for name in args.csv:
        try:
            rows += link_rows(Path(name))
        except (OSError, ValueError) as exc:
            print(f"error: {name}: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    keys = list(METRICS) + ["link_share"]
    print("| kernel | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for row in rows:
        cells = ["—" if row.get(k) is None else f"{row[k]:.3g}" if k != "link_share" else f"{row[k]:.0%}" for k in keys]
        print(f"| {row['kernel'][:40]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into head
        sys.exit(0)
