"""The campaign's time budget (``--budget-s``): no step starts that its estimate says would not fit,
and a step still running when the budget is spent is stopped (SIGALRM; main thread only).

Why a hard stop as well: estimates are rough, and a device lease that runs out loses everything not
yet written. What a stopped step had finished is on disk (a bench run is appended and fsynced the
moment it ends); the step is rerun, and resumes, in the next session. ``BudgetExhausted`` derives
from BaseException so that the commands' own ``except Exception`` (a failed run recorded, the sweep
going on) does not swallow it.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator


class BudgetExhausted(BaseException):
    """The budget was spent while a step ran."""


class Budget:
    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.start = clock()

    @property
    def elapsed(self) -> float:
        return self.clock() - self.start

    def remaining(self) -> float:
        return math.inf if self.seconds is None else self.seconds - self.elapsed

    def fits(self, estimate_s: float) -> bool:
        return estimate_s <= self.remaining()

    @contextlib.contextmanager
    def hard_stop(self, enabled: bool = True) -> Iterator[None]:
        """Raise BudgetExhausted in the block when the budget runs out (a no-op without a budget, off
        the main thread, or where SIGALRM does not exist)."""
        left = self.remaining()
        usable = (enabled and self.seconds is not None and hasattr(signal, "setitimer")
                  and threading.current_thread() is threading.main_thread())
        if not usable:
            yield
            return
        if left <= 0:
            raise BudgetExhausted()

        def expire(signum: int, frame: object) -> None:
            raise BudgetExhausted()

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, left)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


__all__ = ["Budget", "BudgetExhausted"]
