"""Argument parsers shared by the subcommands."""

from __future__ import annotations

import argparse
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
