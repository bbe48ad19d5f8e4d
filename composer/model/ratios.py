"""Ratios of path totals, the seven scored ratios and the separation-to-error screen (paper §7.2,
§9.1, S10).

A ratio ``A/B`` is time(A)/time(B). Its family is the unordered pair {A, B}; differences are
logarithmic, 100 |ln r| in percent, so A/B and B/A have the same size. The screen (Equation
S10.1): ``S/E = |ln r_pred| / eps_family`` with eps_family the median |ln(r_pred / r_meas)| of
the family on transfers the target takes no part in; a ranking is screened in at S/E >= 1.
Beyond the paper, eps_family is floored at the bench's resolution (1 %: with fewer than four
rounds a ratio within 1 % of one is not resolved, composer/bench/stats.py): two paths that launch
the same kernels (GEMM_CUTE on cuBLAS against GEMM) have a family error of a few tenths of a per
cent, so without the floor a 0.3 % predicted difference, below what any run resolves, counted as a
screened ranking (session 8: eight such "wrong" signs of GEMM_CUTE/GEMM). Declared before the
session-8 second prospective test; the first was scored without it.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Mapping

#: Table 9: the seven scored ratios, first named path over second.
SEVEN_RATIOS: tuple[tuple[str, str], ...] = (
    ("FUSED_DFMA", "FUSED_TC"), ("GEMM", "FUSED_TC"), ("GEMM_CUTE", "GEMM_FUSED"),
    ("GEMM_FUSED", "FUSED_TC"), ("FUSED_DFMA", "FUSED"), ("FUSED", "FUSED_TC"), ("GEMM_CUTE", "GEMM"),
)
SCREEN_THRESHOLD = 1.0
#: The smallest family error the screen divides by, in percent: the bench's resolution.
RESOLUTION_PCT = 1.0


def orientation(a: str, b: str) -> tuple[str, str]:
    """The pair as the paper writes it (Table 9), else alphabetically."""
    for pair in SEVEN_RATIOS:
        if {a, b} == set(pair):
            return pair
    return (a, b) if a <= b else (b, a)


def family(a: str, b: str) -> str:
    """The family key of a pair: ``"A/B"`` in its orientation."""
    first, second = orientation(a, b)
    return f"{first}/{second}"


def log_pct(r: float) -> float:
    """100 ln r."""
    return 100.0 * math.log(r)


def separation_to_error(r_pred: float, family_error_pct: float | None,
                        floor_pct: float = RESOLUTION_PCT) -> float | None:
    """|ln r_pred| / max(eps_family, floor_pct) (both in percent); None without a family error.
    ``floor_pct=0`` is the paper's rule (and the one session 6 and session 8's first test were
    scored with)."""
    if family_error_pct is None:
        return None
    eps = max(family_error_pct, floor_pct)
    if eps <= 0:
        return math.inf
    return abs(log_pct(r_pred)) / eps


def ratio_cells(totals: Mapping[tuple[str, int], float], family_errors: Mapping[str, float] | None
                ) -> list[dict[str, Any]]:
    """Every pair of paths predicted at the same order: r, its size and S/E when known."""
    orders = sorted({o for _, o in totals})
    out = []
    for order in orders:
        paths = sorted(p for p, o in totals if o == order)
        for a, b in combinations(paths, 2):
            first, second = orientation(a, b)
            r = totals[(first, order)] / totals[(second, order)]
            key = f"{first}/{second}"
            eps = None if family_errors is None else family_errors.get(key)
            out.append({"order": order, "ratio": key, "seven": (first, second) in SEVEN_RATIOS,
                        "r": r, "log_pct": log_pct(r), "family_error_pct": eps,
                        "se": separation_to_error(r, eps)})
    return out


def fastest_with_separation(totals: Mapping[tuple[str, int], float],
                            family_errors: Mapping[str, float] | None) -> list[dict[str, Any]]:
    """Per order: the path with the smallest total and the smallest S/E of its ratio to every other
    path (the choice is screened in when that is >= 1, §7.3); None where a family error is missing."""
    out = []
    for order in sorted({o for _, o in totals}):
        paths = {p: t for (p, o), t in totals.items() if o == order}
        best = min(paths, key=lambda p: (paths[p], p))
        se_values = []
        for other, t in paths.items():
            if other == best:
                continue
            eps = None if family_errors is None else family_errors.get(family(best, other))
            se_values.append(separation_to_error(t / paths[best], eps))
        known = [s for s in se_values if s is not None]
        se = min(known) if known and len(known) == len(se_values) else None
        out.append({"order": order, "path": best, "seconds": paths[best], "paths": len(paths), "se": se,
                    "screened": None if se is None else se >= SCREEN_THRESHOLD})
    return out
