"""The crossover map: which path is fastest at each order on a machine, and how that was decided;
``path="auto"`` (``composer.tendency``, ``composer bench --paths auto``) resolves through it.

The map is ``crossover.toml`` in the user schedules directory (:func:`composer.config.schedule_files.user_dir`),
written by ``composer campaign`` and checked on load (file and dotted key in every error)::

    schema = 1

    [machines.h200]                      # a machine-table name (schedules/machines.toml)
    gpu = "NVIDIA H200"                  # the device name the measurements ran on (absent: predictions only)
    updated_utc = "2026-12-01T10:00:00+00:00"

    [machines.h200.orders.7]
    path = "FUSED"
    decided = "measured"                 # or "predicted"
    metric = "device_per_call_s"         # measured: the timer that decided
    seconds = 0.000471                   # the fastest path's median (measured) or prediction
    runner_up = "FUSED_TC"
    margin_pct = 1.56                    # runner-up / fastest - 1, in %
    ranges_overlap = false               # measured: whether the rounds' min-max ranges overlap
    resolved = true                      # measured: the paper's §4.5 claim test
    criterion = "range"                  # measured: "range", "1%" or "1% (cross-run)"
    rounds = 6                           # measured: rounds of the fastest path
    se = 1.4                             # predicted: separation-to-error ratio (paper §9.1), when known
    screened = true                      # predicted: S/E >= 1
    source = "/path/of/the/results"      # the results directory or predictions file

Which choice ``auto`` takes on a device: a measured choice of a machine entry whose ``gpu`` is the
device's name; else a choice of the machine-table entry the device is (composer.arch.identify:
architecture, SM count, memory), measured before predicted. On a machine that was never measured
the prediction decides. The choice is printed on stderr (once per order and process).
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from composer.config.fields import Expected, Table, boolean, non_negative_int, one_of, read_toml, string
from composer.config.schedule_files import user_dir
from composer.errors import ComposerError, ConfigError

CROSSOVER_FILE = "crossover.toml"
SCHEMA = 1
AUTO = "auto"
MEASURED, PREDICTED = "measured", "predicted"


def is_auto(path: str) -> bool:
    return isinstance(path, str) and path.strip().lower() == AUTO


def crossover_file(directory: str | os.PathLike[str] | None = None) -> Path:
    """``crossover.toml`` in ``directory`` (default: the user schedules directory)."""
    return Path(directory if directory is not None else user_dir()) / CROSSOVER_FILE


def _finite(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise Expected("a finite number")


def _non_negative(value: Any) -> float:
    if _finite(value) >= 0:
        return float(value)
    raise Expected("a finite number >= 0")


@dataclass(frozen=True)
class Choice:
    """The fastest path of one order on one machine, and how that was decided."""

    machine: str
    order: int
    path: str
    decided: str  # MEASURED or PREDICTED
    source: str
    seconds: float | None = None
    runner_up: str | None = None
    margin_pct: float | None = None
    metric: str | None = None
    ranges_overlap: bool | None = None
    resolved: bool | None = None
    criterion: str | None = None
    rounds: int | None = None
    se: float | None = None
    screened: bool | None = None

    def describe(self, gpu: str | None = None) -> str:
        """One line: ``auto: p=7 -> FUSED (measured on NVIDIA H200: 1.6 % ahead of FUSED_TC, ...)``."""
        where = gpu or self.machine
        parts = []
        if self.runner_up is not None and self.margin_pct is not None:
            parts.append(f"{self.margin_pct:.1f} % ahead of {self.runner_up}")
        if self.decided == MEASURED:
            if self.ranges_overlap is not None:
                parts.append("min-max ranges " + ("overlap" if self.ranges_overlap else "do not overlap"))
            if self.resolved is not None:
                parts.append(("resolved" if self.resolved else "not resolved") + f" ({self.criterion})")
        elif self.se is not None:
            parts.append(f"S/E {self.se:.2f}" + (" screened in" if self.screened else " not screened in"))
        else:
            parts.append("S/E unknown (no family errors)")
        detail = f": {', '.join(parts)}" if parts else ""
        return f"auto: p={self.order} -> {self.path} ({self.decided} on {where}{detail}; {self.source})"


@dataclass(frozen=True)
class MachineEntry:
    name: str
    gpu: str | None = None
    updated_utc: str | None = None
    orders: dict[int, Choice] = field(default_factory=dict)


@dataclass(frozen=True)
class CrossoverMap:
    file: str
    machines: dict[str, MachineEntry] = field(default_factory=dict)

    def with_entry(self, entry: MachineEntry) -> CrossoverMap:
        """This map with ``entry``'s choices replacing those of the same machine and orders (other orders kept)."""
        old = self.machines.get(entry.name)
        orders = {**(old.orders if old else {}), **entry.orders}
        merged = MachineEntry(entry.name, entry.gpu or (old.gpu if old else None), entry.updated_utc, orders)
        return replace(self, machines={**self.machines, entry.name: merged})


# --- loading ------------------------------------------------------------------------------------


def _choice(table: Table, machine: str, order: int) -> Choice:
    from composer.paths.registry import path_class

    path = table.required("path", string)
    try:
        cls = path_class(path)
        cls.check_order(order)
    except ComposerError as exc:
        raise table.error("path", str(exc)) from None
    decided = table.required("decided", one_of((MEASURED, PREDICTED)))
    choice = Choice(
        machine=machine, order=order, path=cls.name, decided=decided, source=table.required("source", string),
        seconds=table.optional("seconds", _non_negative), runner_up=table.optional("runner_up", string),
        margin_pct=table.optional("margin_pct", _finite), metric=table.optional("metric", string),
        ranges_overlap=table.optional("ranges_overlap", boolean), resolved=table.optional("resolved", boolean),
        criterion=table.optional("criterion", string), rounds=table.optional("rounds", non_negative_int),
        se=table.optional("se", _non_negative), screened=table.optional("screened", boolean))
    table.reject_unknown()
    if decided == MEASURED and choice.metric is None:
        raise table.error("metric", "a measured choice names the timer that decided it")
    return choice


def _order_key(table: Table, key: str) -> int:
    if key.isdigit() and int(key) > 0:
        return int(key)
    raise table.error(key, "expected an order (a positive integer) as the key")


def load_crossover(path: str | os.PathLike[str] | None = None) -> CrossoverMap:
    """The crossover map in ``path`` (default: the user schedules directory's); ComposerError when
    it does not exist, ConfigError naming the file and key when it is malformed."""
    file = Path(path) if path is not None else crossover_file()
    if not file.is_file():
        raise ComposerError(f"path 'auto' needs a crossover map and {file} does not exist")
    top = Table(read_toml(file), str(file))
    schema = top.required("schema", non_negative_int)
    if schema != SCHEMA:
        raise top.error("schema", f"this composer reads schema {SCHEMA}, the file has {schema}")
    machines: dict[str, MachineEntry] = {}
    machines_table = top.optional_table("machines")
    top.reject_unknown()
    for name in sorted(machines_table.data if machines_table else {}):
        entry_table = machines_table.optional_table(name)  # type: ignore[union-attr]
        gpu = entry_table.optional("gpu", string)
        updated = entry_table.optional("updated_utc", string)
        orders_table = entry_table.optional_table("orders")
        entry_table.reject_unknown()
        orders: dict[int, Choice] = {}
        for key in sorted(orders_table.data if orders_table else {}, key=lambda k: (len(k), k)):
            order = _order_key(orders_table, key)  # type: ignore[arg-type]
            orders[order] = _choice(orders_table.optional_table(key), name, order)  # type: ignore[union-attr,arg-type]
        machines[name] = MachineEntry(name, gpu, updated, orders)
    return CrossoverMap(str(file), machines)


# --- writing ------------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a valid TOML basic string


_CHOICE_KEYS = ("path", "decided", "metric", "seconds", "runner_up", "margin_pct", "ranges_overlap", "resolved",
                "criterion", "rounds", "se", "screened", "source")


def crossover_text(crossover: CrossoverMap) -> str:
    lines = ["# The fastest path per order on each machine, and how it was decided: written by `composer campaign`",
             "# (composer/config/crossover.py documents the keys); `path=\"auto\"` and `composer bench --paths auto`",
             "# read it. Checked on load.", f"schema = {SCHEMA}"]
    for name, entry in sorted(crossover.machines.items()):
        lines += ["", f"[machines.{name}]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in (("gpu", entry.gpu), ("updated_utc", entry.updated_utc))
                  if v is not None]
        for order, choice in sorted(entry.orders.items()):
            lines += ["", f"[machines.{name}.orders.{order}]"]
            for k in _CHOICE_KEYS:
                v = getattr(choice, k)
                if v is not None and not (isinstance(v, float) and not math.isfinite(v)):
                    lines.append(f"{k} = {_toml_value(v)}")
    return "\n".join(lines) + "\n"


def write_crossover(crossover: CrossoverMap, path: str | os.PathLike[str] | None = None) -> Path:
    """Write the map atomically (default: where it was loaded from); the text is checked by loading it
    back before it replaces the file."""
    from composer.config.fields import parse_toml
    from composer.config.schedule_files import _check_writable
    from composer.fileio import atomic_write_text

    target = Path(path) if path is not None else Path(crossover.file)
    _check_writable(target.parent)
    text = crossover_text(crossover)
    parse_toml(text, str(target))
    atomic_write_text(target, text)
    load_crossover(target)
    return target


def read_or_empty(path: str | os.PathLike[str] | None = None) -> CrossoverMap:
    """The map at ``path`` (default: the user's), or an empty one to be written there."""
    file = Path(path) if path is not None else crossover_file()
    return load_crossover(file) if file.is_file() else CrossoverMap(str(file))


# --- resolution ---------------------------------------------------------------------------------

_announced: set[tuple[str, int, str]] = set()


def machine_of_device(device: Any) -> str | None:
    """The machine-table entry ``device`` is (None when none matches or the device says too little)."""
    from composer.arch.identify import identify_machine

    arch, sms, memory = getattr(device, "arch", None), getattr(device, "sm_count", None), getattr(device, "total_memory", None)
    if not (arch and sms and memory):
        return None
    found = identify_machine(arch, int(sms), int(memory))
    return found.name if found else None


def choose(crossover: CrossoverMap, order: int, device: Any) -> Choice:
    """The choice ``auto`` makes at ``order`` on ``device`` (module docstring); ComposerError when none."""
    gpu = getattr(device, "name", None)
    here = [e for e in crossover.machines.values() if gpu and e.gpu == gpu]
    machine = machine_of_device(device)
    entries = here + [crossover.machines[machine]] if machine in crossover.machines else here
    found = [e.orders[order] for e in entries if order in e.orders]
    measured = [c for c in found if c.decided == MEASURED]
    if measured or found:
        return (measured or found)[0]
    known = ", ".join(f"{n} ({e.gpu or 'predicted'}: p={','.join(map(str, sorted(e.orders)))})"
                      for n, e in sorted(crossover.machines.items())) or "none"
    raise ComposerError(f"path 'auto': {crossover.file} has no choice for p={order} on {gpu or 'this device'} "
                        f"(machine-table entry: {machine or 'none matches'}); it holds {known}")


AUTO_HINT = ("`composer campaign --out DIR` writes the map on a GPU machine; `composer campaign --write-crossover "
             "--predictions P.json --out DIR` writes a model prediction's choices without a GPU")


def resolve_auto(order: int, device: Any, crossover: CrossoverMap | None = None, announce: bool = True) -> Choice:
    """The path ``auto`` means at ``order`` on ``device``, printed on stderr the first time."""
    try:
        chosen = choose(crossover if crossover is not None else _load_for_auto(), order, device)
    except ConfigError:
        raise
    except ComposerError as exc:
        raise ComposerError(f"{exc}; {AUTO_HINT}") from None
    key = (chosen.machine, order, chosen.path)
    if announce and key not in _announced:
        _announced.add(key)
        print(chosen.describe(getattr(device, "name", None)), file=sys.stderr)
    return chosen


def expand_auto(paths: list[str], orders: list[int], device: Any, crossover: CrossoverMap | None = None
                ) -> tuple[list[str], set[tuple[str, int]] | None]:
    """A path list that may hold ``auto``: the paths to run and, when ``auto`` is among them, the
    (path, order) cells to run — the auto choice at each order plus every named path at every order
    (None without ``auto``: every cell). Named paths come first (the ratios divide by the first)."""
    if not any(is_auto(p) for p in paths):
        return list(paths), None
    from composer.paths.registry import path_class

    named = [path_class(p).name for p in paths if not is_auto(p)]
    crossover = crossover if crossover is not None else _load_for_auto()
    chosen = {order: resolve_auto(order, device, crossover).path for order in orders}
    ordered = list(dict.fromkeys(named + [chosen[o] for o in orders]))
    cells = {(p, o) for p in named for o in orders} | {(p, o) for o, p in chosen.items()}
    return ordered, cells


def packaged_crossover_file() -> Any:
    """The shipped crossover map (``schedules/crossover.toml``): the choices of the measurements in
    ``docs/data`` and of the shipped model predictions, regenerated by the command in
    docs/schedules.md (tests/test_crossover_shipped.py checks it)."""
    from composer.packaged import packaged_dir

    return Path(str(packaged_dir() / CROSSOVER_FILE))


def _load_for_auto() -> CrossoverMap:
    """The user's crossover map over the shipped one: a choice the user's map makes (a campaign on
    this machine) wins, except a predicted one over a shipped measurement; the shipped map answers
    the orders and machines the user's does not hold, and alone when the user has none."""
    shipped_file = packaged_crossover_file()
    shipped = load_crossover(shipped_file) if shipped_file.is_file() else None
    try:
        user = load_crossover()
    except ConfigError:
        raise
    except ComposerError as exc:
        if shipped is None:
            raise ComposerError(f"{exc}; {AUTO_HINT}") from None
        return shipped
    if shipped is None:
        return user
    merged = shipped
    for entry in user.machines.values():
        old = shipped.machines.get(entry.name)
        # a measurement beats a prediction, whichever map holds it (the rule of campaign.decide too)
        kept = {o: c for o, c in entry.orders.items()
                if not (c.decided == PREDICTED and old and o in old.orders and old.orders[o].decided == MEASURED)}
        merged = merged.with_entry(replace(entry, orders=kept))
    return replace(merged, file=f"{user.file} over {shipped.file}")


__all__ = ["AUTO", "CROSSOVER_FILE", "packaged_crossover_file", "MEASURED", "PREDICTED", "SCHEMA", "Choice", "CrossoverMap", "MachineEntry",
           "choose", "crossover_file", "crossover_text", "expand_auto", "is_auto", "load_crossover", "machine_of_device",
           "read_or_empty", "resolve_auto", "write_crossover"]
