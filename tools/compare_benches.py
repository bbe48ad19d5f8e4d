"""Compare two groups of `composer bench` result directories cell by cell (path, order).

An A/B of something a single bench run cannot vary (the compiler of the kernels, a tree, an
environment variable) is run as alternating benches (A B B A A B) inside one device call; this
prints, per (path, order), the median device µs per call of each group with its range, B/A, and
whether the ranges are disjoint (the bench's resolution rule), plus the kernel origins each group
recorded (so a B that silently compiled the A kernels shows up).

    python3 tools/compare_benches.py --a DIR [DIR ...] --b DIR [DIR ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.bench.results import ResultStore  # noqa: E402


def cells(dirs: list[str]) -> dict[tuple[str, int], dict]:
    """Per (path, order): the device µs per call of every completed run in ``dirs`` and the kernel
    origins they recorded."""
    out: dict[tuple[str, int], dict] = {}
    for d in dirs:
        for r in ResultStore(d).records(include_failed=False):
            cell = out.setdefault((r.path, r.order), {"us": [], "origins": set()})
            cell["us"].append(r.device_per_call_s * 1e6)
            cell["origins"].add(r.kernel_origin or "-")
    return out


def compare(a_dirs: list[str], b_dirs: list[str]) -> list[dict]:
    """One row per cell both groups measured, in (order, path) order."""
    a, b = cells(a_dirs), cells(b_dirs)
    rows = []
    for key in sorted(set(a) & set(b), key=lambda k: (k[1], k[0])):
        ua, ub = a[key]["us"], b[key]["us"]
        ma, mb = statistics.median(ua), statistics.median(ub)
        rows.append({"path": key[0], "order": key[1], "a_us": ma, "a_range": [min(ua), max(ua)], "a_n": len(ua),
                     "b_us": mb, "b_range": [min(ub), max(ub)], "b_n": len(ub), "b_over_a": mb / ma,
                     "resolved": max(ua) < min(ub) or max(ub) < min(ua),
                     "a_origins": sorted(a[key]["origins"]), "b_origins": sorted(b[key]["origins"])})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", nargs="+", required=True, metavar="DIR", help="bench result directories of A")
    parser.add_argument("--b", nargs="+", required=True, metavar="DIR", help="bench result directories of B")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    missing = [d for d in args.a + args.b if not (Path(d) / "runs.jsonl").is_file()]
    if missing:
        print(f"error: no bench results (runs.jsonl) in {missing[0]}", file=sys.stderr)
        return 2
    rows = compare(args.a, args.b)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| path | p | A µs (range, n) | B µs (range, n) | B/A | resolved |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['path']} | {r['order']} | {r['a_us']:.1f} ({r['a_range'][0]:.1f}-{r['a_range'][1]:.1f}, "
              f"{r['a_n']}) | {r['b_us']:.1f} ({r['b_range'][0]:.1f}-{r['b_range'][1]:.1f}, {r['b_n']}) | "
              f"{r['b_over_a']:.3f} | {'yes' if r['resolved'] else 'no'} |")
    origins = {o for r in rows for o in r["a_origins"]}, {o for r in rows for o in r["b_origins"]}
    print(f"\nkernel origins: A {sorted(origins[0])}; B {sorted(origins[1])}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(0)
