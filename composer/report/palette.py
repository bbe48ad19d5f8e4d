"""One colour per path in every figure of the report, fixed by the path's name.

Why fixed rather than assigned in plotting order: a path keeps its colour from the landscape to
the ratios, the ablations and the roofline, and from one report to the next, whichever paths a
report happens to hold. A path this table does not know gets a colour derived from its name (the
same every time). Variants of a path (an ablation's options, an SM count) keep the path's colour
and differ in line style and marker.
"""

from __future__ import annotations

import hashlib

#: The paper's six paths, the H200-native FUSED_TC16 and the CuPy baseline.
PATH_COLORS: dict[str, str] = {
    "GEMM": "#1f77b4",        # blue
    "GEMM_CUTE": "#17becf",   # cyan
    "GEMM_FUSED": "#9467bd",  # purple
    "EINSUM": "#7f7f7f",      # grey
    "FUSED": "#2ca02c",       # green
    "FUSED_TC": "#d62728",    # red
    "FUSED_DFMA": "#ff7f0e",  # orange
    "FUSED_TC16": "#8c564b",  # brown
}
_SPARE = ("#e377c2", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")


def spare_color(index: int) -> str:
    """The ``index``-th colour of those no path uses (series that are not paths: machines)."""
    return _SPARE[index % len(_SPARE)]


def path_color(path: str) -> str:
    """The colour of ``path`` (see the module docstring)."""
    if path in PATH_COLORS:
        return PATH_COLORS[path]
    digest = int(hashlib.sha256(path.encode()).hexdigest(), 16)
    return _SPARE[digest % len(_SPARE)]


def variant_style(index: int) -> tuple[str, str]:
    """(line style, marker) of a path's ``index``-th variant (0: the default variant)."""
    return LINESTYLES[index % len(LINESTYLES)], MARKERS[index % len(MARKERS)]


__all__ = ["PATH_COLORS", "MARKERS", "LINESTYLES", "path_color", "variant_style"]
