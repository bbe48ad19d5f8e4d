#!/usr/bin/env python3
"""Write a schedules directory in which one fused table is a sweep candidate (to profile or bench it).

    python3 tools/candidate_schedules.py --order 7 --variant FUSED_TC --subset xfaces --only 'Mxfaces pio$' --out DIR

Every shipped ``schedules/p*.toml`` is copied into DIR; the ``[paths.VARIANT]`` table of ``--order`` is
replaced by the one candidate of family ``--subset`` whose label matches ``--only`` (exactly one must:
the matching labels are listed otherwise). ``COMPOSER_SCHEDULES=DIR composer profile|bench ...`` then
runs it as the schedule, e.g. the ncu of a candidate that no sweep has applied (session 21, call 2:
FUSED_TC at p = 7 on ``traces = "xfaces"``). With ``--pin-nvrtc`` the table names this machine's NVRTC,
as `sweep-fused check --pin-nvrtc` names it (its CUBINs then come from that check's cache).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from composer.config.schedule_files import copy_schedules, schedule_file_name  # noqa: E402
from composer.errors import ComposerError  # noqa: E402
from composer.fused.candidates import SUBSETS, candidate_list, check_subset, to_table  # noqa: E402
from composer.fused.sweep import write_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--order", type=int, required=True)
    parser.add_argument("--variant", required=True, help="FUSED, FUSED_TC or FUSED_TC16")
    parser.add_argument("--subset", required=True, help=f"candidate family ({', '.join(SUBSETS)})")
    parser.add_argument("--only", required=True, help="regular expression one candidate's label matches")
    parser.add_argument("--pin-nvrtc", action="store_true", help="name this machine's NVRTC in the table")
    parser.add_argument("--out", type=Path, required=True, help="schedules directory to write")
    parser.add_argument("--json", action="store_true", help="print the written table as JSON")
    args = parser.parse_args(argv)
    try:
        check_subset(args.subset)
        found = candidate_list(args.variant, args.order, args.subset, args.only)[1:]  # without "base"
    except (ComposerError, re.error) as exc:  # an unknown variant, order or family, a bad expression
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if len(found) != 1:
        names = "; ".join(name for name, _ in found) or "none"
        print(f"error: --only {args.only!r} matches {len(found)} candidates of {args.subset} (not 1): {names}",
              file=sys.stderr)
        return 2
    name, config = found[0]
    if args.pin_nvrtc:
        from composer.runtime.nvrtc import nvrtc_version

        config = dataclasses.replace(config, nvrtc="{}.{}".format(*nvrtc_version()))
    copy_schedules(args.out)
    target = args.out / schedule_file_name(args.order)
    write_table(target, to_table(config), note=f"candidate {name!r} of family {args.subset} (tools/candidate_schedules.py)")
    if args.json:
        print(json.dumps({"order": args.order, "variant": args.variant, "label": name, "file": str(target),
                          "table": to_table(config)}, indent=2))
    else:
        print(f"p = {args.order} {args.variant}: {name} ({target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
