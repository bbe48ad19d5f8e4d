"""Find what a report is made of: the results files under the directories it is given.

Recognised (by content, not by name, except the bench directories' fixed file names):

- a ``composer bench`` results directory: one holding ``runs.jsonl`` (its ``provenance.json``
  says which commit, host, GPU and driver produced it);
- a ``composer profile`` summary: a JSON object whose values are ``{"path", "order", "kernels"}``
  entries keyed ``PATH@pORDER``;
- a ``composer graph --measure`` file: ``{"order", "grid", "paths": [...]}`` (or one path's report
  at the top level) whose path reports carry ``"measure"``;
- a ``composer model predict`` file (``"schema": "composer.model-predictions"``), a
  ``composer model score`` file (``"schema": "composer.model-score"``) and a ``composer
  sweep-carrier`` report (``"schema": "composer.carrier-sweep"``, ``--out``).

Any other file is ignored (the sweeps' JSON, micro-benchmarks, logs) and counted. A directory whose
name ends in ``_invalid`` (a measurement kept only as the evidence of a bug) is skipped, as is any
path matching an ``exclude`` glob (matched against the path relative to the argument it was found
under, and against its name). A results directory given as an argument may carry its own globs in
``report-exclude.txt`` (one per line, ``#`` comments: the reason), applied as if given with
``--exclude``: the runs that time code which no longer ships (an A/B's other tree, a plan variant)
stay as evidence, and every report and crossover map of the directory leaves them out alike.

Why dates matter: when several files measure the same thing the newest one is used. A bench
directory's date is its first session's ``date_utc``; a profile or graph file records no date
before it carries ``date_utc`` or a provenance, so its date is the commit date of the commit that
added it when it lies in a git checkout (results are committed right after the session that made
them), else its modification time.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import fnmatch
import json
import os
import re
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composer.bench.records import RunRecord
from composer.bench.results import ResultStore, ResultsWarning

INVALID_SUFFIX = "_invalid"
PREDICTIONS_SCHEMA = "composer.model-predictions"
SCORE_SCHEMA = "composer.model-score"
CARRIER_SWEEP_SCHEMA = "composer.carrier-sweep"  # composer.cli.sweep_carrier writes it
_SM_COUNT = re.compile(r"(\d+) SMs")  # in the provenance's "device": Device(0: NVIDIA H200, sm_90, 132 SMs)
_BENCH_FILES = {ResultStore.RUNS, ResultStore.SUMMARY_JSON, ResultStore.SUMMARY_CSV, ResultStore.PROVENANCE,
                "summary.md"}


@dataclass(frozen=True)
class Identity:
    """What produced a results file: when, from which commit, on which host, GPU and driver."""

    date_utc: str | None = None
    commit: str | None = None
    dirty: bool | None = None
    host: str | None = None
    gpu: str | None = None
    gpu_memory_bytes: int | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    driver: str | None = None
    cuda_driver: int | None = None
    max_sm_clock_mhz: int | None = None
    power_limit_w: float | None = None
    command: str | None = None
    environment: str | None = None  # the recorded COMPOSER_*/CUDA_* variables, "NAME=value ..."

    @classmethod
    def of_provenance(cls, session: dict[str, Any] | None, date: str | None = None) -> Identity:
        """From one ``collect_provenance()`` record (a bench session, a graph file's provenance)."""
        if not session:
            return cls(date_utc=date)
        git = session.get("git") or {}
        nvml = session.get("nvml") or {}
        gpus = nvml.get("gpus") or [{}]
        gpu = gpus[0] or {}
        cc = gpu.get("compute_capability")
        sms = _SM_COUNT.search(str(session.get("device") or ""))
        return cls(
            date_utc=session.get("date_utc") or date, commit=git.get("commit"), dirty=git.get("dirty"),
            host=session.get("hostname"), gpu=gpu.get("name"), gpu_memory_bytes=gpu.get("memory_total_bytes"),
            compute_capability=".".join(str(c) for c in cc) if cc else None,
            sm_count=int(sms.group(1)) if sms else None,
            driver=nvml.get("driver_version"), cuda_driver=session.get("cuda_driver_version"),
            max_sm_clock_mhz=gpu.get("max_sm_clock_mhz"), power_limit_w=gpu.get("enforced_power_limit_w"),
            command=" ".join(_command(session.get("argv") or [])) or None,
            environment=" ".join(f"{k}={v}" for k, v in sorted((session.get("env") or {}).items())) or None)

    @property
    def arch(self) -> str | None:
        return f"sm_{self.compute_capability.replace('.', '')}" if self.compute_capability else None

    @property
    def short_commit(self) -> str:
        if not self.commit:
            return "unknown"
        return self.commit[:7] + ("+dirty" if self.dirty else "")


def _command(argv: list[str]) -> list[str]:
    """``composer bench ...`` for an argv whose first element is the interpreter's script path."""
    if argv and (argv[0].endswith("main.py") or argv[0].endswith("composer") or argv[0].endswith("__main__.py")):
        return ["composer", *argv[1:]]
    return list(argv)


@dataclass
class BenchSource:
    """One ``composer bench`` results directory."""

    directory: Path
    display: str
    records: list[RunRecord]
    sessions: list[Identity]
    label: str = ""
    damaged: list[str] = field(default_factory=list)  # warnings about damaged runs.jsonl lines

    @property
    def identity(self) -> Identity:
        return self.sessions[0] if self.sessions else Identity()

    @property
    def date(self) -> str:
        return self.identity.date_utc or ""


@dataclass
class DataFile:
    """One recognised JSON file (profile summary, graph measure, model prediction or score)."""

    kind: str  # "profile", "graph", "predictions", "score"
    file: Path
    display: str
    document: Any
    date: str
    identity: Identity
    label: str = ""


@dataclass
class Inputs:
    """Everything found under the report's arguments, oldest first within each kind."""

    bench: list[BenchSource] = field(default_factory=list)
    files: list[DataFile] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # directories skipped, with the reason
    ignored: int = 0  # files of no recognised kind
    damaged: list[str] = field(default_factory=list)  # warnings from damaged runs.jsonl lines

    def of_kind(self, kind: str) -> list[DataFile]:
        return [f for f in self.files if f.kind == kind]


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def _excluded(rel: str, name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in patterns)


def _git_date(file: Path) -> str | None:
    """Commit date (UTC ISO) of the commit that added ``file``; None outside a git checkout."""
    try:
        res = subprocess.run(["git", "-C", str(file.parent), "log", "--diff-filter=A", "-1", "--format=%cI", "--",
                              file.name], capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    text = res.stdout.strip()
    if not text:
        return None
    return _dt.datetime.fromisoformat(text).astimezone(_dt.timezone.utc).isoformat(timespec="seconds")


def _mtime(file: Path) -> str:
    return _dt.datetime.fromtimestamp(file.stat().st_mtime, _dt.timezone.utc).isoformat(timespec="seconds")


def file_date(file: Path, document: Any) -> str:
    """A profile or graph file's date (see the module docstring)."""
    stated = _stated_date(document)
    return stated or _git_date(file) or _mtime(file)


def _stated_date(document: Any) -> str | None:
    if not isinstance(document, dict):
        return None
    for key in ("date_utc", "created_utc"):
        if isinstance(document.get(key), str):
            return document[key]
    for report in _graph_reports(document) if "order" in document else []:
        prov = report.get("provenance") or {}
        if isinstance(prov, dict) and isinstance(prov.get("date_utc"), str):
            return prov["date_utc"]
    entries = [v for v in document.values() if isinstance(v, dict)]
    dates = [e["date_utc"] for e in entries if isinstance(e.get("date_utc"), str)]
    return max(dates) if dates else None


def _graph_reports(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The path reports of a ``composer graph`` document (several under "paths", or one inline)."""
    if isinstance(document.get("paths"), list):
        return [r for r in document["paths"] if isinstance(r, dict)]
    return [document] if "path" in document else []


def classify(document: Any) -> str | None:
    """The kind of a JSON document, or None when it is none the report reads."""
    if not isinstance(document, dict) or not document:
        return None
    schema = document.get("schema")
    if schema == PREDICTIONS_SCHEMA:
        return "predictions"
    if schema == SCORE_SCHEMA:
        return "score"
    if schema == CARRIER_SWEEP_SCHEMA:  # a sweep that timed something (not a --dry-run listing)
        ok = isinstance(document.get("order"), int) and isinstance(document.get("medians_s"), dict)
        return "carrier" if ok and document["medians_s"] else None
    if "order" in document and "grid" in document:
        reports = _graph_reports(document)
        if reports and all(isinstance(r.get("measure"), dict) for r in reports):
            return "graph"
        return None
    entries = list(document.values())
    if all(isinstance(e, dict) and {"path", "order", "kernels"} <= set(e) for e in entries):
        return "profile"
    return None


def _table_nvrtc(path: str, order: int) -> str | None:
    """The NVRTC the shipped schedule's table of a fused path names at ``order`` (None: none, or no
    such table)."""
    from composer.errors import ComposerError
    from composer.fused.config import fused_config

    try:
        return fused_config(path, order).nvrtc
    except ComposerError:  # not a fused path, or no table at that order: no compiler to compare
        return None


def compiler_variant(record: RunRecord) -> RunRecord:
    """``record`` with an ``nvrtc`` option where its kernels came from another NVRTC than the
    shipped table names (its ``kernel_origin``): such a run measured the table's source, but not
    the kernels the table was tuned with, so it is a variant of the cell rather than the cell
    (session 18: NVRTC 13.0 and 13.5 kernels of one source run up to 21 % apart). Runs without a
    recorded origin (before session 18) stay as they are."""
    versions = sorted(set(re.findall(r"nvrtc (\d+\.\d+)", record.kernel_origin or "")))
    if not versions:
        return record
    wanted = _table_nvrtc(record.path, record.order)
    if wanted is None or versions == [wanted]:
        return record
    return dataclasses.replace(record, options={**record.options, "nvrtc": "+".join(versions)})


def _load_bench(directory: Path) -> BenchSource:
    store = ResultStore(directory)  # the directory exists: it holds runs.jsonl
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResultsWarning)
        records = [compiler_variant(r) for r in store.records()]
        sessions = store.provenance_sessions()
    return BenchSource(directory, _display(directory), records, [Identity.of_provenance(s) for s in sessions],
                       damaged=[str(w.message) for w in caught])


def _identity_of_file(kind: str, document: Any, date: str) -> Identity:
    if kind == "graph":
        provenance = next((r.get("provenance") for r in _graph_reports(document) if r.get("provenance")), None)
        return Identity.of_provenance(provenance, date)
    return Identity(date_utc=date)


EXCLUDE_FILE = "report-exclude.txt"


def directory_excludes(root: str | os.PathLike[str]) -> tuple[str, ...]:
    """The globs of ``root``'s ``report-exclude.txt`` (none when it has none)."""
    file = Path(root) / EXCLUDE_FILE
    if not file.is_file():
        return ()
    globs = []
    for line in file.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            globs.append(text)
    return tuple(globs)


def effective_excludes(arguments: list[str | os.PathLike[str]], exclude: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``exclude`` and the globs the argument directories carry, each once, in that order."""
    out = list(exclude)
    for argument in arguments:
        if Path(argument).is_dir():
            out += [g for g in directory_excludes(argument) if g not in out]
    return tuple(out)


def discover(arguments: list[str | os.PathLike[str]], exclude: tuple[str, ...] = ()) -> Inputs:
    """Every recognised results file under ``arguments`` (directories or files); see the module docstring."""
    inputs = Inputs()
    seen: set[Path] = set()
    for argument in arguments:
        root = Path(argument)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such file or directory")
        if root.is_file():
            _add_file(inputs, root, seen)
            continue
        exclude_here = tuple(exclude) + tuple(g for g in directory_excludes(root) if g not in exclude)
        for current, dirs, files in os.walk(root):
            here = Path(current)
            rel_here = os.path.relpath(here, root)
            kept = []
            for name in sorted(dirs):
                rel = os.path.normpath(os.path.join(rel_here, name))
                if name.endswith(INVALID_SUFFIX):
                    inputs.skipped.append(f"{_display(here / name)} (named *{INVALID_SUFFIX}: kept as evidence, not data)")
                elif _excluded(rel, name, exclude_here):
                    inputs.skipped.append(f"{_display(here / name)} (--exclude or {EXCLUDE_FILE})")
                else:
                    kept.append(name)
            dirs[:] = kept
            is_bench = ResultStore.RUNS in files
            if is_bench and here.resolve() not in seen:
                seen.add(here.resolve())
                inputs.bench.append(_load_bench(here))
            for name in sorted(files):
                rel = os.path.normpath(os.path.join(rel_here, name))
                if (is_bench and name in _BENCH_FILES) or _excluded(rel, name, exclude_here):
                    continue
                if name.endswith(".json"):
                    _add_file(inputs, here / name, seen)
                else:
                    inputs.ignored += 1
    for source in inputs.bench:
        inputs.damaged += source.damaged
    inputs.bench.sort(key=lambda s: (s.date, s.display))
    inputs.files.sort(key=lambda f: (f.kind, f.date, f.display))
    for i, source in enumerate(inputs.bench, 1):
        source.label = f"b{i:02d}"
    prefix = {"profile": "n", "graph": "g", "predictions": "m", "score": "s", "carrier": "c"}
    counts: dict[str, int] = {}
    for f in inputs.files:
        counts[f.kind] = counts.get(f.kind, 0) + 1
        f.label = f"{prefix[f.kind]}{counts[f.kind]:02d}"
    return inputs


def _add_file(inputs: Inputs, file: Path, seen: set[Path]) -> None:
    resolved = file.resolve()
    if resolved in seen:
        return
    seen.add(resolved)
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        inputs.ignored += 1
        return
    kind = classify(document)
    if kind is None:
        inputs.ignored += 1
        return
    date = file_date(file, document)
    inputs.files.append(DataFile(kind, file, _display(file), document, date, _identity_of_file(kind, document, date)))


__all__ = ["EXCLUDE_FILE", "directory_excludes", "effective_excludes", "INVALID_SUFFIX", "PREDICTIONS_SCHEMA", "SCORE_SCHEMA", "BenchSource", "DataFile", "Identity", "Inputs",
           "classify", "discover", "file_date"]
