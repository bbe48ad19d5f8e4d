"""Interleaved-round job schedules with resume.

Why interleave: the paper runs the paths "in turn in interleaved rounds with one run per
path per round" (Section 4.2), so slow drift (clock, temperature, a neighbour job) hits
every path alike instead of biasing whichever path ran last.

Why rotate: with a fixed order within each round, a path always runs at the same
position, e.g. always right after the heaviest path (warm GPU, lower boost clock).
Arrangements, per round r of an order with n paths:

* ``"fixed"``    -- the given order every round (the paper's literal protocol);
* ``"rotate"``   -- cyclic shift by r: over n rounds each path takes every position
  once; the predecessor of a path is still always the same one;
* ``"williams"`` -- a Williams Latin square: over n rounds (2n for odd n) every path
  takes every position equally often *and* follows every other path equally often,
  balancing first-order carry-over (thermal/clock state left by the previous run);
* ``"shuffle"``  -- an independent seeded permutation per round.

``seed`` (any int/str) shuffles the base path order per order reproducibly before the
arrangement is applied; ``None`` keeps the given order, so a schedule is deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from composer.bench.records import JobKey

Arrangement = Literal["fixed", "rotate", "williams", "shuffle"]
Rounds = int | Mapping[int, int] | Callable[[int], int]


@dataclass(frozen=True)
class Job:
    """One run to execute: ``path`` at ``order`` in round ``round_index``."""

    path: str
    order: int
    round_index: int
    position: int  # place within its round, 0-based

    @property
    def key(self) -> JobKey:
        """Resume key; equals RunRecord.key of the run that executes this job."""
        return (self.path, self.order, self.round_index)


def williams_rows(n: int) -> list[list[int]]:
    """Rows of a Williams design for n treatments (n rows if n is even, else 2n)."""
    if n <= 0:
        return []
    first = [0]
    lo, hi = 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(t + r) % n for t in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return rows


def round_orders(paths: Sequence[str], n_rounds: int, arrangement: Arrangement = "rotate",
                 seed: int | str | None = None, salt: object = "") -> list[list[str]]:
    """Path order of each of ``n_rounds`` rounds."""
    base = list(paths)
    if len(set(base)) != len(base):
        raise ValueError(f"duplicate path labels in {base!r}")
    if seed is not None:
        random.Random(f"{seed}|{salt}").shuffle(base)
    n = len(base)
    if n == 0:
        return [[] for _ in range(n_rounds)]
    if arrangement == "fixed":
        return [list(base) for _ in range(n_rounds)]
    if arrangement == "rotate":
        return [base[r % n:] + base[:r % n] for r in range(n_rounds)]
    if arrangement == "williams":
        rows = williams_rows(n)
        return [[base[i] for i in rows[r % len(rows)]] for r in range(n_rounds)]
    if arrangement == "shuffle":
        out = []
        for r in range(n_rounds):
            perm = list(base)
            random.Random(f"{seed}|{salt}|{r}").shuffle(perm)
            out.append(perm)
        return out
    raise ValueError(f"unknown arrangement {arrangement!r}")


def _rounds_for(rounds: Rounds, order: int) -> int:
    if isinstance(rounds, int):
        return rounds
    if isinstance(rounds, Mapping):
        return int(rounds[order])
    return int(rounds(order))


def interleaved_schedule(paths: Sequence[str], orders: Iterable[int], rounds: Rounds,
                         seed: int | str | None = None,
                         arrangement: Arrangement = "rotate") -> list[Job]:
    """Jobs per order, per round, every path once per round.

    ``rounds`` is a count, a {order: count} mapping or a function of the order (the
    paper uses six rounds at p <= 511 and three at p >= 575).
    """
    jobs: list[Job] = []
    for order in orders:
        for r, seq in enumerate(round_orders(paths, _rounds_for(rounds, order),
                                             arrangement, seed, salt=order)):
            jobs.extend(Job(p, order, r, i) for i, p in enumerate(seq))
    return jobs


def remaining_jobs(schedule: Sequence[Job], completed: Iterable[JobKey]) -> list[Job]:
    """The jobs of ``schedule`` whose key is not in ``completed``, in schedule order."""
    done = set(completed)
    return [j for j in schedule if j.key not in done]


__all__ = ["Arrangement", "Job", "williams_rows", "round_orders", "interleaved_schedule",
           "remaining_jobs"]


def interleaved_samples(measure: Callable[[str], float], labels: Sequence[str], rounds: int) -> dict[str, list[float]]:
    """``measure(label)`` of every label once per round, the order rotated each round (drift spreads
    over all candidates alike): label -> its samples. A sample that is not a positive time is an
    error naming the label (a broken timer must not pick a winner)."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    samples: dict[str, list[float]] = {lab: [] for lab in labels}
    for order in round_orders(list(labels), rounds, "rotate"):
        for lab in order:
            t = float(measure(lab))
            if not t > 0:
                raise ValueError(f"measure({lab}) returned {t}: expected a positive time")
            samples[lab].append(t)
    return samples
