"""Pre-flight of a pinned sweep plan: does the NVRTC cache to be carried hold every CUBIN it names?

`composer sweep-fused check --pin-nvrtc` names this machine's NVRTC in every candidate's table and
leaves the CUBINs in $COMPOSER_CACHE_DIR; on the GPU machine a table naming another NVRTC than the
loaded one takes them from the carried cache, or else is compiled there by the other compiler
(correct, but not the kernels the plan means). This checks, without compiling, that every kernel
of every planned table naming an NVRTC has its cache entry under that NVRTC's key.

    COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin python3 tools/plan_cache.py [--device-nvrtc 13.0] PLAN.json ...

``--device-nvrtc``: the GPU machine's own NVRTC, whose tables (the "shipped" rows) it compiles itself.
Exit 0 when all are there, 1 naming the first missing ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.arch.limits import DEFAULT_ARCH  # noqa: E402
from composer.fused.builder import OPTIONS, kernel_sources  # noqa: E402
from composer.fused.sweep import plan_configs  # noqa: E402
from composer.runtime.nvrtc import _validate_options, cache_key, default_cache_dir  # noqa: E402


def missing_entries(plan: dict, cache: Path, device_nvrtc: str | None = None) -> tuple[int, list[str]]:
    """(kernels checked, "ORDER LABEL KERNEL (NVRTC X.Y)" of those without a cache entry)."""
    opts = _validate_options(OPTIONS)
    checked, missing = 0, []
    for order in sorted(plan, key=int):
        for label, cfg in plan_configs(plan, int(order)).items():
            if not cfg.nvrtc or cfg.nvrtc == device_nvrtc:
                continue
            version = tuple(int(x) for x in cfg.nvrtc.split("."))
            for k in kernel_sources(cfg, DEFAULT_ARCH):
                checked += 1
                key = cache_key(k.source, DEFAULT_ARCH, opts, [k.name], version)
                if not ((cache / f"{key}.cubin").is_file() and (cache / f"{key}.json").is_file()):
                    missing.append(f"{order} {label} {k.name} (NVRTC {cfg.nvrtc})")
    return checked, missing


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    device_nvrtc = None
    if args[0] == "--device-nvrtc":
        if len(args) < 3:
            print("error: --device-nvrtc needs a version and at least one plan", file=sys.stderr)
            return 2
        device_nvrtc, args = args[1], args[2:]
    cache = default_cache_dir()
    total, gaps = 0, []
    for name in args:
        if not Path(name).is_file():
            print(f"error: {name}: no such plan", file=sys.stderr)
            return 2
        checked, missing = missing_entries(json.loads(Path(name).read_text()), cache, device_nvrtc)
        total, gaps = total + checked, gaps + missing
    if gaps:
        print(f"{len(gaps)} of {total} kernels have no CUBIN in {cache}: {'; '.join(gaps[:5])}", file=sys.stderr)
        return 1
    print(f"{total} kernels of the pinned tables are in {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
