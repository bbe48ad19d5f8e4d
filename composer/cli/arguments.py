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
