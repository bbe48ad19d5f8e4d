"""Which measurement stands for each (path, variant, order) cell, and how two cells are compared.

A *cell* is one ``PathSummary`` (all rounds of one path at one order and grid with one set of
options) of one results directory. Its *variant* is its options without those that say where files
are rather than what runs (``build_dir``, ``cache_dir``) and without ``graph = false``: ``""`` for a
path as its schedule runs it, ``"library=cute mma=8x8x4"`` for an ablation, ``"sms=96"`` on the
balance axis.

Rules (the same for the report and the crossover map):

- the cell that stands for (path, variant, order) is the one of the newest results directory that
  measured it (date of its first session);
- at each order only the grid most cells ran on counts (the schedule's benchmark grid in practice);
- a ratio A/B at an order comes from the newest directory that measured both (a paired, within-run
  comparison: the rounds' min-max ranges decide when both have at least four rounds, else the 1 %
  criterion, paper §4.5); when no directory holds both, it is formed through a baseline both were
  run against (``(A/G)/(B/G)``, each quotient within its own run) and judged by the 1 %
  cross-campaign criterion;
- the fastest path of an order is the smallest median among the cells that stand for the paths;
  its margin is runner-up/fastest - 1, judged as a ratio is.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from composer.bench.stats import PathSummary, claim_test, ranges_overlap, ratio_width, summarize
from composer.report.sources import BenchSource

#: Options that say where a path finds its files, not what it runs.
LOCATION_OPTIONS = frozenset({"build_dir", "cache_dir"})
DEFAULT = ""  # the variant of a path as its schedule runs it


def variant_options(options_key: str) -> dict[str, object]:
    """The options of a cell that make it a variant (see the module docstring)."""
    options = json.loads(options_key or "{}")
    return {k: v for k, v in sorted(options.items())
            if k not in LOCATION_OPTIONS and not (k == "graph" and v is False)}


def variant_label(options: dict[str, object]) -> str:
    """``"library=cute mma=8x8x4"``; ``"graph"`` for graph replay; ``""`` for the default."""
    parts = []
    for key, value in options.items():
        if key == "graph":
            parts.append("graph" if value else "no-graph")
        elif isinstance(value, dict):
            parts.append(f"{key}=" + ",".join(f"{k}:{v}" for k, v in sorted(value.items())))
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def ordered_paths(names: Iterable[str]) -> list[str]:
    """``names`` in the registry's order (the order every listing shows), unknown ones last."""
    from composer.paths.registry import path_names

    known = path_names()
    return sorted(set(names), key=lambda p: (known.index(p) if p in known else len(known), p))


def series_name(path: str, variant: str) -> str:
    return f"{path} [{variant}]" if variant else path


@dataclass(frozen=True)
class Cell:
    """One path at one order with one variant, as one results directory measured it."""

    source: BenchSource
    summary: PathSummary
    variant: str

    @property
    def path(self) -> str:
        return self.summary.path

    @property
    def order(self) -> int:
        return self.summary.order

    @property
    def grid(self) -> tuple[int, int, int]:
        return self.summary.grid

    @property
    def name(self) -> str:
        return series_name(self.path, self.variant)

    def median(self, metric: str) -> float:
        return self.summary.stats[metric].median

    def has(self, metric: str) -> bool:
        return self.summary.stats[metric].n > 0


#: What a series asks for: a path and the variants that count as it (an ablation may accept the
#: same configuration spelled two ways, e.g. ``library=cute`` and ``library=cute mma=16x8x4``).
Key = tuple[str, tuple[str, ...]]


def key(path: str, *variants: str) -> Key:
    return (path, variants or (DEFAULT,))


@dataclass(frozen=True)
class Comparison:
    """A ratio numerator/denominator at one order, with how it was paired and judged."""

    order: int
    value: float
    numerator: Cell
    denominator: Cell
    pairing: str  # "same run" or "via <baseline>"
    sources: tuple[str, ...]
    overlap: bool | None  # the min-max ranges overlap (None when formed through a baseline)
    resolved: bool
    criterion: str  # "range", "1%" (paired, < 4 rounds) or "1% (cross-run)"
    width: float | None = None  # the per-round ratio's (max - min)/min within the run


@dataclass(frozen=True)
class Winner:
    """The fastest path of one order and its margin over the runner-up."""

    order: int
    cell: Cell
    runner_up: Cell | None
    margin: float  # runner-up / fastest - 1 (NaN without a runner-up)
    overlap: bool | None
    resolved: bool
    criterion: str
    paths: int  # how many paths were compared


@dataclass
class CellIndex:
    """Every cell of a report's bench directories; see the module docstring for the rules."""

    sources: Sequence[BenchSource]
    metric: str
    cells: list[Cell] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # cells off their order's main grid

    def __post_init__(self) -> None:
        raw: list[Cell] = []
        for source in self.sources:
            for summary in summarize(source.records):
                raw.append(Cell(source, summary, variant_label(variant_options(summary.options_key))))
        grids = Counter((c.order, c.grid) for c in raw)
        main = {}
        for (order, grid), n in sorted(grids.items(), key=lambda kv: (-kv[1], kv[0])):
            main.setdefault(order, grid)
        for c in raw:
            if c.grid == main[c.order]:
                self.cells.append(c)
            else:
                self.dropped.append(f"{c.name} p={c.order} grid {'x'.join(map(str, c.grid))} ({c.source.label}): "
                                    f"not the order's main grid {'x'.join(map(str, main[c.order]))}")

    # lookups -------------------------------------------------------------------------------
    def measured(self) -> list[Cell]:
        return [c for c in self.cells if c.has(self.metric)]

    def orders(self, variant: str | None = DEFAULT) -> list[int]:
        return sorted({c.order for c in self.measured() if variant is None or c.variant == variant})

    def paths(self, variant: str | None = DEFAULT) -> list[str]:
        """Paths measured with ``variant`` (any with None), in the registry's order, unknown ones last."""
        return ordered_paths(c.path for c in self.measured() if variant is None or c.variant == variant)

    def variants(self, path: str) -> list[str]:
        return sorted({c.variant for c in self.measured() if c.path == path})

    def candidates(self, k: Key, order: int, commits: frozenset[str] | None = None) -> list[Cell]:
        """Cells of ``k`` at ``order``, newest results directory first; with ``commits``, only
        cells of runs made from one of those commits."""
        path, variants = k
        found = [c for c in self.measured() if c.path == path and c.order == order and c.variant in variants
                 and (commits is None or c.source.identity.commit in commits)]
        return sorted(found, key=lambda c: (c.source.date, c.source.display), reverse=True)

    def latest(self, k: Key, order: int, commits: frozenset[str] | None = None) -> Cell | None:
        found = self.candidates(k, order, commits)
        return found[0] if found else None

    def grid(self, order: int) -> tuple[int, int, int] | None:
        return next((c.grid for c in self.cells if c.order == order), None)

    # comparisons -----------------------------------------------------------------------------
    def compare(self, num: Key, den: Key, order: int, via: Key | None = None,
                commits: frozenset[str] | None = None) -> Comparison | None:
        """num/den at ``order`` (module docstring); ``via`` is the baseline of a cross-run ratio;
        ``commits`` restricts the same-run pairs to runs of those commits."""
        dens = {c.source.label: c for c in self.candidates(den, order, commits)}
        for a in self.candidates(num, order, commits):
            b = dens.get(a.source.label)
            if b is not None and a is not b:
                claim = claim_test(a.summary, b.summary, self.metric)
                return Comparison(order, claim.ratio, a, b, "same run", (a.source.label,),
                                  ranges_overlap(a.summary, b.summary, self.metric), claim.resolved, claim.criterion,
                                  ratio_width(a.summary, b.summary, self.metric))
        if via is None:
            return None
        a_pair = self.compare(num, via, order)
        b_pair = self.compare(den, via, order)
        if a_pair is None or b_pair is None or not b_pair.value:
            return None
        value = a_pair.value / b_pair.value
        resolved = math.isfinite(value) and abs(value - 1.0) > 0.01
        return Comparison(order, value, a_pair.numerator, b_pair.numerator, f"via {via[0]}",
                          (a_pair.sources[0], b_pair.sources[0]), None, resolved, "1% (cross-run)")

    def fastest(self, order: int, paths: Iterable[str] | None = None) -> Winner | None:
        """The fastest of the default variants of ``paths`` (all measured) at ``order``."""
        names = list(paths) if paths is not None else self.paths()
        cells = [c for c in (self.latest(key(p), order) for p in names) if c is not None]
        if not cells:
            return None
        ranked = sorted(cells, key=lambda c: (c.median(self.metric), c.path))
        best = ranked[0]
        if len(ranked) == 1:
            return Winner(order, best, None, math.nan, None, False, "no other path", 1)
        runner = ranked[1]
        same = runner.source is best.source
        claim = claim_test(best.summary, runner.summary, self.metric, "paired" if same else "cross_campaign")
        criterion = claim.criterion if same else "1% (cross-run)"
        return Winner(order, best, runner, runner.median(self.metric) / best.median(self.metric) - 1.0,
                      ranges_overlap(best.summary, runner.summary, self.metric), claim.resolved, criterion,
                      len(ranked))


__all__ = ["DEFAULT", "LOCATION_OPTIONS", "Cell", "CellIndex", "Comparison", "Key", "Winner", "key",
           "ordered_paths", "series_name", "variant_label", "variant_options"]
