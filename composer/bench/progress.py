"""Progress display for a sweep: a rich bar on a terminal, plain lines in a log.

Why plain lines off a TTY: sweeps run in batch jobs whose output goes to a file, where
a redrawn bar becomes unreadable control characters; one line per job shows where a hung
or killed sweep stopped. The ETA is computed from the jobs finished in *this* session,
so a resumed sweep does not count the already-completed jobs as instantaneous.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class _JobLike(Protocol):
    path: str  # the path, or a candidate's label
    order: int


def _hms(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def describe(job: _JobLike) -> str:
    """``PATH p=ORDER``, and ``round N`` for the jobs that have rounds (benchmark sweeps)."""
    rounds = getattr(job, "round_index", None)
    return f"{job.path} p={job.order}" + (f" round {rounds}" if rounds is not None else "")


class SweepProgress:
    """Context manager: ``start(job)`` before a run, ``finish(job, ok)`` after it.

    ``done`` is the number of jobs already completed (resume); ``plain`` forces (True)
    or forbids (False) plain-line mode, default: plain unless ``stream`` is a terminal.
    """

    def __init__(self, total: int, *, done: int = 0, stream: IO[str] | None = None,
                 plain: bool | None = None, clock: Any = time.monotonic) -> None:
        self.total = int(total)
        self.done = int(done)
        self._done0 = self.done
        self.stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._t0 = clock()
        self._console = Console(file=self.stream)
        self.plain = (not self._console.is_terminal) if plain is None else plain
        self._progress: Progress | None = None
        self._task: Any = None

    # timing ----------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return self._clock() - self._t0

    @property
    def eta(self) -> float | None:
        """Seconds left at the mean job time of this session; None before the first."""
        finished = self.done - self._done0
        if finished <= 0:
            return None
        return self.elapsed / finished * max(self.total - self.done, 0)

    # lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> SweepProgress:
        if not self.plain:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
                console=self._console, transient=False)
            self._progress.start()
            self._task = self._progress.add_task("sweep", total=self.total,
                                                 completed=self.done, eta="?")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        else:
            self._line(f"sweep: {self.done}/{self.total} done in {_hms(self.elapsed)}")

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def grow(self, jobs: int) -> None:
        """Add jobs found while sweeping (e.g. a follow-up trial of a winner)."""
        self.total += jobs
        if self._progress is not None:
            self._progress.update(self._task, total=self.total)

    def start(self, job: _JobLike) -> None:
        """Announce the job about to run."""
        if self._progress is not None:
            self._progress.update(self._task, description=describe(job), eta=_hms(self.eta))
        else:
            self._line(f"[{self.done + 1}/{self.total}] {describe(job)} | elapsed "
                       f"{_hms(self.elapsed)} | ETA {_hms(self.eta)}")

    def finish(self, job: _JobLike, ok: bool = True, note: str = "") -> None:
        """Count the job as done; failures are always reported as a line."""
        self.done += 1
        if not ok:
            msg = f"FAILED {describe(job)}" + (f": {note}" if note else "")
            if self._progress is not None:
                self._progress.console.print(msg)
            else:
                self._line(f"  {msg}")
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, eta=_hms(self.eta))


__all__ = ["SweepProgress", "describe"]
