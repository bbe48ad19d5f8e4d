"""The ``composer`` console entry point.

Each subcommand lives in ``composer/cli/<name>.py`` and exposes ``register(subparsers)``, which adds
its parser and sets ``func(args) -> int``; adding a command means adding its name to COMMANDS.
Expected failures (ComposerError, including ConfigError, and ValueError) become one
``error: ...`` line on stderr and exit status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from composer.errors import ComposerError

COMMANDS: tuple[str, ...] = ("info", "validate", "bench", "build", "inspect", "sweep_library", "sweep_fused", "profile")
EXIT_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="composer",
        description="Kernel composer and crossover lab for an FP64 tensor-product DG operator.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"composer.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return its exit status (argparse's for ``--help`` and usage errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): return instead of exiting
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        return int(args.func(args) or 0)
    except (ComposerError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
