"""Consoles and tables of the subcommands, made so that no cell is ever cut.

Rich sizes a console to the terminal, and to 80 columns when the output is a pipe or a file;
a table wider than that shortens its cells to ``dgemm_p01…`` or ``10…``. Here, output that does
not go to a terminal is rendered PIPE_WIDTH columns wide (tables keep their natural width, no
colour codes), and every column folds instead of truncating, so a narrow terminal wraps a long
kernel name or number onto the next line rather than hiding part of it.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence

from rich.console import Console
from rich.table import Table

#: Console width when stdout (or stderr) is not a terminal: wide enough for any table we print.
PIPE_WIDTH = 4096


class PipeConsole(Console):
    """A rich console that lets a closed pipe reach ``composer.cli.main`` as BrokenPipeError (which
    ends the command with status 0); rich's own handler exits with status 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("the reader of the output went away")


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that renders whole cells whether or not it is a terminal.

    The stream is looked up when printing (rich's default), so a redirected ``sys.stdout`` (pytest's
    capture, ``contextlib.redirect_stdout``) receives the output.
    """
    stream = sys.stderr if stderr else sys.stdout
    is_terminal = bool(getattr(stream, "isatty", lambda: False)())
    return PipeConsole(stderr=stderr, width=None if is_terminal else PIPE_WIDTH)


def table(columns: Sequence[str], *, title: str | None = None, caption: str | None = None,
          right: Collection[str] = ()) -> Table:
    """A table with ``columns`` (those named in ``right`` right-justified) whose cells fold."""
    result = Table(title=title, caption=caption)
    for name in columns:
        result.add_column(name, justify="right" if name in right else "left", overflow="fold")
    return result
