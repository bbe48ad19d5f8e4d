"""Copy the entries of a `composer build` directory whose symbols match any of the given regular
expressions into a new build directory (their CUBINs and a manifest of just them).

Why: a device call carries the working tree and at most 64 MiB in all; a `--fused-variants all`
build of p = 511-767 is 7 MB, of which a call needs a few kernels. The copy is a valid build (the
runtime reads the manifest; `composer build --out DST` would rebuild the rest).

Usage: python3 tools/filter_build.py SRC DST REGEX [REGEX...]   (re.search on the symbol)
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    src, dst, patterns = Path(argv[0]), Path(argv[1]), [re.compile(p) for p in argv[2:]]
    try:
        manifest = json.loads((src / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"error: {src / 'manifest.json'}: {exc}", file=sys.stderr)
        return 1
    kept = [e for e in manifest["kernels"] if any(p.search(e["symbol"]) for p in patterns)]
    if not kept:
        print(f"error: no entry of {src} matches {argv[2:]}", file=sys.stderr)
        return 1
    src_real, dst_real = src.resolve(), dst.resolve()
    if dst_real == src_real or src_real in dst_real.parents or dst_real in src_real.parents:
        print(f"error: {dst} is {src} or lies inside or above it; name another directory", file=sys.stderr)
        return 1
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for e in kept:
        shutil.copy2(src / e["cubin"], dst / e["cubin"])
    tmp = dst / "manifest.json.tmp"
    tmp.write_text(json.dumps({**manifest, "kernels": kept}, indent=1))
    tmp.replace(dst / "manifest.json")
    size = sum(f.stat().st_size for f in dst.iterdir())
    print(f"{dst}: {len(kept)} of {len(manifest['kernels'])} kernels, {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
