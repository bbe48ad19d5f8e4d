"""``composer model``: the instruction-aware model, all without a GPU.

    composer model prices  [--machine M]                      Table 6 and the capacities per SM cycle
    composer model fit     --profiles DIR[@MACHINE]... --out MODEL.json
    composer model predict --model MODEL.json --machine M --build BUILD_DIR [--sms N] [--out P.json]
    composer model score   --predictions P.json... --measured DIR... [--family-errors [LO-HI:]SCORE.json]...
                           [--family-rule others|given] [--measured-resolution PCT] [--out SCORE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

from composer.arch.machines import DEFAULT_MACHINE, get_machine, load_machines
from composer.cli import output
from composer.cli.arguments import csv_list, positive_int
from composer.errors import ComposerError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "model", help="the instruction-aware model: prices, calibration, prediction, scoring (no GPU)",
        description="Demands per resource from ncu counters priced by the DMMA shape each machine "
        "issues (c_tc = max(4, F_DMMA / C_tc), c_cc = 64 / C_cc), one calibration factor eta per "
        "kernel, predictions for machines or SM counts that are not run, and their scores.")
    commands = parser.add_subparsers(dest="model_command", metavar="SUBCOMMAND", required=True)

    prices = commands.add_parser("prices", help="Table 6: DMMA and DFMA prices, capacities per SM cycle")
    prices.add_argument("--machine", default=None, help="one machine (default: every machine with capacities)")
    prices.add_argument("--json", action="store_true", help="print machine-readable JSON")
    prices.set_defaults(func=run_prices)

    fit = commands.add_parser("fit", help="calibrate eta per kernel from saved `composer profile` directories",
                              description="Each DIR holds PATH-pORDER.csv raw ncu CSVs (and profile.json) "
                              "taken on MACHINE (DIR@MACHINE, default --machine).")
    fit.add_argument("--profiles", nargs="+", required=True, metavar="DIR[@MACHINE]")
    fit.add_argument("--machine", default=DEFAULT_MACHINE, help=f"calibration machine (default: {DEFAULT_MACHINE})")
    fit.add_argument("--build", type=Path, default=None,
                     help="the build the profiles ran (for DMMA shapes their kernel names do not state)")
    fit.add_argument("--out", type=Path, required=True, metavar="MODEL.json")
    fit.add_argument("--no-floor", dest="floor", action="store_false",
                     help="price DMMA without the four-cycle floor (the Table 7 ablation)")
    fit.add_argument("--overlap", type=float, default=None, metavar="K",
                     help="combine the demands by their K-norm instead of the max (K >= 1; chosen by "
                          "`composer model overlap`; default: the paper's max)")
    fit.add_argument("--latency-form", choices=("norm", "interp", "max"), default="interp",
                     help="how restricted calibrations (DIR with --sms profiles) enter: norm fits per kernel a "
                          "latency demand inside the K-norm and an eta exponent in the SM count; interp "
                          "(default, session 12) is norm passed through every restricted calibration (its "
                          "residuals interpolated in log N between them); max is session 8's "
                          "max(roof, lambda / N) past a 1.15x margin")
    fit.add_argument("--separate-kernels", dest="share", action="store_false",
                     help="calibrate a binary that several paths launch at one order once per path (as models "
                          "before session 12 did) instead of pricing every launch of it from one calibration")
    fit.add_argument("--json", action="store_true", help="print the calibration summary as JSON")
    fit.set_defaults(func=run_fit)

    overlap = commands.add_parser(
        "overlap", help="choose the demand-combining exponent K from pairs of calibrated shapes",
        description="Each --pair predicts one calibrated path from another's counters (a shape transfer on "
        "the calibration machine, e.g. FUSED_TC16 from FUSED_TC) for every exponent candidate and compares "
        "it with the target's own ncu times; the K with the smallest median |path error| is the one to fit "
        "with (`composer model fit --overlap K`).")
    overlap.add_argument("--pair", action="append", required=True, metavar="SRC.json:PATH=TGT.json:PATH",
                         help="source model and path, target model and path (the models may be one file); "
                              "repeatable")
    overlap.add_argument("--machine", default=DEFAULT_MACHINE, help=f"calibration machine (default: {DEFAULT_MACHINE})")
    overlap.add_argument("--build", type=Path, required=True, metavar="BUILD_DIR",
                         help="a build holding both shapes' kernels")
    overlap.add_argument("--mma", default=None, metavar="SHAPE",
                         help="the CuTe GEMM shape of the targets (e.g. 16x8x4)")
    overlap.add_argument("--out", type=Path, default=None, metavar="OVERLAP.json")
    overlap.add_argument("--json", action="store_true", help="print the choice as JSON")
    overlap.set_defaults(func=run_overlap)

    predict = commands.add_parser("predict", help="predict a machine (or SM count) from a model and a build")
    predict.add_argument("--model", type=Path, required=True, metavar="MODEL.json")
    predict.add_argument("--machine", required=True, help="target machine (the machine table)")
    predict.add_argument("--build", type=Path, required=True, metavar="BUILD_DIR",
                         help="`composer build` directory cross-compiled for the target")
    predict.add_argument("--sms", type=positive_int, default=None,
                         help="active SMs (green-context split: even, >= 2, <= the machine's)")
    predict.add_argument("--paths", type=csv_list(str), default=None)
    predict.add_argument("--orders", type=csv_list(positive_int), default=None)
    predict.add_argument("--as", dest="aliases", action="append", default=[], metavar="PATH=CALIBRATED",
                         help="predict PATH from CALIBRATED's counters (e.g. FUSED_TC16=FUSED_TC); repeatable")
    predict.add_argument("--mma", default=None, metavar="SHAPE",
                         help="the CuTe GEMM shape to take from a build holding several (e.g. 16x8x4)")
    predict.add_argument("--family-errors", type=Path, default=None, metavar="SCORE.json",
                         help="family errors for S/E (the family_errors of a `composer model score` output)")
    predict.add_argument("--skip-missing", action="store_true",
                         help="leave out (path, order) cells whose kernels the build lacks (listed in the "
                              "file's 'skipped'), instead of stopping")
    predict.add_argument("--out", type=Path, default=None, metavar="P.json",
                         help="predictions file (default: results/model/predict-LABEL.json)")
    predict.add_argument("--json", action="store_true", help="print the predictions as JSON")
    predict.set_defaults(func=run_predict)

    paper = commands.add_parser(
        "paper", help="our predictions for GB200, H100, A100 next to the paper's measured ratios there",
        description="A plausibility comparison, not a score: the paper measured its kernels (Tables "
        "S23-S25, schedules/authors_device_times.toml), the predictions are of ours. Per machine and order: "
        "FUSED_DFMA/FUSED_TC, GEMM/FUSED_TC, GEMM_FUSED/GEMM_CUTE, FUSED_TC/FUSED, GEMM_FUSED/FUSED_TC on "
        "both sides and the fastest of the paths both have.")
    paper.add_argument("--predictions", nargs="+", type=Path, required=True, metavar="P.json")
    paper.add_argument("--paper", type=Path, default=None, metavar="TIMES.toml",
                       help="the paper's device times (default: the shipped authors_device_times.toml)")
    paper.add_argument("--out", type=Path, default=None, metavar="COMPARISON.json")
    paper.add_argument("--json", action="store_true", help="print the comparison as JSON")
    paper.set_defaults(func=run_paper)

    score = commands.add_parser("score", help="score predictions against bench or profile measurements")
    score.add_argument("--predictions", nargs="+", type=Path, required=True, metavar="P.json")
    score.add_argument("--measured", nargs="+", type=Path, required=True, metavar="RESULTS",
                       help="`composer bench --out` or `composer profile --out` directories")
    score.add_argument("--per-cycle", action="store_true",
                       help="compare in SM cycles: each bench time scaled by its run's median NVML SM clock over "
                            "the boost clock the predictions price at (separates a power cap from the model)")
    score.add_argument("--metric", default="device_per_call_s", choices=("device_per_call_s", "stage_wall_s"),
                       help="bench timer to score against (default: device_per_call_s)")
    score.add_argument("--family-errors", action="append", default=[], metavar="[LO-HI:]SCORE.json",
                       help="family errors where no other target gives one (the family_errors of a `composer "
                            "model score` output); LO-HI: only for targets of LO..HI active SMs (repeatable, one "
                            "band per SM count; at most one file without a range, for the SM counts no band holds)")
    score.add_argument("--family-rule", choices=("others", "given"), default="others",
                       help="others (default): a ratio's family error is the median over the other targets "
                            "of this score, else the given one; given: the given family error for the target's "
                            "SM count, for every ratio (a screen fixed before the measurement)")
    score.add_argument("--resolution-floor", type=float, default=None, metavar="PCT",
                       help="smallest family error the S/E screen divides by, in percent (default 1.0, the "
                            "bench's resolution; 0: the paper's rule, as session 6 and session 8's first "
                            "test were scored)")
    score.add_argument("--measured-resolution", type=float, default=None, metavar="PCT",
                       help="a ratio whose measured value lies within PCT %% of 1 (|r_meas - 1| <= PCT/100, "
                            "r_meas as the ratio table orients it) has no measured sign: it is a tie "
                            "('unresolved by the measurement'), counted neither right nor wrong, screened or "
                            "not, and counted apart in the summary. 1 is composer bench's rule for fewer than "
                            "four rounds (a ratio is resolved when |ratio - 1| > 1 %%). Default: off, every "
                            "ratio has a sign")
    score.add_argument("--out", type=Path, default=None, metavar="SCORE.json")
    score.add_argument("--json", action="store_true", help="print the score as JSON")
    score.set_defaults(func=run_score)


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


# --- prices -----------------------------------------------------------------------------------


def run_prices(args: argparse.Namespace) -> int:
    from composer.model.prices import machine_prices

    machines = [get_machine(args.machine)] if args.machine else \
        [m for m in load_machines().values() if m.capacity is not None]
    if not machines:
        raise ComposerError("no machine of the table has capacities per SM cycle")
    report = [machine_prices(m) for m in machines]
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    con = output.console()
    table = output.table(("machine", "shape", "F_DMMA", "F_DMMA / C_tc", "c_tc", "c_cc"), title="Table 6",
                         right=("F_DMMA", "F_DMMA / C_tc", "c_tc", "c_cc"))
    for m in report:
        for row in m["dmma"]:
            table.add_row(m["machine"], row["shape"], str(row["flop"]), f"{row['flop_price']:.3f}", f"{row['c_tc']:.3f}", f"{m['c_cc']:.3f}")
    con.print(table)
    caps = output.table(("machine", "resource", "per SM cycle", "source"), title="capacities",
                        right=("per SM cycle",))
    for m in report:
        for resource, value in m["capacity_per_sm_cycle"].items():
            if resource == "fp64":
                shown = f"{m['fp64_tc_flop_per_sm_cycle']:g} / {m['fp64_core_flop_per_sm_cycle']:g} FLOP"
            elif isinstance(value, dict):  # a measured curve: TB/s by SM count
                shown = ", ".join(f"{sms}: {tbs:g} TB/s" for sms, tbs in value.items())
            else:
                shown = f"{value:.2f}"
            caps.add_row(m["machine"], resource, shown, m["sources"][resource])
    con.print(caps)
    return 0


# --- fit --------------------------------------------------------------------------------------


def _sources(items: list[str], default_machine: str) -> list[Any]:
    from composer.model.calibrate import ProfileSource

    out = []
    for item in items:
        directory, sep, name = item.rpartition("@")
        if not sep:
            directory, name = item, default_machine
        out.append(ProfileSource(Path(directory), get_machine(name)))
    return out


def fit_summary(model: Any) -> dict[str, Any]:
    """Per kernel: binding, eta, closure; the closure median over the kernels the paper selects
    (budget utilization above 5 %, at least one block per SM, priced work)."""
    rows = []
    selected = []
    for k in model.kernels:
        sms = model.machines[k.machine]["sm_count"]
        utilization = None
        if k.counters.budget_cycles is not None and k.counters.elapsed_cycles > 0:
            utilization = k.counters.budget_cycles / (k.counters.elapsed_cycles * sms)
        rows.append({"machine": k.machine, "path": k.path, "order": k.order, "role": k.role, "name": k.name,
                     "shape": k.shape, "binding": k.binding, "eta": k.eta_at(model.overlap), "closure": k.closure,
                     "budget_utilization": utilization, "dmma_unpriced": k.dmma_unpriced,
                     "sm_scaling": None if k.sm_scaling is None else k.sm_scaling.to_dict(),
                     "shared_from": k.shared_from})
        if k.closure is not None and utilization is not None and utilization > 0.05 and k.counters.grid >= sms:
            selected.append(k.closure)
    return {"model_hash": model.hash, "overlap": model.overlap, "latency_form": model.latency_form, "kernels": rows,
            "closure": {"n": len(selected), "median": statistics.median(selected) if selected else None,
                        "min": min(selected, default=None), "max": max(selected, default=None)}}


def _sm_scaling_cell(scaling: dict | None) -> str:
    """A kernel's fitted SM-count dependence in a few characters: the latency demand (millions of
    SM-cycles), the eta exponent, the restricted runs it came from."""
    if scaling is None:
        return "-"
    parts = []
    if scaling["latency_sm_cycles"]:
        parts.append(f"lat {scaling['latency_sm_cycles'] / 1e6:.3g}M SM-cyc")
    if abs(scaling["eta_sm_exponent"]) > 1e-4:
        parts.append(f"gamma {scaling['eta_sm_exponent']:+.3f}")
    return (", ".join(parts) or "none") + f" ({', '.join(scaling['fitted_from'])})"


def run_fit(args: argparse.Namespace) -> int:
    from composer.model.calibrate import fit

    model = fit(_sources(args.profiles, args.machine), build=args.build, floor=args.floor, overlap=args.overlap,
                latency_form=args.latency_form, share=args.share)
    model.save(args.out)
    summary = {"out": str(args.out), **fit_summary(model)}
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    table = output.table(("machine", "path", "p", "role", "shape", "binding", "eta", "closure", "SM scaling"),
                         title=f"calibration ({len(model.kernels)} kernels)", right=("p", "eta", "closure"))
    for r in summary["kernels"]:
        table.add_row(r["machine"], r["path"], str(r["order"]), r["role"], r["shape"] or "-", r["binding"],
                      f"{r['eta']:.3f}", _fmt(r["closure"], ".3f"), _sm_scaling_cell(r["sm_scaling"]))
    con = output.console()
    con.print(table)
    c = summary["closure"]
    con.print(f"FP64-budget closure (counter / priced, {c['n']} kernels selected): median "
              f"{_fmt(c['median'], '.3f')}, range {_fmt(c['min'], '.3f')}-{_fmt(c['max'], '.3f')}")
    combined = "max_r D_r (the paper's)" if model.overlap is None else f"the {model.overlap:g}-norm of the demands"
    con.print(f"model {args.out} (sha256 {summary['model_hash'][:16]}; eta and predictions against {combined})")
    return 0


# --- overlap ----------------------------------------------------------------------------------


def _pair(item: str, loaded: dict[Path, Any]) -> Any:
    from composer.model.calibrate import Model
    from composer.model.overlap import ShapePair

    source, sep, target = item.partition("=")
    sides = []
    for side in (source, target):
        file, colon, path = side.rpartition(":")
        if not sep or not colon or not file or not path:
            raise ComposerError(f"--pair expects SRC.json:PATH=TGT.json:PATH, got {item!r}")
        key = Path(file)
        if key not in loaded:
            loaded[key] = Model.load(key)
        sides.append((loaded[key], path.strip().upper()))
    (src_model, src_path), (tgt_model, tgt_path) = sides
    return ShapePair(src_model, src_path, tgt_model, tgt_path, label=f"{tgt_path} from {src_path}")


def run_overlap(args: argparse.Namespace) -> int:
    from composer.fileio import atomic_write_text
    from composer.model.build import Build
    from composer.model.capacity import capacities
    from composer.model.overlap import choose_overlap

    loaded: dict[Path, Any] = {}
    pairs = [_pair(item, loaded) for item in args.pair]
    machine = capacities(get_machine(args.machine), floor=pairs[0].source.floor)
    choice = choose_overlap(pairs, machine, Build(args.build), args.mma)
    document = {"pairs": args.pair, "machine": machine.label, "build": str(args.build), "mma": args.mma,
                "models": {str(p): m.hash for p, m in loaded.items()}, **choice.to_dict()}
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(document, indent=1) + "\n")
    if args.json:
        print(json.dumps(document, indent=1))
        return 0
    cells = sorted({(e.pair, e.order) for _, errs in choice.by_candidate for e in errs})
    table = output.table(("K", "median |error|", *[f"{pair} p={order}" for pair, order in cells]),
                         title=f"shape transfers on {machine.label} by overlap exponent",
                         right=("median |error|",))
    for k, errors in choice.by_candidate:
        by_cell = {(e.pair, e.order): e.error for e in errors}
        mark = " *" if k == choice.chosen else ""
        table.add_row(("max" if k is None else f"{k:g}") + mark, f"{choice.median(k) * 100:.1f} %",
                      *[f"{by_cell[c] * 100:+.1f} %" for c in cells])
    con = output.console()
    con.print(table)
    chosen = "max (the paper's)" if choice.chosen is None else f"{choice.chosen:g}"
    for line in choice.skipped:
        con.print(f"no transfer (left out): {line}")
    hint = "fit without --overlap" if choice.chosen is None else f"`composer model fit ... --overlap {chosen}`"
    con.print(f"chosen: K = {chosen} ({hint})")
    return 0


# --- predict ----------------------------------------------------------------------------------


def _aliases(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        target, sep, source = item.partition("=")
        if not sep or not target or not source:
            raise ComposerError(f"--as expects PATH=CALIBRATED (e.g. FUSED_TC16=FUSED_TC), got {item!r}")
        out[target.strip().upper()] = source.strip().upper()
    return out


def _family_errors(path: Path | None) -> dict[str, float] | None:
    if path is None:
        return None
    from composer.model.calibrate import read_json
    from composer.model.score import SCHEMA, VERSION

    return {k: float(v) for k, v in read_json(path, SCHEMA, VERSION)["family_errors"].items()}


_BAND = re.compile(r"^([^:/\\]*-[^:/\\]*):(.+)$")


def _family_bands(items: list[str]) -> tuple[dict[str, float] | None, list[Any]]:
    """``--family-errors [LO-HI:]SCORE.json``...: the unbanded family errors (at most one file) and
    the bands."""
    from composer.model.score import FamilyBand, check_bands

    unbanded: dict[str, float] | None = None
    plain: list[str] = []
    bands = []
    for item in items:
        m = _BAND.match(item)
        if m is None:
            plain.append(item)
            unbanded = _family_errors(Path(item))
            continue
        lo, _, hi = m.group(1).partition("-")
        if not (lo.strip().isdigit() and hi.strip().isdigit()):
            raise ComposerError(f"--family-errors {item!r}: expected LO-HI:SCORE.json with LO and HI active SM "
                                f"counts (e.g. 20-64:score_below66.json)")
        bands.append(FamilyBand(int(lo), int(hi), _family_errors(Path(m.group(2))), m.group(2)))
    if len(plain) > 1:
        raise ComposerError(f"--family-errors: at most one file without an SM range, got {len(plain)} "
                            f"({', '.join(plain)}); give the others as LO-HI:SCORE.json")
    check_bands(bands)
    return unbanded, bands


def run_predict(args: argparse.Namespace) -> int:
    from composer.model.build import Build
    from composer.model.calibrate import Model
    from composer.model.capacity import capacities
    from composer.model.predict import predict, predictions_document, write_predictions

    model = Model.load(args.model)
    target = capacities(get_machine(args.machine), args.sms, floor=model.floor)
    build = Build(args.build)
    skipped: list[str] | None = [] if args.skip_missing else None
    predictions = predict(model, target, build, paths=args.paths, orders=args.orders,
                          aliases=_aliases(args.aliases), mma=args.mma, skipped=skipped)
    document = predictions_document(model, str(args.model), target, build, predictions,
                                    _family_errors(args.family_errors), skipped)
    out = args.out or Path("results/model") / f"predict-{target.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_predictions(out, document)
    if args.json:
        print(json.dumps(document, indent=1))
        return 0
    con = output.console()
    table = output.table(("path", "p", "role", "binding", "calibration binding", "eta", "µs"),
                         title=f"{target.label}: kernels", right=("p", "eta", "µs"))
    for p in predictions:
        for k in p.kernels:
            table.add_row(p.path if p.path == p.source_path else f"{p.path} (from {p.source_path})",
                          str(p.order), k.role, k.binding, k.calibration_binding, f"{k.eta:.3f}",
                          f"{k.seconds * 1e6:.1f}")
    con.print(table)
    totals = output.table(("p", "fastest", "µs", "paths", "S/E", "screened"), title=f"{target.label}: fastest path",
                          right=("p", "µs", "paths", "S/E"))
    for f in document["fastest"]:
        totals.add_row(str(f["order"]), f["path"], f"{f['seconds'] * 1e6:.1f}", str(f["paths"]),
                       _fmt(f["se"], ".2f"), "-" if f["screened"] is None else ("yes" if f["screened"] else "no"))
    con.print(totals)
    for line in skipped or []:
        con.print(f"skipped (not in {args.build}): {line}")
    for p in predictions:
        for note in p.notes:
            con.print(f"note: {p.path} p={p.order}: {note}")
    con.print(f"predictions {out} (model sha256 {document['model_hash'][:16]}, predictions sha256 "
              f"{document['hash'][:16]})")
    return 0


# --- paper ------------------------------------------------------------------------------------


def run_paper(args: argparse.Namespace) -> int:
    from composer.fileio import atomic_write_text
    from composer.model.paper import RATIOS, compare, load_paper_times, summary
    from composer.model.predict import read_predictions

    documents = [read_predictions(p) for p in args.predictions]
    rows = compare(documents, load_paper_times(args.paper))
    report = {"kind": "plausibility comparison (the paper's kernels measured, ours predicted), not a score",
              "predictions": [str(p) for p in args.predictions],
              "model_hashes": sorted({d["model_hash"] for d in documents}),
              "rows": [r.to_dict() for r in rows], "summary": summary(rows)}
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(report, indent=1) + "\n")
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    names = [f"{a}/{b}" for a, b in RATIOS]
    table = output.table(("machine", "p", *[f"{n} ours (paper)" for n in names], "fastest ours (paper)"),
                         title="predicted for our kernels (measured for the paper's)", right=("p",))
    for r in rows:
        cells = [f"{_fmt(r.ratios[n][0], '.3f')} ({_fmt(r.ratios[n][1], '.3f')})" for n in names]
        table.add_row(r.machine, str(r.order), *cells, f"{r.ours_fastest or '-'} ({r.paper_fastest or '-'})")
    con = output.console()
    con.print(table)
    s = summary(rows)
    con.print(f"ratios on the same side of 1: {s['same_side_of_1']}/{s['ratios']}; fastest path agrees: "
              f"{s['fastest_agrees']}/{s['orders']} (a plausibility comparison, not a score)")
    return 0


# --- score ------------------------------------------------------------------------------------


def run_score(args: argparse.Namespace) -> int:
    from composer.fileio import atomic_write_json_compact
    from composer.model.measured import read_measured
    from composer.model.predict import read_predictions
    from composer.model.errors import ModelError
    from composer.model.ratios import RESOLUTION_PCT
    from composer.model.score import check_resolution, score

    floor = RESOLUTION_PCT if args.resolution_floor is None else args.resolution_floor
    if not (floor >= 0 and math.isfinite(floor)):
        raise ModelError(f"--resolution-floor {args.resolution_floor}: expected a percentage >= 0")
    check_resolution(args.measured_resolution)
    unbanded, bands = _family_bands(args.family_errors)
    if args.family_rule == "given" and not args.family_errors:
        raise ModelError("--family-rule given needs --family-errors (a file, or LO-HI:SCORE.json bands)")
    predictions = [read_predictions(p) for p in args.predictions]
    measured = [cell for d in args.measured for cell in read_measured(d, args.metric)]
    if args.per_cycle:
        from composer.model.measured import per_cycle

        clocks = {float(p["target"]["clock_hz"]) for p in predictions}
        if len(clocks) != 1:
            raise ModelError(f"--per-cycle: the predictions price at several clocks ({sorted(clocks)}); score one at a time")
        measured = per_cycle(measured, clocks.pop())
    result = score(predictions, measured, unbanded, floor, bands=bands, given_only=args.family_rule == "given",
                   measured_resolution_pct=args.measured_resolution)
    if not result["cells"]:
        raise ComposerError("no measured cell matches a prediction (same path, order and active SM count)")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json_compact(args.out, result)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    con = output.console()
    cells = output.table(("target", "path", "p", "predicted µs", "measured µs", "error %"),
                         title="path totals", right=("p", "predicted µs", "measured µs", "error %"))
    for c in result["cells"]:
        cells.add_row(c["target"], c["path"], str(c["order"]), f"{c['predicted_s'] * 1e6:.1f}",
                      f"{c['measured_s'] * 1e6:.1f}", f"{c['error_pct']:+.1f}")
    con.print(cells)
    ratios = output.table(("target", "p", "ratio", "pred", "meas", "sign", "S/E"), title="ratios",
                          right=("p", "pred", "meas", "S/E"))
    for r in result["ratios"]:
        ratios.add_row(r["target"], str(r["order"]), r["ratio"] + (" *" if r["seven"] else ""),
                       f"{r['r_pred']:.3f}", f"{r['r_meas']:.3f}",
                       "tie" if r.get("sign") == "tie" else ("right" if r["sign_right"] else "WRONG"),
                       _fmt(r["se"], ".2f"))
    con.print(ratios)
    s = result["summary"]
    con.print(f"path totals: median |error| {_fmt(s['paths']['median_abs_pct'], '.1f')} %, p90 "
              f"{_fmt(s['paths']['p90_abs_pct'], '.1f')} % over {s['paths']['n']}; at p >= 255: "
              f"{_fmt(s['paths_p>=255']['median_abs_pct'], '.1f')} % over {s['paths_p>=255']['n']}")
    if "measured_resolution_pct" in result:
        r, v = s["ratios"], s["seven_ratios"]
        con.print(f"ratio signs right {r['sign_right']}/{r['sign_right'] + r['sign_wrong']} with a measured sign, "
                  f"{r['unresolved']} of {r['n']} unresolved by the measurement (|r_meas - 1| <= "
                  f"{result['measured_resolution_pct']:g} %: tie); screened in (S/E >= 1) "
                  f"{r['screened_right']}/{r['screened_right'] + r['screened_wrong']} right, "
                  f"{r['screened_unresolved']} of {r['screened']} screened a tie (* = the seven ratios: "
                  f"{v['sign_right']}/{v['sign_right'] + v['sign_wrong']}, {v['unresolved']} tie)")
    else:
        con.print(f"ratio signs right {s['ratios']['sign_right']}/{s['ratios']['n']}; screened in (S/E >= 1) "
                  f"{s['ratios']['screened_right']}/{s['ratios']['screened']} right (* = the seven ratios: "
                  f"{s['seven_ratios']['sign_right']}/{s['seven_ratios']['n']})")
    for what in ("measured_without_prediction", "predicted_without_measurement"):
        if result[what]:
            con.print(f"{what.replace('_', ' ')}: {'; '.join(result[what])}")
    if "family_error_rule" in result:
        bands_text = ", ".join(f"{b['sms'][0]}-{b['sms'][1]} SMs from {b['source']}" for b in result["family_error_bands"])
        con.print(f"family errors: {result['family_error_rule']}" + (f" (bands: {bands_text})" if bands_text else ""))
    ch = s["choices"]
    con.print(f"fastest path chosen right {ch['right']}/{ch['n']}; loss median {_fmt(ch['median_loss_pct'], '.1f')} %, "
              f"max {_fmt(ch['max_loss_pct'], '.1f')} %")
    return 0
