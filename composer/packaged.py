"""Where the shipped data files are: the ``schedules/`` directory, installed as the package
``composer.schedules``.

A module of its own, below every loader, so that the hardware tables (``composer.arch``) and the
schedule loader (``composer.config``) find the same directory without importing each other.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any


def packaged_dir() -> Any:
    """The shipped schedules: package ``composer.schedules``, or ``<checkout>/schedules`` when the
    package is used from a source tree that was not installed (plain ``PYTHONPATH``)."""
    try:
        return importlib.resources.files("composer.schedules")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[1] / "schedules"
