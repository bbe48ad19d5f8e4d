"""Session 32: a schedules directory (for $COMPOSER_SCHEDULES) holding, at p = 7, 15 and 63, the tables a machine runs
(its overlay over the generic files) with ``exterior_maps = false`` added to every FUSED / FUSED_TC / FUSED_TC16 table
that has ``interior_maps = false``; the other orders are not written (the packaged files serve them).

    python3 docs/data/h200_s32/calls/links_schedules.py MACHINE OUT_DIR

A user file replaces the packaged one whole, overlays included, so the B runs of an alternating bench pointed at
OUT_DIR run exactly these tables on any GPU."""

import re
import sys
from pathlib import Path

from composer.config import schedule_files

machine, out = sys.argv[1], Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
packaged = schedule_files.packaged_dir()
for order in (7, 15, 63):
    name = f"p{order:04d}.toml"
    text = (packaged / name).read_text()
    overlay = packaged / "machines" / machine / name
    sections = dict(re.findall(r"(?ms)^\[paths\.(\w+)\]\n(.*?)(?=^\[|\Z)", overlay.read_text())) if overlay.exists() else {}
    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        pattern = rf"(?ms)^\[paths\.{variant}\]\n(.*?)(?=^\[|\Z)"
        body = sections.get(variant) or re.search(pattern, text).group(1)
        if "interior_maps = false" in body:
            body = body.replace("interior_maps = false\n", "interior_maps = false\nexterior_maps = false\n")
        text = re.sub(pattern, lambda m: f"[paths.{variant}]\n{body}", text)
    (out / name).write_text(text)
    print(out / name)
