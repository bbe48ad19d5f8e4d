"""Running a step: the existing commands, in this process, with their output in the step's log.

Why through the commands' own parsers and entry points (``composer.cli.main.build_parser`` and
each subcommand's ``func``) rather than subprocesses or re-implemented calls: a step is then
exactly the command line the plan prints (every default and check of the command applies; a
reader can rerun a step by hand), and in-process it shares the interpreter and NVRTC cache. Their
stdout and stderr (the bench's progress lines, tables, notes) go to ``DIR/logs/<step>.log``;
the campaign's own progress stays on the terminal. ``composer profile`` still runs each call
under ncu in a child process, as it must.

The field check before a timing that bench does not cover (graph and profile steps) is
``composer.bench.runner.validate_path`` on the order's validation grid.
"""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path
from typing import Protocol

from composer.campaign.plan import Step
from composer.errors import CheckFailed, ComposerError


class Executor(Protocol):
    """What the campaign asks of the device side (tests give a fake one)."""

    def run(self, step: Step, root: Path, log: Path) -> None: ...

    def validate(self, path: str, order: int) -> tuple[float, float]:
        """(max|diff|/max|ref|, tolerance) of ``path`` at ``order`` on the point-varying input."""
        ...


def log_name(step: Step) -> str:
    return step.id.replace("/", "_") + ".log"


class CliExecutor:
    """The real executor: the composer commands on this machine's GPU."""

    def __init__(self) -> None:
        self._device = None

    def run(self, step: Step, root: Path, log: Path) -> None:
        from composer.cli.main import build_parser

        argv = step.argv(root)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write("$ composer " + " ".join(argv) + "\n")
            fh.flush()
            try:
                args = build_parser().parse_args(argv)
            except SystemExit as exc:  # a usage error: the plan built a bad command line (a bug)
                raise ComposerError(f"step {step.id}: composer rejected its own command line (exit {exc.code})") from None
            with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
                status = int(args.func(args) or 0)
        gc.collect()
        if status:
            raise CheckFailed(f"step {step.id}: `composer {' '.join(argv)}` exited with status {status}")

    def validate(self, path: str, order: int) -> tuple[float, float]:
        from composer import dg
        from composer.bench.runner import validate_path
        from composer.config.schedules import load_schedule
        from composer.runtime import Device

        if self._device is None:
            self._device = Device()
        schedule = load_schedule(order)
        grid = schedule.validation.grid
        fields = dg.make_fields(order, grid, varying=True)
        reference = (fields, dg.reference_tendency(fields, order, grid))
        error = validate_path(path, order, grid, self._device, reference, {})
        return error, schedule.validation.tolerance


__all__ = ["CliExecutor", "Executor", "log_name"]
