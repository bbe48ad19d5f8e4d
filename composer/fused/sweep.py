"""Schedule candidates for the fused paths: generate, check on the CPU, validate and time on the GPU.

Why: device time is scarce, so one device call should validate and time many schedules at once.
Candidates vary only what the schedule tables hold (threads, warp/thread tile, how many lines a
block's box carries, the MMA shape of FUSED_TC16), never the template, so a winner can be copied
into ``schedules/pNNNN.toml`` as it is (``to_table``). FUSED_DFMA is not swept on its own: it
always runs FUSED_TC's table, so the device side validates it on the fastest FUSED_TC candidate.

CPU side (compiles every candidate into the NVRTC cache that the device call carries, and marks
those that spill or cannot fit one block per SM)::

    COMPOSER_CACHE_DIR=.cache/fused PYTHONPATH=. python3 -m composer.fused.sweep check 7,63 plan.json

Only the D-staging / occupancy candidates (``staged_candidates``: ``d_stage = "smem"``,
``min_blocks``) next to the schedules' own, with their SASS hot-loop counts in the plan::

    COMPOSER_CACHE_DIR=.cache/fused PYTHONPATH=. python3 -m composer.fused.sweep check 127,255 plan.json staged

Write the fastest validated candidate per (order, variant) of a device sweep into the schedules::

    python3 -m composer.fused.sweep apply OUTDIR/sweep.json schedules 2026-11-29

Device side (validates each kept candidate against the NumPy reference at the benchmark grid,
times it, writes OUTDIR/sweep.json)::

    COMPOSER_CACHE_DIR=.cache/fused PYTHONPATH=. python3 -m composer.fused.sweep run OUTDIR 7,63 150 plan.json
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from pathlib import Path

from composer.errors import ComposerError
from composer.fused.builder import build, kernel_plans, smem_limit
from composer.fused.config import (
    SUPPORTED_ORDERS,
    FusedConfig,
    KernelConfig,
    fused_config,
)

SMEM_LIMIT = 227 * 1024
SWEPT = ("FUSED", "FUSED_TC", "FUSED_TC16")


def _fits(config: FusedConfig) -> bool:
    """The template's static_asserts and the shared-memory limit, evaluated in Python."""
    nq = config.nq
    try:
        plans = kernel_plans(config)
    except ComposerError:  # no room for a staged D panel
        return False
    for plan in plans:
        k = plan.kernel
        if plan.smem_bytes > min(SMEM_LIMIT, smem_limit(config.min_blocks)) or k.threads > 1024 or k.threads % 32:
            return False
        if config.min_blocks and k.threads * config.min_blocks > 2048:
            return False
        for d in k.dirs:
            nl = plan.lines(d)
            if config.engine == "simt":
                tl, ta = k.tile
                if nl % tl or nq % ta or (nl // tl * (nq // ta)) % k.threads:
                    return False
            else:
                mm, _, mk = (int(x) for x in (config.mma or "").split("x"))
                wm, wn = k.tile
                if nl % (mm * wm) or nq % (8 * wn) or nq % mk:
                    return False
                if (nl // (mm * wm) * (nq // (8 * wn))) % (k.threads // 32):
                    return False
    return True


def _scaled_box(k: KernelConfig, nq: int, factor: int) -> tuple[int, int, int] | None:
    """The box with its first partial axis (k, then j) multiplied by ``factor`` (None: not possible)."""
    box = list(k.box)
    for axis in range(3):
        if box[axis] != nq:
            if nq % (box[axis] * factor):
                return None
            box[axis] *= factor
            return tuple(box)  # type: ignore[return-value]
    return tuple(box) if factor == 1 else None  # type: ignore[return-value]


def candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """(label, config) of the schedule-table variations of ``variant`` at ``order`` (base first)."""
    base = fused_config(variant, order)
    nq = base.nq
    tiles = ([(1, 4), (2, 4), (4, 4), (2, 8), (4, 2)] if base.engine == "simt"
             else [(1, 1), (1, 2), (2, 1), (2, 2), (1, 4), (2, 4)])
    shapes = [base.mma] if variant != "FUSED_TC16" else ["16x8x4", "16x8x8"]
    out: list[tuple[str, FusedConfig]] = [("base", base)]
    seen = {base}
    for shape in shapes:
        for factor in (1, 2, 4):
            for threads in (256, 512) if order > 15 else (64, 128, 256, 512, 1024):
                for tile in tiles:
                    kernels = []
                    for k in base.kernels:
                        box = _scaled_box(k, nq, factor)
                        if box is None:
                            break
                        kernels.append(dataclasses.replace(k, box=box, threads=threads, tile=tile))
                    else:
                        cfg = dataclasses.replace(base, kernels=tuple(kernels), mma=shape)
                        if cfg not in seen and _fits(cfg):
                            seen.add(cfg)
                            out.append((label(cfg), cfg))
    # larger register tiles first (more operand reuse per shared-memory load), then fewer threads
    out[1:] = sorted(out[1:], key=lambda c: (-c[1].kernels[0].tile[0] * c[1].kernels[0].tile[1],
                                             c[1].kernels[0].threads))
    extra = []
    for name, cfg in (trace_candidates(variant, order) + staged_candidates(variant, order)
                      + wide_candidates(variant, order) + strip_candidates(variant, order)):
        if cfg not in seen:
            seen.add(cfg)
            extra.append((name, cfg))
    return out[:1] + extra + out[1:]


def trace_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Where the face fluxes take their traces: on an inline schedule, the interior traces from the
    staged tiles (``traces = "tiles"``); on an array schedule (p >= 63), inline fluxes instead of
    the face kernel and the fstar round trip through global memory, with the interior traces from
    global memory or from the tiles."""
    if order not in SUPPORTED_ORDERS[variant]:
        return []
    base = fused_config(variant, order)
    options = ([{"traces": "tiles"}] if base.flux == "inline"
               else [{"flux": "inline"}, {"flux": "inline", "traces": "tiles"}])
    out = []
    for opt in options:
        cfg = dataclasses.replace(base, **opt)
        if _fits(cfg):
            out.append((label(cfg), cfg))
    return out





#: Orders whose tensor-core schedules get the D-staging / occupancy candidates (the re-read of D
#: per DMMA and one block per SM bind from p = 127 on; p = 63 is cheap to include).
STAGED_FROM = 63


def _halved_box(k: KernelConfig, nq: int) -> tuple[int, int, int] | None:
    """The box with its first partial axis (k, then j) halved (None: not possible)."""
    box = list(k.box)
    for axis in range(3):
        if box[axis] != nq:
            if box[axis] % 2:
                return None
            box[axis] //= 2
            return tuple(box)  # type: ignore[return-value]
    return None


def staged_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """The D-staging and occupancy options on the order's schedule (and on its box halved, which
    frees the shared memory for a panel and a second block): ``min_blocks = 2`` alone, ``d_stage =
    "smem"`` (all of D, else the widest panel that fits), 16-k panels, and staging with two
    blocks per SM (8- and 16-k panels). Tensor-core variants only; those that do not fit are
    dropped."""
    if order < STAGED_FROM or order not in SUPPORTED_ORDERS[variant]:
        return []
    base = fused_config(variant, order)
    if base.engine != "mma":
        return []
    nq = base.nq
    options = [{"min_blocks": 2}, {"d_stage": "smem"}, {"d_stage": "smem", "d_panel": 16},
               {"d_stage": "smem", "d_panel": 16, "min_blocks": 2}, {"d_stage": "smem", "d_panel": 8, "min_blocks": 2}]
    starts = [(base, options)]
    halved, doubled = [], []
    for k in base.kernels:
        box = _halved_box(k, nq)
        if box is None:
            break
        wm, wn = k.tile
        halved.append(dataclasses.replace(k, box=box, tile=(max(1, wm // 2), wn)))
    else:
        starts.append((dataclasses.replace(base, kernels=tuple(halved)), options))
    # the box doubled with twice the threads: twice the lines per staged D panel, so half the D
    # traffic from L2 per DMMA (D is re-streamed per block), at one block per SM
    for k in base.kernels:
        box = _scaled_box(k, nq, 2)
        if box is None or 2 * k.threads > 1024:
            break
        doubled.append(dataclasses.replace(k, box=box, threads=2 * k.threads))
    else:
        starts.append((dataclasses.replace(base, kernels=tuple(doubled)),
                       [{"d_stage": "smem"}, {"d_stage": "smem", "d_panel": 16}, {"d_stage": "smem", "d_panel": 8}]))
    out, seen = [], {base}
    for start, opts in starts:
        for opt in opts:
            if opt.get("d_panel", 8) > nq or nq % opt.get("d_panel", 8):
                continue
            cfg = dataclasses.replace(start, **opt)
            if cfg.d_stage == "smem" and not cfg.d_panel and _fits(cfg):
                # name the panel the builder picks unless it stages all of D (no duplicate kernels)
                panels = {p.d_panel for p in kernel_plans(cfg)}
                if len(panels) == 1 and nq not in panels:
                    cfg = dataclasses.replace(cfg, d_panel=panels.pop())
            if cfg not in seen and _fits(cfg):
                seen.add(cfg)
                out.append((label(cfg), cfg))
    return out


def strip_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Several consecutive elements per block (whole-element schedules, p <= 15): the exterior
    traces on the face an element shares with the previous one come from L1 (ncu at p = 7: L2 at
    95 % of peak binds, mostly on the x-face gathers). 2, 4 and 8 elements, with the schedule's
    own trace source and with the other one."""
    if order not in SUPPORTED_ORDERS[variant]:
        return []
    base = fused_config(variant, order)
    if any(k.box != (base.nq,) * 3 for k in base.kernels) or base.d_stage != "global":
        return []
    out = []
    for epb in (2, 4, 8):
        for traces in (base.traces, "tiles" if base.traces == "global" else "global"):
            cfg = dataclasses.replace(base, elements_per_block=epb, traces=traces)
            if _fits(cfg):
                out.append((label(cfg), cfg))
    return out


def wide_candidates(variant: str, order: int) -> list[tuple[str, FusedConfig]]:
    """Twice the lines per block (the box doubled along its first partial axis) with D staged in
    8- or 16-k panels: the staged D panel is re-read from L2 by every block, so its L2 traffic per
    FLOP falls as 1/lines (ncu at p = 255: L2 at 75-80 % with 16 lines per block). One block per SM;
    256 or 512 threads. Tensor-core variants, p >= 255."""
    if order < 255 or order not in SUPPORTED_ORDERS[variant]:
        return []
    base = fused_config(variant, order)
    if base.engine != "mma":
        return []
    shapes = ["16x8x4", "16x8x8"] if variant == "FUSED_TC16" else [base.mma]
    out = []
    for shape in shapes:
        for threads, tiles in ((512, [(2, 2), (1, 4), (2, 4)]), (256, [(2, 4)])):
            for tile in tiles:
                for panel in (8, 16):
                    kernels = []
                    for k in base.kernels:
                        box = _scaled_box(k, base.nq, 2)
                        if box is None:
                            break
                        kernels.append(dataclasses.replace(k, box=box, threads=threads, tile=tile))
                    else:
                        cfg = dataclasses.replace(base, kernels=tuple(kernels), mma=shape, d_stage="smem",
                                                  d_panel=panel, min_blocks=0)
                        if cfg != base and _fits(cfg):
                            out.append((label(cfg), cfg))
    return out


def _candidate_list(variant: str, order: int, subset: str) -> list[tuple[str, FusedConfig]]:
    if subset == "all":
        return candidates(variant, order)
    base = fused_config(variant, order)
    subsets = {"staged": staged_candidates, "traces": trace_candidates, "wide": wide_candidates,
               "strip": strip_candidates}
    return [("base", base)] + [c for c in subsets[subset](variant, order) if c[1] != base]


def label(config: FusedConfig) -> str:
    k = config.kernels[0]
    mma = f"@{config.mma}" if config.mma else ""
    extra = ""
    if config.d_stage != "global":
        extra += f" D{config.d_stage}" + (f"{config.d_panel}" if config.d_panel else "")
    if config.min_blocks:
        extra += f" mb{config.min_blocks}"
    if config.flux == "inline" and config.order >= 63:
        extra += " inline"
    if config.traces != "global":
        extra += f" M{config.traces}"
    if config.elements_per_block > 1:
        extra += f" epb{config.elements_per_block}"
    return f"{config.variant}{mma} box{list(k.box)} t{k.threads} tile{list(k.tile)}{extra}"


def to_table(config: FusedConfig) -> str:
    """The ``[paths.<variant>]`` TOML table of ``config``."""
    lines = [f"[paths.{config.variant}]", f'flux = "{config.flux}"']
    if config.mma:
        lines.append(f'mma = "{config.mma}"')
    if config.d_stage != "global":
        lines.append(f'd_stage = "{config.d_stage}"')
    if config.d_panel:
        lines.append(f"d_panel = {config.d_panel}")
    if config.min_blocks:
        lines.append(f"min_blocks = {config.min_blocks}")
    if config.traces != "global":
        lines.append(f'traces = "{config.traces}"')
    if config.elements_per_block > 1:
        lines.append(f"elements_per_block = {config.elements_per_block}")
    lines.append("kernels = [")
    for k in config.kernels:
        lines.append(f'  {{ dirs = "{k.dir_names}", box = {list(k.box)}, threads = {k.threads}, '
                     f"tile = {list(k.tile)} }},")
    lines.append("]")
    return "\n".join(lines)


def write_table(schedule_file: Path, table: str, note: str = "") -> None:
    """Replace the ``[paths.<variant>]`` table of a schedule file by ``table`` (a ``to_table`` text).

    The table runs from its header to the line that closes its ``kernels`` array; text around it
    (comments, the other paths' tables) stays as it is. ``note`` becomes a comment line in the table.
    """
    header = table.splitlines()[0]
    text = schedule_file.read_text()
    start = re.search(rf"^{re.escape(header)}[ \t]*$", text, re.M)
    if start is None:
        raise ComposerError(f"{schedule_file}: no {header} table to replace")
    close = re.compile(r"^\][ \t]*$", re.M).search(text, start.end())
    if close is None:
        raise ComposerError(f"{schedule_file}: {header} has no closing ']' of its kernels array")
    lines = table.splitlines()
    if note:
        lines.insert(1, f"# {note}")
    schedule_file.write_text(text[:start.start()] + "\n".join(lines) + text[close.end():])


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


def apply(sweep_json: str, schedules_dir: str, date: str, min_gain: float = MIN_GAIN) -> list[str]:
    """Write the fastest candidate of each (order, variant) of a device sweep into the schedules
    (when it beats the schedule's own table, timed in the same run, by more than ``min_gain``)."""
    from composer.config.schedules import schedule_file_name

    records = json.loads(Path(sweep_json).read_text())
    changed = []
    for (order, variant), r in sorted(best_records(records).items()):
        if r["variant"].endswith("@base"):
            continue  # the schedule's own table won: nothing to write
        base = next((b for b in records if b["variant"] == f"{variant}@base" and b["order"] == order
                     and b.get("us_per_call")), None)
        if base and r["us_per_call"] > (1 - min_gain) * base["us_per_call"]:
            continue
        note = (f"H200 {date}, composer.fused.sweep: {r['us_per_call']:.1f} us/call"
                + (f" (previous schedule {base['us_per_call']:.1f})" if base and base is not r else ""))
        write_table(Path(schedules_dir) / schedule_file_name(order), r["table"], note)
        changed.append(f"p{order} {variant}: {note}")
    return changed


def _check_one(job: tuple[str, int, str, int]) -> dict:
    from composer.fused.hotloop import kernel_hot_loop
    from composer.inspect_sass import inspect_cubin

    variant, order, subset, n = job
    name, cfg = _candidate_list(variant, order, subset)[n]
    built = build(cfg, "sm_90")  # the runtime NVRTC cache ($COMPOSER_CACHE_DIR) that run() reads
    ok, info, loops = True, [], []
    blocks = max(1, cfg.min_blocks)
    for b in built.kernels:
        if not b.blocks_per_element:
            continue
        sass = next(iter(inspect_cubin(b.compiled.cubin).values()))
        info.append((sass.registers, sass.spill_bytes, b.smem_bytes))
        loops.append(kernel_hot_loop(b.compiled.cubin).counts)
        if sass.registers * b.threads * blocks > 65536 or (sass.spill_bytes > 16 and name != "base"):
            ok = False
    print(order, name, ok, info, loops, flush=True)
    return {"variant": variant, "order": order, "label": name, "ok": ok, "kernels": info,
            "hot_loops": loops, "table": to_table(cfg)}


def check(orders: list[int], max_per_variant: int = 7, workers: int = 2,
          subset: str = "all") -> dict[str, dict[str, list]]:
    """Compile the candidates on the CPU; keep those without spills and that reach their blocks per
    SM (one, or ``min_blocks``). ``subset`` ("staged", "traces"): the schedule's own table and
    that family of candidates only."""
    from concurrent.futures import ProcessPoolExecutor

    def count(v: str, o: int) -> int:
        if o not in SUPPORTED_ORDERS[v]:
            return 0
        if subset != "all":
            return len(_candidate_list(v, o, subset))
        return min(max_per_variant, len(candidates(v, o)))

    jobs = [(v, o, subset, n) for o in orders for v in SWEPT for n in range(count(v, o))]
    with ProcessPoolExecutor(workers) as pool:
        rows = list(pool.map(_check_one, jobs))
    kept: dict[str, dict[str, list]] = {str(o): {v: [] for v in SWEPT} for o in orders}
    for row in rows:
        kept[str(row["order"])][row["variant"]].append(row)
    return kept


def _build_cfg(cfg: FusedConfig) -> None:
    build(cfg, "sm_90")


def run(outdir: str, orders: list[int], deadline_s: float, plan_file: str) -> None:
    """Validate and time every kept candidate (the device side); writes OUTDIR/sweep.json.

    After an order's candidates, FUSED_DFMA is validated and timed on the fastest valid FUSED_TC
    candidate too, so that the pair can move to a new schedule together.
    """
    from concurrent.futures import ProcessPoolExecutor

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from test_fused_gpu import run_case

    from composer.config.schedules import load_schedule
    from composer.runtime import default_device

    start = time.time()
    plan = json.loads(Path(plan_file).read_text())
    todo: dict[int, dict] = {}
    for order in orders:
        cands = {f"{v}@{n}": c for v in SWEPT if order in SUPPORTED_ORDERS[v] for n, c in candidates(v, order)}
        todo[order] = {f"{variant}@{row['label']}": cands[f"{variant}@{row['label']}"]
                       for variant, rows in plan[str(order)].items() for row in rows if row["ok"]}
    with ProcessPoolExecutor(16) as pool:  # fill the NVRTC cache in parallel (no-op on a cache hit)
        list(pool.map(_build_cfg, [c for o in orders for c in todo[o].values()]))
    print(f"prebuild {time.time() - start:.1f} s", flush=True)
    device = default_device()
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    log: list[dict] = []
    for order in orders:
        if time.time() - start > deadline_s:
            break
        grid = load_schedule(order).benchmark.grid
        extra = {k: (lambda o, c=c: c) for k, c in todo[order].items()}
        recs = run_case(order, grid, ["FUSED_DFMA"], device, timing_calls=10, extra=extra)
        tc = [r for r in recs if r["variant"].startswith("FUSED_TC@") and r.get("passed")]
        best = min(tc, key=lambda r: r["us_per_call"]) if tc else None
        if best and not best["variant"].endswith("@base"):
            twin = dataclasses.replace(todo[order][best["variant"]], variant="FUSED_DFMA", dfma=True)
            recs += run_case(order, grid, [], device, timing_calls=3,
                             extra={f"FUSED_DFMA@{best['variant']}": lambda o, c=twin: c})
        for r in recs:
            r["elapsed_s"] = round(time.time() - start, 1)
            cfg = todo[order].get(r["variant"])
            r["table"] = to_table(cfg) if cfg else None
            print(json.dumps({k: r.get(k) for k in ("variant", "order", "rel_err", "us_per_call", "error")}),
                  flush=True)
        log.extend(recs)
        (out / "sweep.json").write_text(json.dumps(log, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "check":
        orders = [int(x) for x in sys.argv[2].split(",")]
        result = check(orders, subset=sys.argv[4] if len(sys.argv) > 4 else "all")
        Path(sys.argv[3] if len(sys.argv) > 3 else "sweep_plan.json").write_text(json.dumps(result, indent=1))
    elif sys.argv[1] == "apply":
        print("\n".join(apply(sys.argv[2], sys.argv[3], sys.argv[4])))
    else:
        run(sys.argv[2], [int(x) for x in sys.argv[3].split(",")], float(sys.argv[4]), sys.argv[5])
