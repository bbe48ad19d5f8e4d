"""Schedule candidates for the fused paths: generate, check on the CPU, validate and time on the GPU.

Why: device time is scarce, so one device call should validate and time many schedules at once.
Candidates vary only what the schedule tables hold (threads, warp/thread tile, how many lines a
block's box carries, the MMA shape of FUSED_TC16), never the template, so a winner can be copied
into ``schedules/pNNNN.toml`` as it is (``to_table``). FUSED_DFMA is not swept on its own: it
always runs FUSED_TC's table, so the device side validates it on the fastest FUSED_TC candidate.

The command line is ``composer sweep-fused`` (``check`` on the CPU, ``run`` on the GPU,
``apply``; :mod:`composer.cli.sweep_fused`); ``docs/device.md`` shows one round trip.

Candidate families live in :mod:`composer.fused.candidates`, the device-side validation and
timing in :mod:`composer.fused.trial`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import sys
import time
from pathlib import Path

from composer.arch.limits import DEFAULT_ARCH, arch_limits
from composer.arch.machines import DEFAULT_MACHINE, get_machine
from composer.errors import ComposerError
from composer.fileio import atomic_write_text
from composer.fused.builder import build
from composer.fused.candidates import SWEPT, candidate_list, candidates, to_table
from composer.fused.config import SUPPORTED_ORDERS, FusedConfig
from composer.runtime.errors import CompileError
from composer.runtime.manifest import BUILD_DIR_ENV
from composer.runtime.nvrtc import nvrtc_version


def write_table(schedule_file: Path, table: str, note: str = "", append: bool = False) -> None:
    """Replace the ``[paths.<variant>]`` table of a schedule file by ``table`` (a ``to_table`` text);
    with ``append``, a file without that table gets it at its end (a machine overlay's first table).

    The table runs from its header to the line that closes its ``kernels`` array; text around it
    (comments, the other paths' tables) stays as it is. The comment lines that open the old table
    (its measurement history: the notes of earlier sweeps and the commands behind them) are kept, and
    ``note`` follows them as the newest.
    """
    header = table.splitlines()[0]
    text = schedule_file.read_text()
    start = re.search(rf"^{re.escape(header)}[ \t]*$", text, re.M)
    if start is None and append:
        lines = table.splitlines()
        lines[1:1] = [f"# {note}"] if note else []
        atomic_write_text(schedule_file, text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n")
        return
    if start is None:
        raise ComposerError(f"{schedule_file}: no {header} table to replace")
    close = re.compile(r"^\][ \t]*$", re.M).search(text, start.end())
    if close is None:
        raise ComposerError(f"{schedule_file}: {header} has no closing ']' of its kernels array")
    lines = table.splitlines()
    history = list(itertools.takewhile(lambda line: line.lstrip().startswith("#"),
                                       text[start.end():close.start()].lstrip("\n").splitlines()))
    lines[1:1] = history + ([f"# {note}"] if note else [])
    atomic_write_text(schedule_file, text[:start.start()] + "\n".join(lines) + text[close.end():])


def best_records(records: list[dict]) -> dict[tuple[int, str], dict]:
    """Fastest validated record per (order, variant) of a ``run`` log (FUSED_DFMA excluded: it
    follows FUSED_TC's table)."""
    best: dict[tuple[int, str], dict] = {}
    for r in records:
        variant = r["variant"].split("@")[0]
        if variant == "FUSED_DFMA" or not r.get("passed") or not r.get("table") or not r.get("us_per_call"):
            continue
        key = (int(r["order"]), variant)
        if key not in best or r["us_per_call"] < best[key]["us_per_call"]:
            best[key] = r
    return best


#: A candidate replaces the schedule's table only when faster by more than this fraction of the
#: table's own time in the same run (run-to-run noise of one sweep is about 1 %).
MIN_GAIN = 0.02


def sweep_machine_label(records: list[dict], default: str = DEFAULT_MACHINE) -> str:
    """The machine a sweep log's rows were timed on, as schedule notes name it (``H200``, ``H100_SXM``,
    or the GPU's own name when the machine table has no entry for it); ``default`` for rows that name
    none (logs before session 25, all H200). ComposerError when the rows name several GPUs."""
    named = {(r.get("machine"), r.get("gpu")) for r in records if r.get("machine") or r.get("gpu")}
    if len(named) > 1:
        raise ComposerError(f"the sweep log holds rows timed on several GPUs ({sorted(map(str, named))}); "
                            "apply one GPU's log at a time")
    if not named:
        return get_machine(default).name.upper()
    ((machine, gpu),) = named
    return get_machine(machine).name.upper() if machine else str(gpu)


def sweep_machine_name(records: list[dict]) -> str:
    """The machine-table name of the one GPU a sweep log was timed on (its records' ``machine``);
    ComposerError when they name none (logs before session 25, a GPU the table lacks) or several."""
    named = {r.get("machine") for r in records if r.get("machine") or r.get("gpu")}
    if len(named) != 1 or None in named:
        raise ComposerError("a machine overlay needs a sweep log timed on one GPU of the machine table; "
                            f"its records name {sorted(map(str, named)) or 'none'}")
    return named.pop()


def check_overlay_baseline(records: list[dict], machine: str) -> None:
    """Refuse a log whose baseline rows (``@shipped``, else ``@base``) are not the tables ``machine`` runs
    now: a winner must beat the machine's own table to replace it in its overlay, not the generic one
    (`sweep-fused check --machine` plans against the machine's tables). Compared as configurations,
    the NVRTC a pinned plan names aside."""
    import tomllib

    from composer.config.machine_schedules import using_machine
    from composer.fused.config import fused_config, parse_table

    for r in records:
        variant, _, tag = r["variant"].partition("@")
        if tag not in ("base", SHIPPED) or not r.get("table") or variant == "FUSED_DFMA":
            continue
        order = int(r["order"])
        timed = parse_table(variant, order, tomllib.loads(r["table"])["paths"][variant])
        with using_machine(machine):
            runs = fused_config(variant, order)
        if dataclasses.replace(timed, nvrtc="") != dataclasses.replace(runs, nvrtc=""):
            raise ComposerError(f"p{order} {variant}: the sweep's baseline ({tag}) is not the table {machine} runs "
                                f"now; plan the sweep with `composer sweep-fused check --machine {machine}` so that "
                                "its winners are measured against that machine's tables")


def apply(sweep_json: str, schedules_dir: str | None, date: str, min_gain: float = MIN_GAIN,
          machine: str = DEFAULT_MACHINE, overlay: bool = False) -> list[str]:
    """Write the fastest candidate of each (order, variant) of a device sweep into the schedules
    of ``schedules_dir`` (None: the user schedules directory; an order without a file there gets a
    copy of the schedule in use first, never a write into the installed package) when it beats the
    schedule's own table, timed in the same run, by more than ``min_gain``. The note above each
    table names the machine the records were timed on (their ``machine`` entry, else their ``gpu``
    name; ``machine`` for logs written before the records named it); a log timed on several GPUs is
    refused (its rows were never compared in one run).

    ``overlay``: write the winners into the machine overlay of the GPU the log was timed on
    (``schedules_dir/machines/<machine>/pNNNN.toml``, :mod:`composer.config.machine_schedules`)
    instead of the order's schedule, so that they apply on that machine only."""
    from composer.config.machine_schedules import writable_overlay_file
    from composer.config.schedules import writable_schedule_file

    records = json.loads(Path(sweep_json).read_text())
    label = sweep_machine_label(records, machine)
    if overlay:
        if schedules_dir is None:
            raise ComposerError("a machine overlay is written into the shipped schedules directory: name it "
                                "(--schedules-dir schedules in a checkout)")
        overlay_machine = sweep_machine_name(records)
        check_overlay_baseline(records, overlay_machine)
        target = lambda order: writable_overlay_file(  # noqa: E731
            order, overlay_machine, Path(schedules_dir), f"composer sweep-fused apply of {Path(sweep_json).name}, {date}")
    else:
        target = lambda order: writable_schedule_file(order, schedules_dir)  # noqa: E731
    changed = []
    for (order, variant), r in sorted(best_records(records).items()):
        if r["variant"].endswith(("@base", f"@{SHIPPED}")):
            continue  # the schedule's own table won: nothing to write
        own = [b for b in records if b["variant"] in (f"{variant}@base", f"{variant}@{SHIPPED}")
               and b["order"] == order and b.get("us_per_call")]
        base = min(own, key=lambda b: b["us_per_call"]) if own else None  # the faster of the two compilers
        if base and r["us_per_call"] > (1 - min_gain) * base["us_per_call"]:
            continue
        note = (f"{label} {date}, composer.fused.sweep: {r['us_per_call']:.1f} us/call"
                + (f" (previous schedule {base['us_per_call']:.1f})" if base and base is not r else ""))
        write_table(target(order), r["table"], note, append=overlay)
        changed.append(f"p{order} {variant}: {note}")
    return changed


#: Spilled bytes per thread a kept candidate may have (``composer sweep-fused check --max-spill``): a
#: few spilled registers outside the hot loop cost less than the occupancy a tighter cap buys.
MAX_SPILL = 16


def _check_one(job: tuple[str, int, str, str | None, int, int, bool]) -> dict:
    from composer.arch.hotloop import kernel_hot_loop
    from composer.arch.sass import inspect_cubin

    variant, order, subset, only, n, max_spill, pin = job
    name, cfg = candidate_list(variant, order, subset, only)[n]
    if pin:  # the plan's tables name this NVRTC: the device takes its CUBINs from the carried cache
        cfg = dataclasses.replace(cfg, nvrtc="{}.{}".format(*nvrtc_version()))
    try:
        built = build(cfg, DEFAULT_ARCH)  # the runtime NVRTC cache ($COMPOSER_CACHE_DIR) that run() reads
    except CompileError as exc:  # one candidate NVRTC rejects is dropped with its first log line, not the check
        first = next((line for line in exc.log.splitlines() if "error" in line), exc.log.strip()[:200])
        return {"variant": variant, "order": order, "label": name, "ok": False, "kernels": [], "hot_loops": [],
                "table": to_table(cfg), "error": f"{exc.program}: {first.strip()}"}
    ok, info, loops = True, [], []
    blocks = max(1, cfg.min_blocks)
    for b in built.kernels:
        if not b.blocks_per_element:
            continue
        sass = next(iter(inspect_cubin(b.compiled.cubin).values()))
        info.append((sass.registers, sass.spill_bytes, b.smem_bytes))
        loops.append(kernel_hot_loop(b.compiled.cubin).counts)
        registers_per_sm = arch_limits(DEFAULT_ARCH).registers_per_sm
        if sass.registers * b.threads * blocks > registers_per_sm or (sass.spill_bytes > max_spill and name != "base"):
            ok = False
    return {"variant": variant, "order": order, "label": name, "ok": ok, "kernels": info,
            "hot_loops": loops, "table": to_table(cfg)}


def check(orders: list[int], max_per_variant: int = 7, workers: int = 2,
          subset: str = "all", max_spill: int = MAX_SPILL, only: str | None = None,
          pin_nvrtc: bool = False) -> dict[str, dict[str, list]]:
    """Compile the candidates on the CPU; keep those that spill at most ``max_spill`` bytes per
    thread and reach their blocks per SM (one, or ``min_blocks``). ``subset`` ("staged", "traces"):
    the schedule's own table and that family of candidates only.

    ``pin_nvrtc``: every candidate's table (the schedule's own, "base", included) names this NVRTC,
    whose CUBINs the check leaves in $COMPOSER_CACHE_DIR: carried to the GPU machine, they are what
    `run` times there, whatever NVRTC it has (session 18: the same source runs up to 21 % apart
    under NVRTC 13.0 and 13.5). The schedule's table as shipped, on its own compiler, is added as
    "shipped", so that a winner must beat both."""
    from concurrent.futures import ProcessPoolExecutor

    def count(v: str, o: int) -> int:
        if o not in SUPPORTED_ORDERS[v]:
            return 0
        if subset != "all" or only is not None:
            return len(candidate_list(v, o, subset, only))
        return min(max_per_variant, len(candidates(v, o)))

    jobs = [(v, o, subset, only, n, max_spill, pin_nvrtc) for o in orders for v in SWEPT for n in range(count(v, o))]
    with ProcessPoolExecutor(workers) as pool:
        rows = list(pool.map(_check_one, jobs))
    kept: dict[str, dict[str, list]] = {str(o): {v: [] for v in SWEPT} for o in orders}
    for row in rows:
        kept[str(row["order"])][row["variant"]].append(row)
    if pin_nvrtc:
        from composer.fused.config import fused_config

        for o in orders:
            for v in SWEPT:
                if kept[str(o)][v]:
                    kept[str(o)][v].append({"variant": v, "order": o, "label": SHIPPED, "ok": True, "kernels": [],
                                            "hot_loops": [], "table": to_table(fused_config(v, o))})
    return kept


#: The label of the schedule's table as shipped (its own compiler) in a plan whose tables name
#: another (``check(pin_nvrtc=True)``); like "base", never written back.
SHIPPED = "shipped"


def compiler_of(cfg: FusedConfig) -> str | None:
    """The NVRTC ("MAJOR.MINOR") that compiled the kernels ``cfg`` runs (a cache hit after
    ``prebuild``); None if they are mixed."""
    versions = {k.compiled.nvrtc_version for k in build(cfg, DEFAULT_ARCH).kernels}
    return "{}.{}".format(*versions.pop()) if len(versions) == 1 else None


def _build_cfg(cfg: FusedConfig) -> None:
    build(cfg, DEFAULT_ARCH)


def prebuild(configs: list[FusedConfig], workers: int = 16) -> None:
    """Fill the NVRTC cache in parallel before the trials (a no-op on a cache hit)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_build_cfg, configs))


def plan_configs(plan: dict, order: int) -> dict[str, FusedConfig]:
    """``"VARIANT@label" -> config`` of the candidates the CPU check kept for ``order``, parsed from
    the tables it wrote (so a plan runs whichever family made it, as it was checked)."""
    from composer.config.fields import parse_toml
    from composer.fused.config import parse_table

    if str(order) not in plan:
        raise ComposerError(f"the plan has no candidates for order {order} (it holds orders "
                            f"{', '.join(sorted(plan, key=int))}); check that order first")
    configs = {}
    for variant, rows in plan[str(order)].items():
        for row in rows:
            if row["ok"]:
                table = parse_toml(row["table"], f"plan row {variant}@{row['label']}")["paths"][variant]
                configs[f"{variant}@{row['label']}"] = parse_table(variant, order, table)
    return configs


#: How `run` times a candidate: "calls", back-to-back tendency calls (the sweeps before session 38),
#: or "stages", each call followed by the RK update as in `composer bench` (``trial.time_stages``).
TIMINGS = ("calls", "stages")


def run(outdir: str, orders: list[int], deadline_s: float, plan_file: str, timing: str = "calls") -> None:
    """Validate and time every kept candidate (the device side); writes OUTDIR/sweep.json.

    After an order's candidates, FUSED_DFMA is validated and timed on the fastest valid FUSED_TC
    candidate too, so that the pair can move to a new schedule together. sweep.json is rewritten
    (atomically) after every candidate, and a rerun into the same OUTDIR skips those it holds.
    """
    from composer.bench.progress import SweepProgress
    from composer.config.schedules import load_schedule
    from composer.fused.trial import run_case
    from composer.runtime import default_device

    start = time.time()
    if os.environ.pop(BUILD_DIR_ENV, None):
        # each candidate's kernels come from the compiler its table names (this NVRTC, or the NVRTC
        # cache of a pinned plan): a build directory would swap some of them for another compiler's
        # (they ran up to 21 % apart, session 18)
        print(f"note: ${BUILD_DIR_ENV} is not used by sweep-fused run: each table's kernels come from this "
              "NVRTC or, for a table naming another, from the NVRTC cache", file=sys.stderr)
    plan = json.loads(Path(plan_file).read_text())
    todo = {order: plan_configs(plan, order) for order in orders}
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    log: list[dict] = json.loads((out / "sweep.json").read_text()) if (out / "sweep.json").is_file() else []
    if timing not in TIMINGS:
        raise ComposerError(f"timing {timing!r}: expected one of {', '.join(TIMINGS)}")
    earlier = {r.get("timing", "calls") for r in log if "us_per_call" in r}
    if earlier - {timing}:
        # apply compares each candidate with the base of the same log: both must be timed the same way
        raise ComposerError(f"{out / 'sweep.json'} holds timings by {', '.join(sorted(earlier))}; resume it with "
                            f"--timing {', '.join(sorted(earlier))} or run into another --out")
    done = {(r["order"], r["variant"]) for r in log}
    prebuild([c for o in orders for k, c in todo[o].items() if (o, k) not in done])
    print(f"prebuild {time.time() - start:.1f} s", flush=True)
    device = default_device()
    from composer.config.crossover import machine_of_device

    gpu, machine = getattr(device, "name", None), machine_of_device(device)

    def record(r: dict, order: int, progress: SweepProgress) -> None:
        r["elapsed_s"] = round(time.time() - start, 1)
        # which GPU timed it: `apply` names it in the schedule's note (an H100 sweep is no H200 table)
        r["gpu"], r["machine"] = gpu, machine
        cfg = todo[order].get(r["variant"])
        # the table as measured: named by the NVRTC that compiled its kernels (this process's, or the
        # one whose CUBINs the carried cache held for a table naming it)
        r["table"] = to_table(dataclasses.replace(cfg, nvrtc=compiler_of(cfg))) if cfg else None
        log.append(r)
        atomic_write_text(out / "sweep.json", json.dumps(log, indent=1))
        print(json.dumps({k: r.get(k) for k in ("variant", "order", "rel_err", "us_per_call", "error")}),
              flush=True)
        progress.finish(_Trial(r["variant"], order), ok=bool(r.get("passed")), note=str(r.get("error") or ""))

    total = sum(len(todo[o]) + 1 for o in orders)  # + FUSED_DFMA on its schedule
    with SweepProgress(total, done=sum(1 for o, _ in done if o in todo)) as progress:
        for order in orders:
            if time.time() - start > deadline_s:
                break
            bench = load_schedule(order).benchmark
            grid, stage_dt = bench.grid, (bench.dt if timing == "stages" else None)
            extra = {k: (lambda o, c=c: c) for k, c in todo[order].items() if (order, k) not in done}
            variants = [] if (order, "FUSED_DFMA") in done else ["FUSED_DFMA"]
            if extra or variants:
                run_case(order, grid, variants, device, timing_calls=10, extra=extra,
                         on_start=lambda label, o=order: progress.start(_Trial(label, o)),
                         on_record=lambda r, o=order: record(r, o, progress), stage_dt=stage_dt)
            tc = [r for r in log if r["order"] == order and r["variant"].startswith("FUSED_TC@") and r.get("passed")]
            best = min(tc, key=lambda r: r["us_per_call"]) if tc else None
            twin_label = f"FUSED_DFMA@{best['variant']}" if best else None
            if best and not best["variant"].endswith(("@base", f"@{SHIPPED}")) and (order, twin_label) not in done:
                twin = dataclasses.replace(todo[order][best["variant"]], variant="FUSED_DFMA", dfma=True)
                progress.grow(1)
                run_case(order, grid, [], device, timing_calls=3, extra={twin_label: lambda o, c=twin: c},
                         on_start=lambda label, o=order: progress.start(_Trial(label, o)),
                         on_record=lambda r, o=order: record(r, o, progress), stage_dt=stage_dt)


@dataclasses.dataclass(frozen=True)
class _Trial:
    """One candidate as the progress display names it."""

    path: str
    order: int

