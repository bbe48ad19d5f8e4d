"""On-disk results of one sweep, crash-safe and resumable.

Layout of a sweep directory::

    runs.jsonl       one RunRecord per line: {"sha256": <hex>, "record": {...}}
    summary.json     PathSummary list (+ ratio table), rewritten atomically
    summary.csv      the same, flat, rewritten atomically
    provenance.json  {"sessions": [collect_provenance(), ...]}, one entry per (re)start

Why append + fsync + per-line checksum for runs.jsonl (and not temp file + os.replace):
rewriting the whole file per run is O(runs^2) I/O and still needs the old content
intact to copy; an append of one complete line followed by fsync makes each finished
run durable before the next starts, and the only damage a crash (or power loss) can do
is a partial last line. The SHA-256 of the canonical record JSON detects such a line
even when the cut happens to leave valid JSON; it is skipped with a warning, and the
next append first terminates it with a newline so it can never corrupt a later record.
Small derived files are instead written whole to a temp file and os.replace'd, so a
reader sees either the old or the new version, never a mix.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import io
import json
import math
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from composer.bench.records import JobKey, RunRecord
from composer.bench.stats import (
    METRICS,
    PRIMARY_METRIC,
    MetricStats,
    PathSummary,
    RatioRow,
    claim_test,
    find_baseline,
    ranges_overlap,
    ratio_table,
    roof_fractions,
    tendency_work,
)
from composer.fileio import atomic_write, atomic_write_text, fsync_dir  # atomic_write*: re-exported

try:  # advisory lock against two drivers appending to one sweep (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 1


class ResultsWarning(UserWarning):
    """A damaged line was skipped or a resumed sweep changed build/host."""


def _json_safe(x: Any) -> Any:
    """NaN/inf -> None, so summary.json is strict JSON for non-Python readers."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def _canonical(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


def encode_line(record: RunRecord) -> bytes:
    """One strict-JSON runs.jsonl line (NaN stored as null) carrying its own checksum."""
    body = _canonical(_json_safe(record.to_dict()))
    digest = hashlib.sha256(body.encode()).hexdigest()
    return f'{{"sha256":"{digest}","record":{body}}}\n'.encode()


def decode_line(line: str) -> RunRecord:
    """Parse and verify one line; raises ValueError when damaged."""
    obj = json.loads(line)
    rec = obj["record"]
    if hashlib.sha256(_canonical(rec).encode()).hexdigest() != obj["sha256"]:
        raise ValueError("checksum mismatch")
    return RunRecord.from_dict(rec)


# -- the store -----------------------------------------------------------------------------
class ResultStore:
    """One sweep directory; see the module docstring for the layout and guarantees."""

    RUNS, SUMMARY_JSON, SUMMARY_CSV, PROVENANCE = (
        "runs.jsonl", "summary.json", "summary.csv", "provenance.json")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    @property
    def runs_path(self) -> Path:
        return self.path / self.RUNS

    # runs ------------------------------------------------------------------------------
    def append(self, record: RunRecord) -> None:
        """Durably append one run (returns after fsync)."""
        data = encode_line(record)
        created = not self.runs_path.exists()
        fd = os.open(self.runs_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # isolate a partial line left by a crash
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)  # releases the lock
        if created:
            fsync_dir(self.path)

    def iter_records(self) -> Iterator[RunRecord]:
        """Records in file order; damaged lines are skipped with a ResultsWarning."""
        if not self.runs_path.exists():
            return
        raw = self.runs_path.read_bytes()
        lines = raw.split(b"\n")
        last = len(lines) - 1 if lines[-1] else len(lines) - 2
        for i, blob in enumerate(lines):
            if not blob.strip():
                continue
            try:
                yield decode_line(blob.decode("utf-8"))
            except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                where = ("truncated last line" if i == last
                         else f"damaged line {i + 1} (partial write of an earlier crash?)")
                warnings.warn(f"{self.runs_path}: {where} ignored: {exc}", ResultsWarning,
                              stacklevel=2)

    def records(self, include_failed: bool = True) -> list[RunRecord]:
        return [r for r in self.iter_records() if include_failed or r.ok]

    def completed_keys(self, include_failed: bool = True) -> set[JobKey]:
        """Keys of jobs already run. Failed runs count as done by default (the paper
        lists them rather than retrying); pass False to retry them on resume."""
        return {r.key for r in self.records(include_failed)}

    # summaries -------------------------------------------------------------------------
    def write_summary(self, summaries: Sequence[PathSummary],
                      baseline_path: str | None = None) -> None:
        """Write summary.json (+ ratio table against ``baseline_path``) and summary.csv."""
        doc: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "generated_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "summaries": [s.to_dict() for s in summaries],
        }
        if baseline_path is not None:
            doc["baseline"] = baseline_path
            doc["ratios"] = [ratio_row_dict(r) for r in ratio_table(summaries, baseline_path)]
        atomic_write_text(self.path / self.SUMMARY_JSON,
                          json.dumps(_json_safe(doc), indent=1, allow_nan=False) + "\n")
        atomic_write_text(self.path / self.SUMMARY_CSV, summary_csv(summaries))

    def load_summaries(self) -> list[PathSummary]:
        doc = json.loads((self.path / self.SUMMARY_JSON).read_text())
        return [PathSummary.from_dict(d) for d in doc["summaries"]]

    # provenance ------------------------------------------------------------------------
    def write_provenance(self, provenance: dict[str, Any]) -> None:
        """Add this session's provenance; warn when a resume changed commit, host or GPU,
        since runs across such a change are no longer a within-job comparison (Sec. 4.5)."""
        target = self.path / self.PROVENANCE
        sessions: list[dict[str, Any]] = []
        if target.exists():
            try:
                sessions = list(json.loads(target.read_text())["sessions"])
            except (ValueError, KeyError, TypeError) as exc:
                warnings.warn(f"{target}: unreadable, starting a new list: {exc}",
                              ResultsWarning, stacklevel=2)
        if sessions:
            changed = [k for k, a, b in _identity_diff(sessions[0], provenance) if a != b]
            if changed:
                warnings.warn(f"sweep {self.path} resumed with different {', '.join(changed)}: "
                              "rounds across sessions are not a paired comparison",
                              ResultsWarning, stacklevel=2)
        sessions.append(provenance)
        atomic_write_text(target, json.dumps(_json_safe({"sessions": sessions}), indent=1,
                                             default=str) + "\n")

    def provenance_sessions(self) -> list[dict[str, Any]]:
        target = self.path / self.PROVENANCE
        return list(json.loads(target.read_text())["sessions"]) if target.exists() else []


def _identity_diff(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    def ident(p: dict[str, Any]) -> dict[str, Any]:
        git = p.get("git") or {}
        nv = p.get("nvml") or {}
        return {"commit": (git.get("commit"), git.get("dirty")),
                "hostname": p.get("hostname"),
                "gpu": tuple(g.get("uuid") for g in nv.get("gpus", [])),
                "driver": nv.get("driver_version")}
    ia, ib = ident(a), ident(b)
    return [(k, ia[k], ib[k]) for k in ia]


def ratio_row_dict(row: RatioRow) -> dict[str, Any]:
    return {
        "path": row.path, "baseline": row.baseline, "order": row.order,
        "grid": list(row.grid), "options_key": row.options_key,
        "metrics": {m: {"ratio": r.ratio, "overlap": r.overlap, "width": r.width,
                        "width_resolved": r.width_resolved, "resolved": r.claim.resolved,
                        "criterion": r.claim.criterion}
                    for m, r in row.metrics.items()},
    }


def _grid_str(grid: Sequence[int]) -> str:
    return "x".join(str(g) for g in grid)


def summary_csv(summaries: Sequence[PathSummary]) -> str:
    """Flat CSV: one row per PathSummary, seconds for times."""
    cols = ["path", "order", "grid", "options_key", "n_rounds", "n_failed",
            "n_interval_mismatch", "device_intervals", "timed_stages", "validation_error_max"]
    for m in METRICS:
        cols += [f"{m}_{s}" for s in ("median", "mad", "min", "max", "width")]
    cols += ["sm_clock_mhz_min", "sm_clock_mhz_max", "power_w_max", "power_capped_fraction",
             "clock_reasons_seen"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for s in summaries:
        row: list[Any] = [s.path, s.order, _grid_str(s.grid), s.options_key, s.n_rounds,
                          s.n_failed, s.n_interval_mismatch,
                          ";".join(map(str, s.device_intervals)),
                          ";".join(map(str, s.timed_stages)), s.validation_error_max]
        for m in METRICS:
            st = s.stats[m]
            row += [st.median, st.mad, st.min, st.max, st.width]
        c = s.clocks
        row += [c.sm_clock_mhz_min, c.sm_clock_mhz_max, c.power_w_max,
                c.power_capped_fraction, ";".join(c.reasons_seen)]
        w.writerow(["" if (v is None or (isinstance(v, float) and not math.isfinite(v)))
                    else repr(v) if isinstance(v, float) else v for v in row])
    return buf.getvalue()


# -- Markdown ------------------------------------------------------------------------------
def _decimals(median_s: float, mad_s: float = 0.0) -> int:
    """Decimals (in µs) that give the median >= 4 significant digits and the MAD two,
    capped at 3: enough to read a 0.1 % difference, no false precision."""
    med = abs(median_s) * 1e6
    d = 0 if med >= 1000 else 1 if med >= 100 else 2 if med >= 10 else 3
    mad = abs(mad_s) * 1e6
    if math.isfinite(mad) and mad > 0:
        d = max(d, 1 - math.floor(math.log10(mad)))
    return min(d, 3)


def _us(x_s: float, d: int) -> str:
    return f"{x_s * 1e6:.{d}f}" if math.isfinite(x_s) else "—"


def _med_mad(st: MetricStats) -> str:
    if not st.n:
        return "—"
    d = _decimals(st.median, st.mad)
    return f"{_us(st.median, d)} ± {_us(st.mad, d)}"


def _min_max(st: MetricStats) -> str:
    if not st.n:
        return "—"
    d = _decimals(st.median, st.mad)
    return f"{_us(st.min, d)}–{_us(st.max, d)}"


_LABEL = {"stage_wall_s": "stage", "device_per_call_s": "device", "end_to_end_s": "end-to-end"}


def write_results_markdown(
    summaries: Sequence[PathSummary],
    baseline_path: str | None = None,
    *,
    metric: str = PRIMARY_METRIC,
    peak_flops: float | None = None,
    bandwidth: float | None = None,
    work: Callable[[int, tuple[int, int, int]], tuple[float, float]] = tendency_work,
    title: str | None = None,
) -> str:
    """Markdown table for docs/results.md.

    Ratios, min-max, overlap and the claim test use ``metric`` (default: step-loop time
    per stage, the paper's primary metric). The roof fraction uses the device time per
    call, as the paper does, against the caller's measured/datasheet ``peak_flops``
    [FLOP/s] and ``bandwidth`` [B/s]; it is omitted when either is missing.
    """
    lab = _LABEL.get(metric, metric)
    base: dict[tuple[int, tuple[int, int, int]], list[PathSummary]] = {}
    for s in summaries:
        if s.path == baseline_path:
            base.setdefault((s.order, s.grid), []).append(s)
    head = ["path", "p", "grid", "stage µs (median ± MAD)", "device µs/call (median ± MAD)",
            f"{lab} min–max µs", "N", "roof (binding)",
            f"{lab} ratio vs {baseline_path}" if baseline_path else "ratio", "overlap", "resolved"]
    lines = [f"## {title}", ""] if title else []
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    mismatched = False
    for s in sorted(summaries, key=lambda s: (s.order, s.grid, s.path, s.options_key)):
        st, dv, mt = s.stats["stage_wall_s"], s.stats["device_per_call_s"], s.stats[metric]
        dev = _med_mad(dv)
        if s.n_interval_mismatch:
            dev += " †"
            mismatched = True
        n = f"{s.n_rounds}" + (f" (+{s.n_failed} failed)" if s.n_failed else "")
        roof = "—"
        if peak_flops and bandwidth and dv.n:
            flop, nbytes = work(s.order, s.grid)
            fa, fb = roof_fractions(dv.median, flop, nbytes, peak_flops, bandwidth)
            roof = f"{100 * max(fa, fb):.1f}% ({'FP64' if fa >= fb else 'HBM'})"
        b = find_baseline(base.get((s.order, s.grid), []), s)
        if b is None:
            ratio = overlap = resolved = "—"
        elif b is s:
            ratio, overlap, resolved = "1 (baseline)", "—", "—"
        else:
            c = claim_test(s, b, metric)
            ratio = f"{c.ratio:.3f}" if math.isfinite(c.ratio) else "—"
            overlap = "yes" if ranges_overlap(s, b, metric) else "no"
            resolved = f"{'yes' if c.resolved else 'no'} ({c.criterion})"
        lines.append("| " + " | ".join([
            s.path, str(s.order), _grid_str(s.grid),
            _med_mad(st), dev, _min_max(mt), n, roof, ratio, overlap,
            resolved]) + " |")
    notes = [
        "",
        "- Stage: step-loop wall time per RK stage. Device: CUDA-event sum divided by the "
        "number of tendency calls it covers. Medians and MAD over interleaved rounds; N "
        "counts successful rounds (failed runs excluded).",
        "- Resolved (Section 4.5): ranges must not overlap (range); with fewer than four "
        "rounds, |ratio − 1| must exceed 1% (1%).",
    ]
    if peak_flops and bandwidth:
        notes.append(f"- Roof: max(FLOP/peak, bytes/bandwidth)/device time, peak "
                     f"{peak_flops / 1e12:.2f} TFLOP/s, bandwidth {bandwidth / 1e12:.2f} TB/s.")
    if mismatched:
        notes.append("- † the CUDA-event sum did not cover exactly N timed stages in at least "
                     "one round (Section S13.3); the per-call value divides by the count covered.")
    return "\n".join(lines + notes) + "\n"


__all__ = ["ResultsWarning", "atomic_write", "atomic_write_text", "encode_line",
           "decode_line", "ResultStore", "ratio_row_dict", "summary_csv",
           "write_results_markdown", "SCHEMA_VERSION"]
