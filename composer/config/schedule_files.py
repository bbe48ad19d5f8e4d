"""Where schedules are read from and where measured results are written.

Two directories hold ``pNNNN.toml`` files:

- the packaged schedules, the package ``composer.schedules`` (``schedules/`` of the source tree),
  read-only: after ``pip install .`` it lies in site-packages, where a write would be lost on the
  next install and could need privileges the user does not have;
- the user schedules directory, ``$COMPOSER_SCHEDULES`` or else
  ``${XDG_CONFIG_HOME:-~/.config}/composer/schedules``, read first.

A user file replaces the packaged file of the same order as a whole (no key-by-key merge): what a
run used is then always one file, which the schedule records (``Schedule.origin``, ``file``,
``sha256``). The sweep commands write their winners into a user directory (or one named with
``--schedules-dir``): :func:`writable_schedule_file` first copies the schedule in use there, so the
result is a complete schedule that differs from the one it came from only by what was measured.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.config.fields import read_text
from composer.errors import ConfigError
from composer.packaged import packaged_dir  # monkeypatched here by tests: called through this module

SCHEDULES_ENV = "COMPOSER_SCHEDULES"
_FILE_NAME = re.compile(r"^p(\d{4})\.toml$")
#: Directory names that mark an installed package: never written into.
_INSTALLED = ("site-packages", "dist-packages")

PACKAGED = "packaged"
USER = "user"


@dataclass(frozen=True)
class ScheduleFile:
    """One schedule file found for an order: ``entry`` (a Path, or an ``importlib.resources``
    Traversable for a packaged file), the name errors show, and where it came from."""

    order: int
    entry: Any
    display: str
    origin: str  # PACKAGED or USER


def user_dir() -> Path:
    """The user schedules directory: ``$COMPOSER_SCHEDULES``, else
    ``${XDG_CONFIG_HOME:-~/.config}/composer/schedules`` (it need not exist)."""
    value = os.environ.get(SCHEDULES_ENV)
    if value:
        return Path(value).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(config_home) / "composer" / "schedules"


def _readable_user_dir() -> Path | None:
    """The user directory when it exists. One that does not exist yet holds no schedules (the
    sweep commands create it when they first write); a file in its place is an error."""
    path = user_dir()
    if path.is_dir():
        return path
    if path.exists():
        raise ConfigError(f"{path}: the user schedules directory (${SCHEDULES_ENV} or "
                          f"$XDG_CONFIG_HOME/composer/schedules) is not a directory")
    return None


def schedule_file_name(order: int) -> str:
    return f"p{order:04d}.toml"


def _scan(directory: Any, origin: str, display_full: bool) -> dict[int, ScheduleFile]:
    found = {}
    for entry in directory.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            order = int(match.group(1))
            found[order] = ScheduleFile(order, entry, str(entry) if display_full else entry.name, origin)
    return found


def schedule_files(packaged: Any = None, user: Path | None = None) -> dict[int, ScheduleFile]:
    """Order -> the file the loader uses: the user directory's, else the packaged one.

    ``packaged`` and ``user`` replace the two directories (tests point them at a checkout's
    ``schedules/`` and a temporary directory); by default they are :func:`packaged_dir` and the
    user directory when it exists.
    """
    found = _scan(packaged if packaged is not None else packaged_dir(), PACKAGED, display_full=False)
    user = user if user is not None else _readable_user_dir()
    if user is not None:
        found.update(_scan(user, USER, display_full=True))
    return found


def text_in_use(found: ScheduleFile, packaged: Any = None) -> tuple[str, str]:
    """(name, text) of the schedule the loader runs for ``found``: a packaged file with the active
    machine's overlay (``composer.config.machine_schedules``) is the merged text, the overlay's path
    tables in place of the generic ones, so that a copy holds what the machine runs."""
    from composer.config.machine_schedules import (OVERLAY_DIR, active_machine, overlaid_text, overlay_entry,
                                                   read_overlay)

    text = read_text(found.entry, found.display)
    machine = active_machine() if found.origin == PACKAGED else None
    overlay = overlay_entry(packaged if packaged is not None else packaged_dir(), machine,
                            schedule_file_name(found.order)) if machine else None
    if overlay is None:
        return found.display, text
    name = f"{OVERLAY_DIR}/{machine}/{schedule_file_name(found.order)}"
    overlay_text, _source, paths = read_overlay(overlay, name, found.order)
    return f"{found.display}+{name}", overlaid_text(text, overlay_text, list(paths), f"# with the path tables of {name}\n")


def _check_writable(directory: Path) -> None:
    """Refuse an installed package's directory (site-packages): results written there are lost on
    the next install. A source checkout's ``schedules/`` may be named explicitly."""
    parts = directory.resolve().parts
    if any(part in _INSTALLED for part in parts):
        raise ConfigError(f"{directory}: refusing to write schedules into an installed package; "
                          f"name another directory (--schedules-dir DIR or ${SCHEDULES_ENV})")


def writable_schedule_file(order: int, directory: str | os.PathLike[str] | None = None,
                           packaged: Any = None) -> Path:
    """The schedule file of ``order`` in ``directory`` (default: the user directory), ready to be
    edited in place: when it does not exist yet it is created as a copy of the schedule in use
    (user or packaged), with a comment saying what it is. Never a file of the installed package."""
    from composer.fileio import atomic_write_bytes

    target_dir = Path(directory) if directory is not None else user_dir()
    _check_writable(target_dir)
    target = target_dir / schedule_file_name(order)
    if target.is_file():
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    current = schedule_files(packaged).get(order)
    if current is None:
        raise ConfigError(f"{schedule_file_name(order)}: no schedule for order {order} to copy into "
                          f"{target_dir}")
    display, text = text_in_use(current, packaged)
    note = (f"# Copy of the {current.origin} schedule {display}, made by composer to hold "
            f"measured results.\n# As a user schedule it replaces the packaged one of order {order} "
            f"as a whole (docs/schedules.md).\n")
    atomic_write_bytes(target, (note + text).encode("utf-8"))
    return target


def copy_schedules(out: Path) -> list[Path]:
    """Write every schedule file the loader uses now (:func:`schedule_files`: the user directory's
    where it has one, else the packaged one) into ``out``, as a starting point for a schedules
    directory with a few tables changed (tools/shape_twins.py, tools/candidate_schedules.py), which
    ``$COMPOSER_SCHEDULES`` then points at. Returns the written files."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for order, found in sorted(schedule_files().items()):
        target = out / schedule_file_name(order)
        target.write_text(text_in_use(found)[1], encoding="utf-8")
        written.append(target)
    return written
