#!/usr/bin/env python3
"""Merge `composer build` directories of different NVRTCs into one whose fused kernels are each
table's own compiler's (the binaries that ran on the device).

    LD_PRELOAD=.../libnvrtc.so.13 composer build ... --out B130    # the device's 13.0
    composer build ... --out B135                                  # this machine's 13.5
    python3 tools/merge_builds.py --out MERGED B130 B135

Why: every shipped fused table names the NVRTC it was measured with (`nvrtc`), and the two
compilers allocate registers and spill differently from the same source; the model reads the
binary's SASS (DMMA shapes, spills) from a build, so a build of the wrong compiler describes a
kernel that did not run. A fused kernel is taken from the first directory whose entry was compiled
by its table's NVRTC (the schedules of $COMPOSER_SCHEDULES apply), or from the first holding it
when its table names none; other kernels from the first directory holding them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from composer.fused.config import fused_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("builds", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if any(args.out.resolve() == b.resolve() for b in args.builds):
        parser.error("--out must be a new directory, not one of the builds")
    manifests = [json.loads((b / "manifest.json").read_text()) for b in args.builds]
    archs = {e.get("arch") for m in manifests for e in m["kernels"]}
    if len(archs) > 1:
        parser.error(f"the builds target several architectures ({', '.join(sorted(map(str, archs)))}); merge one")
    chosen: dict[str, tuple[Path, dict]] = {}
    for build, manifest in zip(args.builds, manifests):
        for entry in manifest["kernels"]:
            symbol, config = entry["symbol"], entry.get("config", {})
            wanted = None
            if config.get("kind") == "fused" and config.get("variant"):
                wanted = fused_config(config["variant"], int(config["order"])).nvrtc
            have = entry.get("compiler", {}).get("nvrtc")
            if symbol in chosen:
                old = chosen[symbol][1].get("compiler", {}).get("nvrtc")
                if wanted is None or old == wanted or have != wanted:
                    continue
            chosen[symbol] = (build, entry)
    args.out.mkdir(parents=True, exist_ok=True)
    for build, entry in chosen.values():
        shutil.copy(build / entry["cubin"], args.out / entry["cubin"])
    merged = {**manifests[0], "kernels": [entry for _, entry in chosen.values()]}
    (args.out / "manifest.json").write_text(json.dumps(merged, indent=1) + "\n")
    for symbol, (build, entry) in sorted(chosen.items()):
        print(f"{symbol}: {build} (NVRTC {entry.get('compiler', {}).get('nvrtc', '?')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
