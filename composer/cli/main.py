"""The ``composer`` console entry point (also ``python -m composer``).

Each subcommand lives in ``composer/cli/<name>.py`` and exposes ``register(subparsers)``, which adds
its parser and sets ``func(args) -> int``; adding a command means adding its name to COMMANDS.

The error contract, the same for every subcommand:

* exit 0: done (also when the reader of stdout goes away early, e.g. ``composer info | head -1``:
  the rest of the output is dropped quietly, so ``set -o pipefail`` scripts do not fail);
* exit 1: a check ran and failed (``validate`` verdict, ``inspect`` expectations): the report is
  printed as usual, then one ``failed: ...`` line on stderr names the failed criteria;
* exit 2: the command cannot do what was asked — a usage error, a bad number (``--nstep 0``,
  ``--dt nan``), an unknown arch, path, order, MMA shape or machine, a missing or corrupt build
  directory, a malformed schedule or machine TOML, no GPU, driver, ncu, CuTe DSL or other package:
  one ``error: ...`` line on stderr, naming the problem and, where there is one, what to do;
* exit 3: an unexpected exception, i.e. a bug: one ``internal error: ...`` line asking for a rerun
  with ``COMPOSER_DEBUG=1`` (a distinct status, so a script can tell a crash from a failed check);
* exit 130: interrupted (Ctrl-C).

Expected failures are ComposerError (composer/errors.py; its ``exit_status`` and ``hint`` say how
they are reported), ValueError (the numerics' argument checks), OSError (files, permissions, a full
disk), ImportError (a missing optional package) and MemoryError (host memory). A message of several
lines (an NVRTC log, say) is cut to its first line. ``COMPOSER_DEBUG=1`` prints the full traceback
instead of the one line, with the same exit status.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from composer.errors import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, CheckFailed, ComposerError

COMMANDS: tuple[str, ...] = ("info", "validate", "bench", "build", "inspect", "graph", "sweep_library", "sweep_carrier",
                             "sweep_fused",
                             "profile", "model", "report", "campaign")
DEBUG_ENV = "COMPOSER_DEBUG"
EXIT_INTERRUPTED = 130


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one ``error: ...`` line (argparse prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="composer",
        description="Kernel composer and crossover lab for an FP64 tensor-product DG operator.",
        epilog="Exit status: 0 done, 1 a check failed, 2 bad input or a missing GPU/tool, 3 internal "
               f"error. {DEBUG_ENV}=1 shows tracebacks.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"composer.cli.{name}").register(subparsers)
    return parser


def debugging() -> bool:
    """Whether ``COMPOSER_DEBUG`` asks for tracebacks (any value but empty and 0)."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    more = f" [{len(lines) - 1} more lines: rerun with {DEBUG_ENV}=1]" if len(lines) > 1 else ""
    return lines[0].strip() + more


def report(exc: BaseException) -> int:
    """Print the one-line report of ``exc`` on stderr; return its exit status."""
    if isinstance(exc, CheckFailed):
        prefix, status = "failed", exc.exit_status
    elif isinstance(exc, ComposerError):
        prefix, status = "error", exc.exit_status
    elif isinstance(exc, (ValueError, OSError, ImportError, MemoryError)):
        prefix, status = "error", EXIT_USAGE
    else:
        prefix, status = "internal error", EXIT_INTERNAL
    message = one_line(exc)
    if isinstance(exc, ImportError):
        message = f"a required package is missing: {message}"
    elif isinstance(exc, MemoryError) and not isinstance(exc, ComposerError):
        message = f"out of host memory ({message}); try a smaller order or grid"
    elif status == EXIT_INTERNAL:
        message = f"{type(exc).__name__}: {message} (a bug in composer; rerun with {DEBUG_ENV}=1 for the traceback)"
    hint = getattr(exc, "hint", "")
    if debugging():
        traceback.print_exception(exc)
    else:
        print(f"{prefix}: {message}{f'; {hint}' if hint else ''}", file=sys.stderr)
    return status


def _drop_stdout() -> None:
    """Point stdout at /dev/null after its reader went away, so the flush at exit cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file descriptor behind stdout (captured in a test)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return its exit status (argparse's for ``--help`` and usage errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): return instead of exiting
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        status = int(args.func(args) or EXIT_OK)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
        return status
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the one place every failure becomes a line and a status
        return report(exc)


if __name__ == "__main__":
    sys.exit(main())
