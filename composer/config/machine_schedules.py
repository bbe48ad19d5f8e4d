"""Per-machine schedule overlays: the path tables that measured faster on one GPU than the shipped ones.

Why: the fastest table of an order is a property of the machine, not only of the order. The shipped
``pNNNN.toml`` files hold the H200's measured tables; on an H100 SXM5 the xyz kernel over a thread-block
cluster of two runs p = 15 in x0.90 of the H200's table (session 28), and nothing says the H200 agrees.
A machine overlay ``schedules/machines/<machine>/pNNNN.toml`` records such a table for its machine only:

    order = 15
    source = "what was measured, where, with which command"
    [paths.FUSED_TC16]
    ...

It holds ``order``, ``source`` and ``[paths.*]`` tables and nothing else (the benchmark and validation
setups are the order's, whatever the machine). Each of its path tables replaces the generic file's table
of the same path as a whole (no key-by-key merge, as for a user file); the merged tables are checked
together, so a cross-reference between paths (FUSED_DFMA's default from FUSED_TC) sees the overlay.

Which machine's overlays apply (:func:`active_machine`), first match wins:

1. :func:`using_machine` (a context manager: ``composer build --machine``, tests);
2. ``$COMPOSER_SCHEDULE_MACHINE``: a machine-table name, or ``generic`` for none;
3. the GPU this process opened (:func:`note_device`, called by ``composer.runtime.Device``), identified
   in the machine table by architecture, SM count and memory (``composer.arch.identify``).

A user schedules directory's file replaces the packaged schedule as a whole, overlays included: a
user's file is the user's whole choice for the order.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from composer.config.fields import Table, parse_toml, read_text, string, positive_int
from composer.errors import ConfigError

#: Names the machine whose overlays apply, or ``generic`` for none (overrides the opened GPU).
MACHINE_ENV = "COMPOSER_SCHEDULE_MACHINE"
#: The value of ``$COMPOSER_SCHEDULE_MACHINE`` that applies no overlay.
GENERIC = "generic"
#: The overlays' directory under the packaged schedules: ``machines/<machine>/pNNNN.toml``.
OVERLAY_DIR = "machines"

_UNSET = object()
_forced: contextvars.ContextVar[Any] = contextvars.ContextVar("composer_schedule_machine", default=_UNSET)
_device_machine: str | None = None


def _checked_name(name: str, where: str) -> str | None:
    """``name`` if the machine table has it (``generic`` -> None); ConfigError naming ``where`` else."""
    name = name.lower()  # the machine table's names are lower case; `info --machine` takes any case
    if name == GENERIC:
        return None
    from composer.arch.machines import load_machines

    known = load_machines()
    if name not in known:
        raise ConfigError(f"{where}: unknown machine '{name}' (known: {', '.join(sorted(known))}, or {GENERIC})")
    return name


@contextlib.contextmanager
def using_machine(name: str | None, where: str = "schedule machine") -> Iterator[None]:
    """Within the block, load the schedules of machine ``name`` (None: the generic schedules); ``where``
    names the option an unknown name came from in the error."""
    token = _forced.set(None if name is None else _checked_name(name, where))
    try:
        yield
    finally:
        _forced.reset(token)


def note_device(device: Any) -> str | None:
    """Remember which machine-table entry the opened GPU ``device`` is (by its ``arch``, ``sm_count``
    and ``total_memory``); returns it (None when none matches: the generic schedules apply)."""
    global _device_machine
    from composer.config.crossover import machine_of_device

    try:
        _device_machine = machine_of_device(device)
    except ConfigError:  # a broken user machine table must not stop a GPU from opening
        _device_machine = None
    return _device_machine


def forget_device() -> None:
    """Drop the machine :func:`note_device` recorded (tests; a process that closes its GPU)."""
    global _device_machine
    _device_machine = None


def active_machine() -> str | None:
    """The machine whose overlays :func:`composer.config.schedules.load_schedule` applies (module
    docstring), or None for the generic schedules."""
    forced = _forced.get()
    if forced is not _UNSET:
        return forced
    value = os.environ.get(MACHINE_ENV)
    if value:
        return _checked_name(value, f"${MACHINE_ENV}")
    return _device_machine


def overlay_entry(packaged: Any, machine: str, file_name: str) -> Any | None:
    """The overlay ``machines/<machine>/<file_name>`` of the packaged directory, None when absent."""
    entry = packaged.joinpath(OVERLAY_DIR).joinpath(machine).joinpath(file_name)
    return entry if entry.is_file() else None


def overlay_machines(packaged: Any) -> list[str]:
    """The machines that have an overlay directory in the packaged schedules."""
    root = packaged.joinpath(OVERLAY_DIR)
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith(("_", ".")))


def writable_overlay_file(order: int, machine: str, directory: Path, source: str) -> Path:
    """The overlay ``directory/machines/<machine>/pNNNN.toml``, created (``order`` and ``source``, no
    table yet) when absent, for the sweep commands to add their winners to. ``directory`` is the
    schedules directory that ships with the package (a checkout's ``schedules/``): the loader reads
    overlays only there, a user schedules directory being one machine's already."""
    from composer.config.schedule_files import _check_writable, schedule_file_name
    from composer.fileio import atomic_write_text

    _checked_name(machine, "overlay machine")
    target_dir = Path(directory) / OVERLAY_DIR / machine
    _check_writable(target_dir)
    target = target_dir / schedule_file_name(order)
    if not target.is_file():
        target_dir.mkdir(parents=True, exist_ok=True)
        quoted = source.replace("\\", "\\\\").replace('"', '\\"')
        atomic_write_text(target, f"# Machine overlay (composer.config.machine_schedules, docs/schedules.md): on "
                                  f"{machine} these path\n# tables replace the order's shipped ones.\n"
                                  f"order = {order}\nsource = \"{quoted}\"\n")
    return target


def overlaid_text(base_text: str, overlay_text: str, overlaid: list[str], note: str) -> str:
    """One schedule file's text: ``base_text`` without the ``[paths.NAME]`` tables (and their sub-tables)
    of ``overlaid``, then the overlay's ``[paths.*]`` tables; ``note`` (a comment) first. What a copy
    of an overlaid schedule must hold: the tables the machine runs, not the generic ones."""
    names = "|".join(re.escape(n) for n in overlaid)
    owned = re.compile(rf"^\[paths\.(?:{names})(?:\.[^\]]*)?\]\s*$")
    kept, skipping = [], False
    for line in base_text.splitlines():
        if line.startswith("["):
            skipping = bool(owned.match(line))
        if not skipping:
            kept.append(line)
    start = re.search(r"^\[paths\.", overlay_text, re.M)
    tables = overlay_text[start.start():] if start else ""
    return note + "\n".join(kept).rstrip("\n") + "\n\n" + tables.rstrip("\n") + "\n"


def parse_overlay(text: str, file: str, order: int) -> tuple[str, dict[str, Any]]:
    """An overlay's ``source`` and its raw ``[paths]`` data (checked by the caller against the merged
    tables); ConfigError for another order, a key other than order/source/paths, or no path table."""
    top = Table(parse_toml(text, file), file)
    declared = top.required("order", positive_int)
    if declared != order:
        raise top.error("order", f"file declares order {declared} but its name says {order}")
    source = top.required("source", string)
    paths = top.optional_table("paths")
    for key in top.data:
        if key not in ("order", "source", "paths"):
            raise top.error(key, "a machine overlay holds only order, source and [paths.*] tables "
                                 "(the benchmark and validation setups are the order's)")
    if paths is None or not paths.data:
        raise top.error("paths", "a machine overlay must replace at least one path table")
    return source, dict(paths.data)


def read_overlay(entry: Any, file: str, order: int) -> tuple[str, str, dict[str, Any]]:
    """(text, source, raw path tables) of the overlay ``entry``."""
    text = read_text(entry, file)
    source, paths = parse_overlay(text, file, order)
    return text, source, paths


__all__ = ["GENERIC", "MACHINE_ENV", "OVERLAY_DIR", "active_machine", "forget_device", "note_device",
           "overlaid_text", "overlay_entry", "overlay_machines", "parse_overlay", "read_overlay", "using_machine", "writable_overlay_file"]
