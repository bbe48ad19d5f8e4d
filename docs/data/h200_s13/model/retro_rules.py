"""Retrospective (not a test): how each family-error rule screens the ratios of balance tests 1-8.

Reads OUTDIR/score_all.json of `bash docs/data/h200_s13/model/retro.sh MODEL OUTDIR` (tests 1-7) or
`retro9.sh` (tests 1-8): the current model's errors on every restricted bench of those tests not at a
calibration SM count, one target per SM count; and writes, per test and rule, the screened signs and how
many are right. Rules (family error of a ratio at target T of test k, SM count n; S/E = |ln r_pred| /
max(eps, 1 %), screened at S/E >= 1):

  within-test   the median over the other targets of test k (the default `composer model score`
                rule, each test scored alone), else the tests before k below 66 SMs (the file given)
  prior-band    the median over the targets of tests 1..k-1 in n's band (below 66; 66-132)
  prior-pooled  the median over the targets of tests 1..k-1, every band
  others-band   the median over the targets of every other test in n's band (tests 1-7 but k)
  others-pooled the median over the targets of every other test

With --measured-resolution PCT a ratio measured within PCT % of one (|r_meas - 1| <= PCT / 100, as
`composer model score --measured-resolution`) is a tie: counted apart, neither right nor wrong.

Usage: python3 docs/data/h200_s13/model/retro_rules.py OUTDIR [--json OUT.json] [--measured-resolution PCT]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

# SM count -> test (every count was run by one test only)
TESTS = {34: 1, 52: 1, 96: 1, 98: 1, 24: 2, 44: 2, 80: 2, 116: 2, 38: 3, 58: 3, 88: 3, 106: 3, 124: 3,
         50: 3.5, 100: 3.5, 42: 4, 76: 4, 112: 4, 56: 5, 46: 5, 30: 5, 62: 6, 36: 6, 26: 6, 28: 7, 48: 7,
         70: 7, 90: 7, 94: 8, 54: 8, 32: 8}
FLOOR = 1.0


def band(n: int) -> str:
    return "below66" if n < 66 else "66to132"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--measured-resolution", type=float, default=None, metavar="PCT")
    args = ap.parse_args()
    res = args.measured_resolution
    doc = json.loads((args.outdir / "score_all.json").read_text())
    ratios = doc["ratios"]
    for r in ratios:
        r["n"] = int(r["target"].split("@")[1])
        r["test"] = TESTS[r["n"]]
        r["tie"] = res is not None and abs(r["r_meas"] - 1.0) <= res / 100.0
    by_fam = defaultdict(list)
    for r in ratios:
        by_fam[r["ratio"]].append(r)

    def med(rows):
        vals = [o["error_pct"] for o in rows]
        return statistics.median(vals) if vals else None

    def eps(r, rule):
        fam = by_fam[r["ratio"]]
        if rule == "within-test":
            same = [o for o in fam if o["test"] == r["test"] and o["n"] != r["n"]]
            if same:
                return med(same)
            return med([o for o in fam if o["test"] < r["test"] and o["n"] < 66])
        if rule.startswith("prior"):
            pool = [o for o in fam if o["test"] < r["test"]]
        else:
            pool = [o for o in fam if o["test"] != r["test"]]
        if rule.endswith("band"):
            pool = [o for o in pool if band(o["n"]) == band(r["n"])]
        return med(pool)

    rules = ("within-test", "prior-band", "prior-pooled", "others-band", "others-pooled")
    rows = []
    misses = []
    for rule in rules:
        for test in sorted({r["test"] for r in ratios}):
            for sel, keep in (("all", lambda r: True), ("p<=255", lambda r: r["order"] <= 255)):
                cells = [r for r in ratios if r["test"] == test and keep(r)]
                screened = right = unscreenable = ties = 0
                for r in cells:
                    e = eps(r, rule)
                    if e is None:
                        unscreenable += 1
                        continue
                    se = abs(100 * math.log(r["r_pred"])) / max(e, FLOOR)
                    if se >= 1:
                        screened += 1
                        if r["tie"]:
                            ties += 1
                            continue
                        right += r["sign_right"]
                        if not r["sign_right"] and sel == "all":
                            misses.append({"rule": rule, "test": test, "sms": r["n"], "order": r["order"],
                                           "ratio": r["ratio"], "r_pred": r["r_pred"], "r_meas": r["r_meas"],
                                           "family_error_pct": e, "se": se})
                rows.append({"rule": rule, "test": test, "orders": sel, "ratios": len(cells),
                             "screened": screened, "screened_right": right, "no_family_error": unscreenable,
                             **({} if res is None else {"screened_tie": ties})})
    result = {"kind": "retrospective, not a test", "source": str(args.outdir / "score_all.json"),
              "model_hashes": doc["model_hashes"], **({} if res is None else {"measured_resolution_pct": res}),
              "rows": rows, "wrong_screened": misses}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'rule':14s} {'test':>4s} {'orders':7s} {'ratios':>6s} {'screened right':>15s}")
    for r in rows:
        print(f"{r['rule']:14s} {r['test']:>4g} {r['orders']:7s} {r['ratios']:6d} "
              f"{r['screened_right']:>6d}/{r['screened'] - r.get('screened_tie', 0):<6d}"
              + (f" ({r['screened_tie']} tie)" if r.get("screened_tie") else "")
              + (f" ({r['no_family_error']} without)" if r["no_family_error"] else ""))
    print("wrong screened signs:")
    for m in misses:
        print(f"  {m['rule']:14s} test {m['test']:g} {m['sms']} SMs p={m['order']} {m['ratio']} pred {m['r_pred']:.3f} "
              f"meas {m['r_meas']:.3f} eps {m['family_error_pct']:.2f} S/E {m['se']:.2f}")


if __name__ == "__main__":
    main()
