"""Measured kernel times per launch-plan node: the plan's weights where the roofline hints mis-rank
the chains.

Why: the list schedule puts the heaviest chain on the main stream and everything else on side
streams. The cost hints are roofline times, and for the library paths at low order they point at
the wrong chain: at p = 7 on the H200 the hints make the face flux and lift critical, while
``composer graph --measure`` timed the volume flux -> y GEMM -> lift chain at 1352 µs against
729 µs (cuBLAS's batched y GEMM runs at a few per cent of its roof). The plan from the hints was
2.0 % slower than the hand-written launches; the plan from the measured times 0.4 % faster
(docs/results.md, section 8).

The shipped file is ``schedules/node_times.toml``: per machine (machines.toml name), path and
order, the device time in µs of every node of the path's program, as ``composer graph --measure``
reports them (``node_ms``), with the path's settings when it has any (``Path.plan_settings``: its
MMA shape and library assignment, GEMM_FUSED's carrier, fold and flux source):

    [h200.GEMM]
    p7 = { volume_flux = 230.6, gemm_x = 212.2, ... }
    [h200.GEMM_CUTE]
    p63 = { settings = "mma=16x8x4 library=x:cute,y:cute,z:cute", nodes = { volume_flux = 230.0, ... } }

A user file of the same name in the user schedules directory (``$COMPOSER_SCHEDULES``) adds or
replaces entries; ``composer graph --measure --record-times`` writes there. An entry applies only
when its settings are the path's and it names exactly the nodes of the path's program at that
order (GEMM_FUSED's x, y and z carriers have the same node names: the settings tell them apart);
otherwise the plan keeps its hints. It only shapes the plan: results are the same bit for bit under
every plan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from composer.config.fields import read_toml
from composer.errors import ComposerError
from composer.fileio import atomic_write_text
from composer.packaged import packaged_dir

NODE_TIMES_FILE = "node_times.toml"

#: (machine, path, order, settings) -> {node: µs}; settings "" for a path without any. An order may
#: hold entries of several settings (a TOML array of them).
NodeTimes = dict[tuple[str, str, int, str], dict[str, float]]


class NodeTimesError(ComposerError, ValueError):
    """A node-times file that does not parse or holds a value that is not a time."""


def parse_node_times(data: Mapping[str, Any], origin: str) -> NodeTimes:
    """``[machine.PATH] pN = ...`` tables into (machine, path, order, settings) entries."""
    from composer.arch.machines import load_machines
    from composer.paths.registry import path_names

    machines, paths = set(load_machines()), set(path_names())
    times: NodeTimes = {}
    for machine, by_path in data.items():
        if machine not in machines:
            raise NodeTimesError(f"{origin}: unknown machine {machine!r} (machines.toml has: {', '.join(sorted(machines))})")
        if not isinstance(by_path, Mapping):
            raise NodeTimesError(f"{origin}: [{machine}] must be a table of paths")
        for path, by_order in by_path.items():
            if path not in paths:
                raise NodeTimesError(f"{origin}: [{machine}.{path}]: unknown path (known: {', '.join(sorted(paths))})")
            if not isinstance(by_order, Mapping):
                raise NodeTimesError(f"{origin}: [{machine}.{path}] must be a table of orders")
            for key, value in by_order.items():
                where = f"{origin}: {machine}.{path}.{key}"
                if not (key.startswith("p") and key[1:].isdigit()):
                    raise NodeTimesError(f"{where}: keys are orders written pN (e.g. p7)")
                for settings, entry in _entries(value, where):
                    times[(machine, path, int(key[1:]), settings)] = entry
    return times


def _entries(value: Any, where: str) -> list[tuple[str, dict[str, float]]]:
    """(settings, node times) of one order's value: a table of node times, a table with ``settings``
    and ``nodes``, or an array of the latter (one per setting)."""
    values = value if isinstance(value, list) else [value]
    out = []
    for i, item in enumerate(values):
        here = f"{where}[{i}]" if isinstance(value, list) else where
        settings = ""
        nodes = item
        if isinstance(item, Mapping) and "nodes" in item:
            extra = sorted(set(item) - {"nodes", "settings"})
            if extra:
                raise NodeTimesError(f"{here}: unknown keys {extra} (an entry with settings has 'settings' and 'nodes')")
            settings = item.get("settings", "")
            if not isinstance(settings, str):
                raise NodeTimesError(f"{here}.settings: expected a string, got {settings!r}")
            nodes = item["nodes"]
        if not isinstance(nodes, Mapping) or not nodes:
            raise NodeTimesError(f"{here}: expected a table of node = microseconds")
        entry = {}
        for node, us in nodes.items():
            if isinstance(us, bool) or not isinstance(us, (int, float)) or not us >= 0.0:
                raise NodeTimesError(f"{here}.{node}: expected a non-negative time in µs, got {us!r}")
            entry[str(node)] = float(us)
        out.append((settings, entry))
    if len({s for s, _ in out}) != len(out):
        raise NodeTimesError(f"{where}: two entries with the same settings")
    return out


def _user_file() -> Path | None:
    from composer.config.schedule_files import user_dir

    path = user_dir() / NODE_TIMES_FILE
    return path if path.is_file() else None


@lru_cache(maxsize=8)
def _load(user: str | None) -> NodeTimes:
    times = parse_node_times(read_toml(packaged_dir() / NODE_TIMES_FILE, NODE_TIMES_FILE), NODE_TIMES_FILE)
    if user is not None:
        times.update(parse_node_times(read_toml(Path(user)), user))
    return times


def load_node_times() -> NodeTimes:
    """The shipped node times, updated by the user schedules directory's file."""
    user = _user_file()
    return _load(str(user) if user else None)


def measured_weights(machine: str, path: str, order: int, nodes: Iterable[str],
                     settings: str = "") -> dict[str, float] | None:
    """The recorded times (seconds) of ``path`` at ``order`` on ``machine`` when they were recorded
    with ``settings`` and name exactly ``nodes``; else None (the plan keeps its hints)."""
    entry = load_node_times().get((machine, path, order, settings))
    if entry is None or set(entry) != set(nodes):
        return None
    return {name: us * 1e-6 for name, us in entry.items()}


def _toml_key(name: str) -> str:
    """``name`` as a TOML key: bare where TOML allows it, else quoted (a chunked fused table's nodes are
    named ``kernel#chunk``, and ``#`` would start a comment)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def render_node_times(times: NodeTimes, header: str) -> str:
    """The TOML text of ``times``, ``header`` as its leading comment lines."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    by_order: dict[tuple[str, str, int], list[tuple[str, dict[str, float]]]] = {}
    for (machine, path, order, settings), nodes in times.items():
        by_order.setdefault((machine, path, order), []).append((settings, nodes))
    table = None
    for (machine, path, order), entries in sorted(by_order.items()):
        if table != (machine, path):
            table = (machine, path)
            lines += ["", f"[{machine}.{path}]"]
        cells = [(settings, ", ".join(f"{_toml_key(name)} = {us:.1f}" for name, us in nodes.items()))
                 for settings, nodes in sorted(entries)]
        if len(cells) == 1 and not cells[0][0]:
            lines.append(f"p{order} = {{ {cells[0][1]} }}")
            continue
        items = [f'{{ settings = "{settings}", nodes = {{ {c} }} }}' for settings, c in cells]
        lines.append(f"p{order} = {items[0]}" if len(items) == 1 else f"p{order} = [ {', '.join(items)} ]")
    return "\n".join(lines) + "\n"


def times_from_measure(report: Mapping[str, Any], machine: str,
                       settings_of: Any = None) -> NodeTimes:
    """The node times of a ``composer graph --measure --json`` report (one or several paths), with
    the settings the report records for each path; ``settings_of(path, order)`` stands in for a
    report that predates them (None: leave such a path out)."""
    times: NodeTimes = {}
    for entry in report.get("paths", [report]):
        measure = entry.get("measure") or {}
        node_ms = measure.get("node_ms")
        if not node_ms:
            continue
        order = int(measure.get("order", report.get("order")))
        path = str(entry.get("path", measure.get("path")))
        settings = entry.get("settings")
        if settings is None:
            settings = settings_of(path, order) if settings_of is not None else None
            if settings is None:
                continue
        times[(machine, path, order, str(settings))] = {name: float(ms) * 1e3 for name, ms in node_ms.items()}
    return times


def record_times(report: Mapping[str, Any], machine: str, directory: Path | None = None) -> Path:
    """Merge a measure report's node times into the user directory's node-times file (atomically)."""
    from composer.config.schedule_files import user_dir

    target = (directory or user_dir()) / NODE_TIMES_FILE
    existing = parse_node_times(read_toml(target), str(target)) if target.is_file() else {}
    existing.update(times_from_measure(report, machine))
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, render_node_times(existing, "Measured kernel times per launch-plan node (µs), written by "
                                                          "composer graph --measure --record-times."))
    _load.cache_clear()
    return target


def clear_cache() -> None:
    """Forget loaded files (tests that change ``$COMPOSER_SCHEDULES``)."""
    _load.cache_clear()


__all__ = ["NODE_TIMES_FILE", "NodeTimesError", "load_node_times", "measured_weights", "parse_node_times",
           "record_times", "render_node_times", "times_from_measure", "clear_cache"]
