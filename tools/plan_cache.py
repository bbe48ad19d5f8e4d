"""Pre-flight of a pinned sweep plan: does the NVRTC cache to be carried hold every CUBIN it names?

`composer sweep-fused check --pin-nvrtc` names this machine's NVRTC in every candidate's table and
leaves the CUBINs in $COMPOSER_CACHE_DIR; on the GPU machine a table naming another NVRTC than the
loaded one takes them from the carried cache, or else is compiled there by the other compiler
(correct, but not the kernels the plan means). This checks, without compiling, that every kernel
of every planned table naming an NVRTC has its cache entry under that NVRTC's key.

    COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin python3 tools/plan_cache.py [--device-nvrtc 13.0]
        [--orders P,...] [--fill] [PLAN.json ...]

The kernels checked: every kept table of each plan, the FUSED_DFMA twin `sweep-fused run` times
on each FUSED_TC candidate, and with ``--orders`` the fused tables the schedules of those orders
ship (as `bench` loads them: user directory, machine overlay), which a call's baseline benches run.
``--device-nvrtc``: the GPU machine's own NVRTC, whose tables (the "shipped" rows) it compiles itself.
``--fill``: compile the missing kernels of the tables naming this machine's NVRTC into the cache
(a checkout that lost its ignored `.cache` rebuilds the cache a plan was checked with); a missing
kernel of a table naming another NVRTC stays missing.
Exit 0 when all are there, 1 naming the first missing ones, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.arch.limits import DEFAULT_ARCH  # noqa: E402
from composer.errors import ComposerError  # noqa: E402
from composer.fused.builder import OPTIONS, build, kernel_sources  # noqa: E402
from composer.fused.config import FusedConfig  # noqa: E402
from composer.fused.sweep import SHIPPED, plan_configs  # noqa: E402
from composer.runtime.nvrtc import _validate_options, cache_key, default_cache_dir, nvrtc_version  # noqa: E402

FUSED_PATHS = ("FUSED", "FUSED_TC", "FUSED_DFMA", "FUSED_TC16")


def plan_tables(plan: dict) -> Iterator[tuple[int, str, FusedConfig]]:
    """(order, label, config) of every kept table of ``plan``, with the FUSED_DFMA twin of each
    FUSED_TC candidate but the base and the shipped table (`sweep-fused run` times the fastest candidate's
    twin, which one is known only there)."""
    for order in sorted(plan, key=int):
        for label, cfg in plan_configs(plan, int(order)).items():
            yield int(order), label, cfg
            if label.startswith("FUSED_TC@") and not label.endswith(("@base", f"@{SHIPPED}")):
                yield int(order), f"FUSED_DFMA@{label}", dataclasses.replace(cfg, variant="FUSED_DFMA", dfma=True)


def schedule_tables(orders: list[int]) -> Iterator[tuple[int, str, FusedConfig]]:
    """(order, path, config) of the fused tables the schedules of ``orders`` ship, as `bench` loads them."""
    from composer.config.schedules import load_schedule
    from composer.fused.config import fused_config, table_variant

    for order in orders:
        schedule = load_schedule(order)
        for path in FUSED_PATHS:
            if table_variant(path) in schedule.paths:
                yield order, path, fused_config(path, order, schedule.paths, schedule.file)


def missing_entries(tables: list[tuple[int, str, FusedConfig]], cache: Path, device_nvrtc: str | None = None,
                    fill: bool = False, progress: bool = False) -> tuple[int, list[str]]:
    """(kernels checked, "ORDER LABEL KERNEL (NVRTC X.Y)" of those without a cache entry); with ``fill``,
    the tables naming this NVRTC are compiled into ``cache`` first (each kernel written atomically by
    compile_cuda, so an interrupted fill resumes where it stopped); ``progress``: one stderr line per table."""
    opts = _validate_options(OPTIONS)
    here = "{}.{}".format(*nvrtc_version()) if fill else None
    checked, missing = 0, []
    for n, (order, label, cfg) in enumerate(tables, 1):
        if not cfg.nvrtc or cfg.nvrtc == device_nvrtc:
            continue
        if cfg.nvrtc == here:
            if progress:
                print(f"[{n}/{len(tables)}] p={order} {label[:100]}", file=sys.stderr, flush=True)
            build(cfg, DEFAULT_ARCH, cache_dir=cache)
        version = tuple(int(x) for x in cfg.nvrtc.split("."))
        for k in kernel_sources(cfg, DEFAULT_ARCH):
            checked += 1
            key = cache_key(k.source, DEFAULT_ARCH, opts, [k.name], version)
            if not ((cache / f"{key}.cubin").is_file() and (cache / f"{key}.json").is_file()):
                missing.append(f"{order} {label} {k.name} (NVRTC {cfg.nvrtc})")
    return checked, missing


def _orders(text: str) -> list[int]:
    try:
        orders = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected orders like 7,15, got {text!r}") from None
    if not orders or min(orders) < 1:
        raise argparse.ArgumentTypeError(f"expected positive orders like 7,15, got {text!r}")
    return orders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="plan_cache.py", description=__doc__.strip().splitlines()[0])
    parser.add_argument("plans", nargs="*", metavar="PLAN.json")
    parser.add_argument("--device-nvrtc", metavar="X.Y", help="the GPU machine's own NVRTC (its tables are skipped)")
    parser.add_argument("--orders", type=_orders, default=[], help="also the fused tables these orders' schedules ship")
    parser.add_argument("--fill", action="store_true", help="compile the missing kernels of this NVRTC's tables")
    parser.add_argument("--json", action="store_true", help="print {cache, checked, missing} as JSON")
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not args.plans and not args.orders:
        print("error: name at least one plan or --orders", file=sys.stderr)
        return 2
    cache = default_cache_dir()
    try:
        tables = []
        for name in args.plans:
            if not Path(name).is_file():
                raise ComposerError(f"{name}: no such plan")
            try:
                plan = json.loads(Path(name).read_text())
                tables += plan_tables(plan)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ComposerError(f"{name}: not a sweep plan ({type(exc).__name__}: {exc})") from None
        tables += schedule_tables(args.orders)
        total, gaps = missing_entries(tables, cache, args.device_nvrtc, fill=args.fill,
                                      progress=args.fill and not args.json and sys.stderr.isatty())
    except ComposerError as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"cache": str(cache), "checked": total, "missing": gaps}, indent=1))
        return 1 if gaps else 0
    if gaps:
        print(f"{len(gaps)} of {total} kernels have no CUBIN in {cache}: {'; '.join(gaps[:5])}", file=sys.stderr)
        return 1
    print(f"{total} kernels of the pinned tables are in {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
