#!/usr/bin/env python3
"""Write a schedules directory whose FUSED_TC16 tables are FUSED_TC's on 16x8x4 (the shape twins).

    python3 tools/shape_twins.py --orders 15,63,127,255 --out DIR [--mma 16x8x8]

Every shipped ``schedules/p*.toml`` is copied into DIR; at each order of ``--orders`` whose FUSED_TC
table has a twin (``composer.fused.candidates.shape_twin``: every warp tile's WM even) the
``[paths.FUSED_TC16]`` table is replaced by it. ``COMPOSER_SCHEDULES=DIR composer bench --paths
FUSED_TC16 ...`` then runs the twins and ``composer build`` builds them: the targets of the model's
shape transfer (``composer model predict --as FUSED_TC16=FUSED_TC``), which differ from their
source binaries only in the MMA shape. Prints the twinned orders (and those without a twin).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from composer.config.schedule_files import copy_schedules  # noqa: E402
from composer.fused.candidates import _fits, shape_twin, to_table  # noqa: E402
from composer.fused.config import ALLOWED_MMA, fused_config  # noqa: E402
from composer.fused.sweep import write_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", required=True, help="comma-separated orders to twin")
    parser.add_argument("--out", type=Path, required=True, help="schedules directory to write")
    parser.add_argument("--mma", default="16x8x4", help="the twins' MMA shape (16x8x4 or 16x8x8; default 16x8x4)")
    args = parser.parse_args(argv)
    if args.mma not in ALLOWED_MMA["FUSED_TC16"]:
        parser.error(f"--mma {args.mma}: FUSED_TC16 runs {' or '.join(ALLOWED_MMA['FUSED_TC16'])}")
    copy_schedules(args.out)
    for order in (int(o) for o in args.orders.split(",")):
        twin = shape_twin(fused_config("FUSED_TC", order), args.mma)
        if twin is None:
            print(f"p = {order}: FUSED_TC's table has an odd WM, no {args.mma} twin")
            continue
        if not _fits(twin):
            print(f"p = {order}: the {args.mma} twin does not fit the architecture (shared memory, threads)")
            continue
        write_table(args.out / f"p{order:04d}.toml", to_table(twin),
                    note=f"shape twin: FUSED_TC's table on {args.mma} (tools/shape_twins.py)")
        print(f"p = {order}: FUSED_TC16 = {to_table(twin).splitlines()[-3].strip()} ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
