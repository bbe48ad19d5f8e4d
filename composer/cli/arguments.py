"""Argument parsers shared by the subcommands."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def csv_list(kind: type) -> Callable[[str], list]:
    """argparse type for comma- (or space-) separated values, e.g. ``--orders 7,15,31``."""
    def parse(text: str) -> list:
        try:
            return [kind(t) for t in text.replace(",", " ").split()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {kind.__name__} values, got {text!r}") from None
    return parse


def _bounded_int(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type for counts (steps, rounds, orders, workers): an integer >= 1."""
    return _bounded_int(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type for limits that may be zero (bytes, counts): an integer >= 0."""
    return _bounded_int(text, 0, "an integer >= 0")


def _finite_float(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type for time steps, budgets and timeouts: a finite float > 0 (no NaN, no inf)."""
    value = _finite_float(text, "a finite number > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type for margins that may be zero: a finite float >= 0."""
    value = _finite_float(text, "a finite number >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def fraction(text: str) -> float:
    """argparse type for a share of something: a float in [0, 1)."""
    value = _finite_float(text, "a fraction in [0, 1)")
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}")
    return value


def parse_grid(text: str) -> tuple[int, int, int]:
    """argparse type for an element grid: ``N`` (cubic) or ``NX,NY,NZ``, positive integers."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or NX,NY,NZ, got {text!r}") from None
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected N or NX,NY,NZ of positive integers, got {text!r}"
        )
    return (values[0], values[1], values[2])


def path_option(text: str) -> tuple[str, str, str]:
    """``PATH.KEY=VALUE`` (e.g. ``GEMM_CUTE.mma=8x8x4``) as (PATH, KEY, VALUE)."""
    target, sep, value = text.partition("=")
    path, dot, key = target.partition(".")
    if not sep or not dot or not path or not key or not value:
        raise argparse.ArgumentTypeError(f"expected PATH.KEY=VALUE (e.g. GEMM_CUTE.mma=8x8x4), got {text!r}")
    return path, key, value


def options_by_path(items: list[tuple[str, str, str]] | None) -> dict[str, dict[str, str]]:
    """Group ``--option`` values into the per-path option dicts the paths take."""
    grouped: dict[str, dict[str, str]] = {}
    for path, key, value in items or []:
        grouped.setdefault(path, {})[key] = value
    return grouped
